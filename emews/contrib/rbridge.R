# The R side of emews's R bridge (emews/contrib/rbridge.py): helper functions, defined once per
# process in an environment whose parent is globalenv(); the value of this file is that environment.
local({
  .emews_signal <- function(r) {
    stop(structure(class = c(as.character(r$class), "emews_error", "error", "condition"),
                   list(message = as.character(r$message), call = NULL)))
  }
  .emews_call <- function(f, ...) {
    r <- f(...)
    if (inherits(r, "emews_py_error")) .emews_signal(r)
    r
  }
  .emews_make_evaluator <- function(py) {
    list(
      put = function(points) .emews_call(py$put, points),
      get = function(n = 1L, timeout = NULL, more_room = NULL) .emews_call(py$get, n, timeout, more_room),
      map = function(points) .emews_call(py$map, points),
      remaining = function() .emews_call(py$remaining),
      pending = function() .emews_call(py$pending),
      workers = function() .emews_call(py$workers),
      capacity = function() .emews_call(py$capacity),
      room = function(own) .emews_call(py$room, own),
      seed = function() .emews_call(py$seed),
      direction = function() .emews_call(py$direction),
      history = function() .emews_call(py$history),
      log = function(..., level = "info") {
        invisible(.emews_call(py$log, as.character(level), paste0(..., collapse = "")))
      },
      set_info = function(key, value) invisible(.emews_call(py$set_info, as.character(key), value))
    )
  }
  .emews_df <- function(cols) {
    df <- as.data.frame(cols, stringsAsFactors = FALSE, optional = TRUE)
    if (length(cols) > 0 && ncol(df) == length(cols)) names(df) <- names(cols)
    df
  }
  .emews_points_columns <- function(points, nullable = character(0)) {
    if (is.data.frame(points)) {
      cols <- as.list(points)
      n <- nrow(points)
    } else if (is.list(points)) {
      if (length(points) > 0 && !is.null(names(points)) && !any(vapply(points, is.list, NA)))
        points <- list(points)  # a single point given as a named list
      if (!all(vapply(points, function(p) is.list(p) || is.atomic(p), NA)))
        stop("points must be a data.frame or a list of named lists (one per point)")
      n <- length(points)
      keys <- unique(unlist(lapply(points, names)))
      cols <- list()
      for (k in keys) {
        vals <- vector("list", n)
        for (i in seq_len(n)) {
          v <- points[[i]][[k]]
          if (is.null(v) || length(v) != 1L)
            stop(sprintf("point %d has no single value for parameter '%s'", i, k))
          if (is.factor(v)) v <- as.character(v)
          vals[[i]] <- v
        }
        cols[[k]] <- unlist(vals)
      }
    } else {
      stop("points must be a data.frame or a list of named lists (one per point), not ",
           paste(class(points), collapse = "/"))
    }
    for (k in names(cols)) {
      col <- cols[[k]]
      if (is.factor(col)) col <- as.character(col)
      if (is.list(col)) stop(sprintf("column '%s' of points is a list; use an atomic column", k))
      bad <- which(is.na(col))
      if (length(bad) > 0 && !(k %in% nullable)) stop(sprintf("point %d has NA for parameter '%s'", bad[1], k))
      cols[[k]] <- col
    }
    list(n = as.integer(n), cols = cols)
  }
  .emews_trace <- function(calls) {
    at <- 0L
    for (i in seq_along(calls)) {
      f <- calls[[i]][[1L]]
      if (is.name(f) && identical(as.character(f), "withCallingHandlers")) { at <- i; break }
    }
    calls <- if (at > 0L) calls[-seq_len(at)] else calls
    lines <- character(0)
    for (cl in calls) {
      f <- cl[[1L]]
      fname <- if (is.name(f)) as.character(f) else ""
      if (fname %in% c(".handleSimpleError", "h", "stop", ".emews_signal", "simpleError")) next
      text <- paste(deparse(cl, width.cutoff = 100L, nlines = 1L), collapse = " ")
      if (nchar(text) > 120L) text <- paste0(substr(text, 1L, 117L), "...")
      sr <- attr(cl, "srcref")
      if (!is.null(sr)) {
        sf <- attr(sr, "srcfile")
        file <- if (!is.null(sf) && !is.null(sf$filename)) basename(sf$filename) else "?"
        text <- sprintf("%s  [%s#%d]", text, file, sr[1L])
      }
      lines <- c(lines, text)
    }
    if (length(lines) > 30L) lines <- c(lines[1:10], "...", utils::tail(lines, 19L))
    lines
  }
  # the options an entry function declares, with their defaults: its `options` argument's default
  # list (function(evaluator, space, options = list(batch = 4L))); NULL when it has none
  .emews_option_defaults <- function(fn) {
    f <- formals(fn)
    if (!("options" %in% names(f)) || identical(f$options, quote(expr = ))) return(NULL)
    defaults <- eval(f$options, environment(fn))
    if (is.null(defaults)) return(NULL)
    if (!is.list(defaults) || (length(defaults) > 0 && (is.null(names(defaults)) || any(names(defaults) == ""))))
      stop("the default of the entry function's options argument must be a named list ",
           "(options = list(name = default, ...))")
    defaults
  }
  # an option declared with what it allows, in the options list: emews_option(default, min = NULL,
  # integer = FALSE) (emews check refuses a value below min, or not an integer); a character vector
  # of more than one value declares the values allowed, the first the default (as R's match.arg)
  emews_option <- function(default = NULL, min = NULL, integer = FALSE)
    structure(list(default = default, min = min, integer = integer), class = "emews_option")
  # the default an option's declaration gives the run
  .emews_option_value <- function(declared) {
    if (inherits(declared, "emews_option")) return(declared$default)
    if (is.character(declared) && length(declared) > 1L) return(declared[[1L]])
    declared
  }
  .emews_option_names <- function(fn) {
    tryCatch({
      defaults <- .emews_option_defaults(fn)
      list(ok = TRUE, declared = !is.null(defaults), names = as.character(names(defaults)),
           choices = lapply(defaults, function(d) if (is.character(d) && length(d) > 1L) d else character(0)),
           min = vapply(defaults, function(d)
             if (inherits(d, "emews_option") && !is.null(d$min)) as.numeric(d$min) else NA_real_, numeric(1)),
           integer = vapply(defaults, function(d) inherits(d, "emews_option") && isTRUE(d$integer), logical(1)))
    }, error = function(e) list(ok = FALSE, message = conditionMessage(e)))
  }
  .emews_run <- function(fn, evaluator, space, options, on_warning) {
    trace <- character(0)
    tryCatch({
      defaults <- .emews_option_defaults(fn)
      if (!is.null(defaults)) {  # the options given over the declared defaults
        defaults <- lapply(defaults, .emews_option_value)
        defaults[names(options)] <- options
        options <- defaults
      }
      value <- withCallingHandlers(fn(evaluator, space, options),
        error = function(e) trace <<- .emews_trace(sys.calls()),
        warning = function(w) {
          on_warning(conditionMessage(w))
          invokeRestart("muffleWarning")
        })
      list(ok = TRUE, value = value)
    }, error = function(e) {
      cl <- conditionCall(e)
      list(ok = FALSE, message = conditionMessage(e),
           call = if (is.null(cl)) NA_character_ else paste(deparse(cl, nlines = 1L), collapse = " "),
           classes = class(e), trace = trace)
    })
  }
  # from now on, note the files source() and sys.source() read (an R optimizer's check: the files
  # its answer depends on, with .emews_read_files)
  .emews_watch_sources <- function() {
    assign(".emews_sourced_files", character(0), envir = globalenv())
    for (f in c("source", "sys.source"))
      suppressMessages(trace(f, print = FALSE, where = baseenv(), tracer = quote(
        if (is.character(file) && length(file) == 1L)
          assign(".emews_sourced_files", c(get(".emews_sourced_files", envir = globalenv()),
                                           normalizePath(file, mustWork = FALSE)), envir = globalenv()))))
    invisible(NULL)
  }
  # the files sourced since .emews_watch_sources (not those of packages, which their library folder
  # stands for), and the library folders packages load from
  .emews_read_files <- function() {
    libraries <- normalizePath(.libPaths(), mustWork = FALSE)
    sourced <- unique(get0(".emews_sourced_files", envir = globalenv(), ifnotfound = character(0)))
    in_library <- vapply(sourced, function(f) any(startsWith(f, paste0(libraries, "/"))), logical(1))
    c(sourced[!in_library], libraries)
  }
  .emews_source <- function(path, entry, parent) {
    env <- new.env(parent = parent)
    tryCatch({
      source(path, local = env, keep.source = TRUE, echo = FALSE)
      if (!exists(entry, envir = env, inherits = FALSE) || !is.function(get(entry, envir = env)))
        return(list(ok = FALSE, message = sprintf("%s does not define a function named '%s'", path, entry)))
      list(ok = TRUE, fn = get(entry, envir = env))
    }, error = function(e) list(ok = FALSE, message = conditionMessage(e)))
  }

  # a categorical's values as the distinct, non-missing labels of its factor levels: a null (NA in
  # R, which ParamHelpers refuses as a level, also as the name "NA") is "null", and values alike as text (1 and "1") are told apart
  .emews_levels <- function(values) {
    lv <- as.character(values)
    lv[is.na(lv)] <- "null"
    make.unique(lv)
  }
  # an int parameter's values as R integers where its bounds fit them (31 bits), else as whole doubles
  # (as.integer would make NA of them)
  .emews_int32 <- function(p) max(abs(c(p$lower, p$upper))) < .Machine$integer.max
  .emews_whole <- function(p, x) if (.emews_int32(p)) as.integer(x) else round(as.numeric(x))
  emews_param_set <- function(space) {
    if (!requireNamespace("ParamHelpers", quietly = TRUE))
      stop("emews_param_set needs the R package ParamHelpers (apt-get install r-cran-paramhelpers)")
    params <- list()
    for (p in space) {
      id <- p$name
      par <- switch(p$type,
        float = if (isTRUE(p$log)) ParamHelpers::makeNumericParam(id, log(p$lower), log(p$upper))
                else ParamHelpers::makeNumericParam(id, p$lower, p$upper),
        int = if (isTRUE(p$log)) ParamHelpers::makeNumericParam(id, log(p$lower), log(p$upper + 1) - 1e-9)
              else if (.emews_int32(p)) ParamHelpers::makeIntegerParam(id, p$lower, p$upper)
              else ParamHelpers::makeNumericParam(id, p$lower, p$upper),
        ordered = ParamHelpers::makeIntegerParam(id, 1L, length(p$values)),
        categorical = ParamHelpers::makeDiscreteParam(id, values = .emews_levels(p$values)),
        constant = NULL,
        stop("unknown parameter type ", p$type))
      if (!is.null(par)) params[[length(params) + 1L]] <- par
    }
    do.call(ParamHelpers::makeParamSet, params)
  }
  .emews_columns <- function(space, df, convert) {
    out <- list()
    for (p in space) {
      if (p$type == "constant") next
      out[[p$name]] <- convert(p, df[[p$name]])
    }
    .emews_df(out)
  }
  emews_decode <- function(space, df) .emews_columns(space, df, function(p, x) switch(p$type,
    float = if (isTRUE(p$log)) pmin(pmax(exp(x), p$lower), p$upper) else pmin(pmax(x, p$lower), p$upper),
    int = .emews_whole(p, if (isTRUE(p$log)) pmin(pmax(floor(exp(x)), p$lower), p$upper)
                          else pmin(pmax(round(x), p$lower), p$upper)),
    ordered = p$values[pmin(pmax(as.integer(round(x)), 1L), length(p$values))],
    categorical = p$values[match(as.character(x), .emews_levels(p$values))]))
  emews_encode <- function(space, df) .emews_columns(space, df, function(p, x) switch(p$type,
    float = if (isTRUE(p$log)) log(x) else as.numeric(x),
    int = if (isTRUE(p$log)) log(x) + 0.5 * (log(x + 1) - log(x)) else .emews_whole(p, x),
    ordered = match(as.character(x), as.character(p$values)),
    categorical = factor(.emews_levels(p$values)[match(as.character(x), as.character(p$values))],
                         levels = .emews_levels(p$values))))
  environment()
}, envir = new.env(parent = globalenv()))
