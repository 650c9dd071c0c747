# Model-based optimization (mlrMBO style) for emews, run through emews.contrib.rbridge.
#
# Entry: emews_mbo(evaluator, space, options), which declares the options (optimizers/mbo.py says them).
#
# Two implementations, chosen by options$implementation ("auto" by default):
#  * "mlrMBO": mlrMBO's human-in-the-loop API (initSMBO / proposePoints / updateSMBO) with
#    mlrMBO's random-forest surrogate (jackknife standard errors), batches of workers() points
#    per round (multi-point "cb" = qLCB, or "cl" = constant liar for EI). Used where the mlrMBO
#    package is installed.
#  * "fallback (mlr + randomForest)": the same loop built from mlr, ParamHelpers, lhs and
#    randomForest, refilling workers asynchronously as results arrive:
#      - Latin hypercube initial design (ParamHelpers::generateDesign with lhs::randomLHS),
#      - surrogate: mlr regr.randomForest with predict.type = "se" (standard error = spread of
#        the per-tree predictions, mlr's se.method "sd"), nodesize 2, fitted to log-transformed
#        losses (log(y - min(y) + q10), option transform = "log" | "rank" | "none"): a
#        heavy-tailed loss otherwise lets the worst points dominate the forest's splits,
#      - infill: confidence bound (mean - lambda * se; every proposal draws its lambda from an
#        exponential distribution with mean lambda, as mlrMBO's multi-point qLCB, which mixes
#        pure exploitation with exploration) or expected improvement (batches diversified by a
#        distance penalty around the points already chosen or still being evaluated),
#      - optimized over `candidates` points: half uniform random, half local perturbations of
#        the five best points seen (a one-step focus search).
#
# Parameters are modelled in an encoded space (emews_param_set): log-scaled numbers on their
# log range, ordered values by rank, categorical values as factors (levels: .emews_levels, a
# null among them "null").
#
# Failed evaluations (loss Inf: exceptions, crashes, timeouts) stay in the model with their loss
# imputed as the worst finite loss seen so far (re-imputed at every refit in the fallback), so the
# surrogate learns to avoid the region without the scale being blown up. While no evaluation has
# succeeded, proposals are random (Latin hypercube).
#
# A resumed run (evaluator$history(): the earlier runs' results) starts from them: they are
# the initial design (with their y), topped up to n_initial with Latin hypercube points when
# there are fewer. Results of tasks an earlier run left running arrive like any other.

.mbo_fallback_name <- "fallback (mlr + randomForest)"

# the options emews takes, the one place that says each one's default and the values allowed
# (emews check refuses any other name or value: ROptimizer.check); seed NULL is the run's seed,
# n_initial NULL max(4 * d, workers); a vector of names: one of them, the first the default
emews_mbo <- function(evaluator, space,
                      options = list(seed = NULL, n_initial = emews_option(NULL, min = 1L, integer = TRUE),
                                     infill = c("cb", "ei"), lambda = emews_option(1, min = 0),
                                     candidates = emews_option(2000L, min = 1L, integer = TRUE),
                                     ntree = emews_option(200L, min = 1L, integer = TRUE),
                                     transform = c("log", "rank", "none"),
                                     implementation = c("auto", "mlrMBO", "fallback"))) {
  opts <- .mbo_options(options, evaluator)
  impl <- .mbo_implementation(opts$implementation)
  evaluator$set_info("implementation", impl)
  set.seed(opts$seed)
  if (requireNamespace("mlr", quietly = TRUE))
    mlr::configureMlr(show.info = FALSE, on.learner.warning = "quiet", on.par.without.desc = "warn")

  free <- Filter(function(p) p$type != "constant", space)
  if (length(free) == 0L) {
    # nothing to search over: evaluate the single point of the space once
    if (evaluator$remaining() > 0) evaluator$map(list(list()))
    return(list(implementation = impl, evaluations = 1L))
  }
  # model on internal, syntactic names p1..pd; map back to the real names at the boundary
  enc <- free
  for (i in seq_along(enc)) enc[[i]]$name <- sprintf("p%d", i)
  names(enc) <- vapply(enc, function(p) p$name, "")
  ctx <- list(evaluator = evaluator, opts = opts, free = free, enc = enc,
              ps = emews_param_set(enc), real = vapply(free, function(p) p$name, ""))

  out <- if (impl == "mlrMBO") .mbo_run_mlrmbo(ctx) else .mbo_run_fallback(ctx)
  c(list(implementation = impl), out)
}

# the options as the run uses them: the declared defaults are under those given already
# (emews_mbo's declaration, checked by emews check), so only the run's seed and types are added here
.mbo_options <- function(options, evaluator) {
  list(
    seed = as.integer(if (is.null(options$seed)) evaluator$seed() else options$seed),
    n_initial = if (is.null(options$n_initial)) NA else as.integer(options$n_initial),
    infill = as.character(options$infill),
    lambda = as.numeric(options$lambda),
    candidates = as.integer(options$candidates),
    ntree = as.integer(options$ntree),
    implementation = as.character(options$implementation),
    transform = as.character(options$transform),
    nodesize = 2L)
}

.mbo_implementation <- function(which) {
  has_mbo <- requireNamespace("mlrMBO", quietly = TRUE)
  if (which == "mlrMBO" && !has_mbo)
    stop("implementation 'mlrMBO' asked for, but the R package mlrMBO is not installed")
  if (which == "mlrMBO" || (which == "auto" && has_mbo)) return("mlrMBO")
  for (pkg in c("mlr", "ParamHelpers", "lhs", "randomForest"))
    if (!requireNamespace(pkg, quietly = TRUE))
      stop("mbo needs the R package ", pkg, " (tools/install-r.sh installs it)")
  .mbo_fallback_name
}

.mbo_n_initial <- function(ctx) {
  n0 <- ctx$opts$n_initial
  if (is.null(n0) || is.na(n0)) n0 <- max(4L * length(ctx$free), ctx$evaluator$workers())
  as.integer(min(max(1L, n0), ctx$evaluator$remaining()))
}

# the earlier runs' results as an initial design: list(X = encoded rows or NULL, y = losses)
.mbo_history <- function(ctx) {
  hist <- ctx$evaluator$history()
  if (is.null(hist) || nrow(hist) == 0L) return(list(X = NULL, y = numeric(0)))
  list(X = .mbo_encode(ctx, hist), y = as.numeric(hist$loss))
}

# results (real parameter names) -> encoded rows
.mbo_encode <- function(ctx, res) {
  df <- res[, ctx$real, drop = FALSE]
  names(df) <- names(ctx$enc)
  .mbo_normalize(ctx, emews_encode(ctx$enc, df))
}

# encoded rows -> points of the real space (constants are filled in by the bridge)
.mbo_decode <- function(ctx, df) {
  pts <- emews_decode(ctx$enc, df)
  names(pts) <- ctx$real
  pts
}

.mbo_normalize <- function(ctx, df) {
  for (p in ctx$enc) if (p$type == "categorical")
    df[[p$name]] <- factor(as.character(df[[p$name]]), levels = .emews_levels(p$values))
  df <- df[, names(ctx$enc), drop = FALSE]
  rownames(df) <- NULL
  df
}

.mbo_design <- function(ctx, n) {
  d <- ParamHelpers::generateDesign(n, ctx$ps, fun = lhs::randomLHS)
  .mbo_normalize(ctx, as.data.frame(d))
}

.mbo_impute <- function(y) {
  ok <- is.finite(y)
  if (!any(ok)) return(NULL)
  y[!ok] <- max(y[ok])
  y
}

.mbo_transform <- function(y, how) {
  if (how == "rank") return(rank(y, ties.method = "average") / length(y))
  if (how == "log") {
    s <- y - min(y)
    off <- max(stats::quantile(s, 0.1, names = FALSE), 1e-12)
    return(log(s + off))
  }
  y
}

.mbo_summary <- function(ctx, X, y) {
  ok <- is.finite(y)
  best <- NULL
  if (any(ok)) best <- as.list(.mbo_decode(ctx, X[which.min(ifelse(ok, y, Inf)), , drop = FALSE]))
  list(evaluations = length(y), failed = sum(!ok),
       best_loss = if (any(ok)) min(y[ok]) else NA_real_, best = best)
}

# ---------------------------------------------------------------------------------------------
# mlrMBO (where installed)

.mbo_run_mlrmbo <- function(ctx) {
  ev <- ctx$evaluator
  opts <- ctx$opts
  q <- max(1L, ev$workers())
  hist <- .mbo_history(ctx)
  X_all <- hist$X
  y_all <- hist$y
  n0 <- .mbo_n_initial(ctx) - length(y_all)
  if (n0 > 0L) {
    design <- .mbo_design(ctx, n0)
    res <- ev$map(.mbo_decode(ctx, design))
    X_all <- rbind(X_all, design)
    y_all <- c(y_all, res$loss)
  }
  if (ev$remaining() == 0L) return(.mbo_summary(ctx, X_all, y_all))
  y0 <- .mbo_impute(y_all)
  while (is.null(y0) && ev$remaining() > 0) {
    # nothing succeeded yet: more random design points before a model can be fitted
    extra <- .mbo_design(ctx, min(q, ev$remaining()))
    res <- ev$map(.mbo_decode(ctx, extra))
    X_all <- rbind(X_all, extra)
    y_all <- c(y_all, res$loss)
    y0 <- .mbo_impute(y_all)
  }
  if (is.null(y0)) return(.mbo_summary(ctx, X_all, y_all))
  design <- X_all
  design$y <- y0

  ctrl <- mlrMBO::makeMBOControl(propose.points = q)
  if (opts$infill == "ei") {
    crit <- mlrMBO::makeMBOInfillCritEI()
  } else if (q > 1L) {
    crit <- mlrMBO::makeMBOInfillCritCB()  # qLCB draws its own lambdas
  } else {
    crit <- mlrMBO::makeMBOInfillCritCB(cb.lambda = opts$lambda)
  }
  ctrl <- mlrMBO::setMBOControlInfill(ctrl, crit = crit, opt = "focussearch",
                                      opt.focussearch.points = opts$candidates)
  if (q > 1L) ctrl <- mlrMBO::setMBOControlMultiPoint(ctrl, method = if (opts$infill == "ei") "cl" else "cb")
  lrn <- mlr::makeLearner("regr.randomForest", predict.type = "se", se.method = "jackknife",
                          keep.inbag = TRUE, ntree = opts$ntree)
  state <- mlrMBO::initSMBO(par.set = ctx$ps, design = design, control = ctrl, minimize = TRUE,
                            noisy = FALSE, learner = lrn, show.info = FALSE)
  while (ev$remaining() > 0) {
    prop <- mlrMBO::proposePoints(state)
    x <- .mbo_normalize(ctx, as.data.frame(prop$prop.points))
    x <- x[seq_len(min(nrow(x), ev$remaining())), , drop = FALSE]
    res <- ev$map(.mbo_decode(ctx, x))
    X_all <- rbind(X_all, x)
    y_all <- c(y_all, res$loss)
    worst <- max(y_all[is.finite(y_all)])
    y <- ifelse(is.finite(res$loss), res$loss, worst)
    mlrMBO::updateSMBO(state, x = x, y = as.list(y))
  }
  .mbo_summary(ctx, X_all, y_all)
}

# ---------------------------------------------------------------------------------------------
# fallback: mlr + ParamHelpers + lhs + randomForest, asynchronous refill

.mbo_bounds <- function(ctx) {
  lapply(ctx$enc, function(p) {
    switch(p$type,
      float = if (isTRUE(p$log)) c(log(p$lower), log(p$upper)) else c(p$lower, p$upper),
      int = if (isTRUE(p$log)) c(log(p$lower), log(p$upper + 1) - 1e-9) else c(p$lower, p$upper),
      ordered = c(1, length(p$values)),
      categorical = NULL)
  })
}

# rows -> [0, 1]^d matrix, for distances between points
.mbo_unit <- function(ctx, df, bounds) {
  m <- matrix(0, nrow(df), length(ctx$enc))
  for (j in seq_along(ctx$enc)) {
    p <- ctx$enc[[j]]
    x <- df[[p$name]]
    if (p$type == "categorical") {
      k <- length(p$values)
      m[, j] <- (as.integer(x) - 0.5) / k
    } else {
      b <- bounds[[j]]
      m[, j] <- if (b[2] > b[1]) (as.numeric(x) - b[1]) / (b[2] - b[1]) else 0.5
    }
  }
  m
}

# uniform random rows of the encoded space (much faster than ParamHelpers::generateRandomDesign)
.mbo_random <- function(ctx, n, bounds) {
  out <- list()
  for (j in seq_along(ctx$enc)) {
    p <- ctx$enc[[j]]
    b <- bounds[[j]]
    out[[p$name]] <- switch(p$type,
      categorical = factor(sample(.emews_levels(p$values), n, replace = TRUE), levels = .emews_levels(p$values)),
      ordered = sample.int(length(p$values), n, replace = TRUE),
      int = if (isTRUE(p$log)) runif(n, b[1], b[2])
            else .emews_whole(p, pmin(b[1] + floor(runif(n) * (b[2] - b[1] + 1)), b[2])),
      float = runif(n, b[1], b[2]))
  }
  as.data.frame(out, stringsAsFactors = FALSE)
}

# local candidates: Gaussian steps (log-uniform step size) around the best rows
.mbo_local <- function(ctx, base, n, bounds) {
  if (n <= 0L || nrow(base) == 0L) return(NULL)
  rows <- base[sample.int(nrow(base), n, replace = TRUE), , drop = FALSE]
  d <- length(ctx$enc)
  for (j in seq_along(ctx$enc)) {
    p <- ctx$enc[[j]]
    x <- rows[[p$name]]
    if (p$type == "categorical") {
      flip <- runif(n) < 1 / max(2, d)
      x[flip] <- factor(sample(.emews_levels(p$values), sum(flip), replace = TRUE),
                        levels = .emews_levels(p$values))
    } else {
      b <- bounds[[j]]
      step <- exp(runif(n, log(0.002), log(0.25))) * (b[2] - b[1])
      x <- pmin(pmax(as.numeric(x) + rnorm(n) * step, b[1]), b[2])
      if (p$type == "ordered") x <- as.integer(round(x))
      if (p$type == "int" && !isTRUE(p$log)) x <- .emews_whole(p, x)
    }
    rows[[p$name]] <- x
  }
  rownames(rows) <- NULL
  rows
}

.mbo_fit_predict <- function(ctx, X, y, C) {
  data <- X
  data$y_ <- y
  # fixup.data "no" (and no check, which refuses empty levels): a categorical value no result has
  # yet keeps its level; mlr would drop it, and the forest could then not rank candidates that
  # have it (the first fits of a wide run, on a few results, ended the run)
  task <- mlr::makeRegrTask(id = "emews_mbo", data = data, target = "y_", fixup.data = "no",
                            check.data = FALSE)
  model <- mlr::train(ctx$learner, task)
  # mlr's se.method = "sd" is the spread of the per-tree predictions; computed here without
  # mlr's row-wise apply(), which costs more than fitting the forest
  rf <- mlr::getLearnerModel(model, more.unwrap = TRUE)
  pred <- stats::predict(rf, newdata = C, predict.all = TRUE)
  ind <- pred$individual
  mu <- rowMeans(ind)
  se <- if (ncol(ind) > 1L) sqrt(rowSums((ind - mu)^2) / (ncol(ind) - 1L)) else rep(0, nrow(ind))
  list(mean = as.numeric(pred$aggregate), se = se)
}

# one string per row of a [0, 1]^d matrix: rows equal to 9 decimals share it (the "same point" test)
.mbo_keys <- function(M) {
  if (is.null(M) || nrow(M) == 0L) return(character(0))
  do.call(paste, c(lapply(seq_len(ncol(M)), function(j) round(M[, j], 9)), sep = "/"))
}

# the rows of M when there are at most `most`, else `most` of them evenly spaced (first and last kept)
.mbo_evenly <- function(M, most) {
  if (is.null(M) || nrow(M) <= most) return(M)
  M[unique(round(seq(1, nrow(M), length.out = most))), , drop = FALSE]
}

# pending points an EI batch is kept away from (a penalty per point and candidate): more than this
# many in flight (thousands of workers), an evenly spaced subset, so a proposal's work is bounded
MBO_MAX_PENALIZED <- 64L

# the rows of the model's candidates to propose: n picks by the infill criterion, never one of the
# candidates already `used` (a point evaluated, in flight or picked since the fit) unless nothing else
# is left; with ei each pick multiplies the distance penalty around it into `penalty`. The work is
# O(candidates) per pick whatever the results and points in flight (those are looked at once per fit,
# in .mbo_mark). Returns list(j = the rows, penalty = the updated penalty).
.mbo_select <- function(ctx, n, model) {
  opts <- ctx$opts
  Cu <- model$Cu
  mu <- model$mu
  se <- model$se
  d <- ncol(Cu)
  used <- model$used
  penalty <- model$penalty
  radius <- 0.1 * sqrt(d)
  taken <- rep(FALSE, nrow(Cu))
  chosen <- integer(0)
  for (k in seq_len(n)) {
    if (opts$infill == "cb") {
      lam <- stats::rexp(1, 1 / max(opts$lambda, 1e-12))
      score <- mu - lam * se
    } else {
      s <- pmax(se, 1e-12)
      z <- (model$ymin - mu) / s
      score <- -((model$ymin - mu) * stats::pnorm(z) + s * stats::dnorm(z)) * penalty
    }
    blocked <- used
    if (all(blocked)) blocked <- taken
    if (all(blocked)) blocked <- rep(FALSE, nrow(Cu))
    score[blocked] <- Inf
    j <- which.min(score)
    chosen <- c(chosen, j)
    taken[j] <- TRUE
    used <- used | model$keys == model$keys[j]
    if (opts$infill == "ei")
      penalty <- penalty * (1 - exp(-rowSums(sweep(Cu, 2, Cu[j, ])^2) / radius^2))
  }
  list(j = chosen, penalty = penalty)
}

# once per fit: which candidates are (numerically) a point evaluated or in flight (`avoid_keys`),
# and the ei distance penalty around at most MBO_MAX_PENALIZED of the points in flight (`pending`,
# unit rows in submission order)
.mbo_mark <- function(ctx, model, avoid_keys, pending) {
  model$used <- model$keys %in% avoid_keys
  penalty <- rep(1, nrow(model$Cu))
  pending <- .mbo_evenly(pending, MBO_MAX_PENALIZED)
  radius <- 0.1 * sqrt(ncol(model$Cu))
  if (ctx$opts$infill == "ei" && !is.null(pending) && nrow(pending) > 0L)
    for (i in seq_len(nrow(pending)))
      penalty <- penalty * (1 - exp(-rowSums(sweep(model$Cu, 2, pending[i, ])^2) / radius^2))
  model$penalty <- penalty
  model
}

# refit the forest once this many results arrived since the last fit (n observations): after
# every result up to about 160 observations (budgets of that size see no change), then less
# often as a fit grows dearer (about 0.8 s at 1,000 points here): every 10 at 500, every 40 at
# 1,000, at most every 100 (a fit's 2,000 candidates would be used up); the proposals in between
# come from the last fit's candidates and predictions
.mbo_refit_after <- function(n) min(100, max(1, as.numeric(n)^2 %/% 25000))

# most observations a forest is fitted on (the best half and the most recent half beyond), and most
# candidates a fit ranks: a fit's work stays bounded at thousands of results and workers
MBO_MAX_FIT_ROWS <- 2000L
# more workers than this (as bayes' WIDE): a fit waits, beyond .mbo_refit_after, until the time since
# the last one ended is MBO_WIDE_REST times that fit's length. R proposes on the optimizer rank's main
# thread, so a worker freed during a fit waits for it; at 10,000 workers results (167/s) outran the
# 100 of .mbo_refit_after during every fit, R fitted all the time and workers waited a fit each
# (65% busy). Time-based, so only where that many workers make a seeded run irreproducible anyway.
MBO_WIDE <- 128L
MBO_WIDE_REST <- 2
MBO_MAX_CANDIDATES <- 10000L

.mbo_now <- function() proc.time()[["elapsed"]]

# more workers than MBO_WIDE: proposals put out ahead of the workers (queued behind the running
# tasks), so that a worker freed while R fits takes one at once instead of waiting for the fit:
# results/s x the last fit's length x 2, at least 1/64 of the workers (before a fit was timed),
# at most 1/8. At 10,000 workers R's fits left workers waiting (93.4% busy, gap p99 19 s).
.mbo_ahead <- function(workers, rate, took) {
  if (workers <= MBO_WIDE) return(0L)
  least <- workers %/% 64L
  if (is.null(rate) || is.null(took)) return(as.integer(least))
  as.integer(min(workers %/% 8L, max(least, ceiling(2 * rate * took))))
}

.mbo_fit_rows <- function(yi) {
  n <- length(yi)
  if (n <= MBO_MAX_FIT_ROWS) return(seq_len(n))
  half <- MBO_MAX_FIT_ROWS %/% 2L
  best <- order(yi)[seq_len(half)]
  recent <- setdiff(rev(seq_len(n)), best)[seq_len(MBO_MAX_FIT_ROWS - half)]
  sort(c(best, recent))
}

.mbo_run_fallback <- function(ctx) {
  ev <- ctx$evaluator
  opts <- ctx$opts
  workers <- max(1L, ev$workers())
  bounds <- .mbo_bounds(ctx)
  ctx$learner <- mlr::makeLearner("regr.randomForest", predict.type = "se", se.method = "sd",
                                  ntree = opts$ntree, nodesize = opts$nodesize)
  hist <- .mbo_history(ctx)
  X <- hist$X                 # encoded rows evaluated so far (the earlier runs' first)
  Xnew <- list()              # rows evaluated since X was last bound (bound once per fit, not per result)
  y <- hist$y                 # their losses (Inf = failed)
  # pending tasks, by id (hashed: thousands of workers): the encoded row, its [0, 1]^d row and key
  pending <- new.env(hash = TRUE)
  pending_unit <- new.env(hash = TRUE)
  pending_key <- new.env(hash = TRUE)

  submit <- function(rows) {
    ids <- ev$put(.mbo_decode(ctx, rows))
    unit <- .mbo_unit(ctx, rows, bounds)
    keys <- .mbo_keys(unit)
    for (i in seq_along(ids)) {
      key <- as.character(ids[i])
      assign(key, rows[i, , drop = FALSE], envir = pending)
      assign(key, unit[i, ], envir = pending_unit)
      assign(key, keys[i], envir = pending_key)
    }
  }
  absorb <- function(res) {
    if (nrow(res) == 0L) return(invisible())
    keys <- as.character(res$id)
    # a task an earlier run left running was not submitted here: encode its point
    got <- lapply(seq_len(nrow(res)), function(i) {
      row <- pending[[keys[i]]]
      if (is.null(row)) .mbo_encode(ctx, res[i, , drop = FALSE]) else row
    })
    known <- keys[vapply(keys, exists, logical(1), envir = pending, inherits = FALSE)]
    if (length(known)) {
      rm(list = known, envir = pending)
      rm(list = known, envir = pending_unit)
      rm(list = known, envir = pending_key)
    }
    rows <- do.call(rbind, got)
    Xnew[[length(Xnew) + 1L]] <<- rows
    Xkeys[[length(Xkeys) + 1L]] <<- .mbo_keys(.mbo_unit(ctx, rows, bounds))
    y <<- c(y, res$loss)
  }
  bind <- function() {
    if (length(Xnew)) {
      X <<- do.call(rbind, c(list(X), Xnew))
      Xnew <<- list()
    }
    X
  }
  model <- NULL               # the last fit: candidates, their predictions, which are used, observations it saw
  fit <- function(yi, n) {
    X <- bind()
    nc <- max(opts$candidates, min(2L * n, MBO_MAX_CANDIDATES))
    # local candidates: half around the best point, half around the five best
    top <- X[order(yi)[c(rep(1L, min(5L, nrow(X))), seq_len(min(5L, nrow(X))))], , drop = FALSE]
    C <- rbind(.mbo_normalize(ctx, .mbo_random(ctx, nc - nc %/% 2L, bounds)),
               .mbo_normalize(ctx, .mbo_local(ctx, top, nc %/% 2L, bounds)))
    yt <- .mbo_transform(yi, opts$transform)
    rows <- .mbo_fit_rows(yi)
    pr <- .mbo_fit_predict(ctx, X[rows, , drop = FALSE], yt[rows], C)
    Cu <- .mbo_unit(ctx, C, bounds)
    refits <<- refits + 1L
    fitted_rows <<- c(fitted_rows, length(rows))
    Xkeys <<- list(unlist(Xkeys, use.names = FALSE))
    ids <- ls(pending_unit)
    ids <- ids[order(as.numeric(ids))]  # in submission order
    kept <- .mbo_evenly(matrix(seq_along(ids), ncol = 1L), MBO_MAX_PENALIZED)
    Pu <- if (length(ids)) do.call(rbind, mget(ids[kept[, 1L]], envir = pending_unit)) else NULL
    avoid <- c(Xkeys[[1L]], unlist(mget(ids, envir = pending_key), use.names = FALSE))
    .mbo_mark(ctx, list(C = C, Cu = Cu, keys = .mbo_keys(Cu), mu = pr$mean, se = pr$se, ymin = min(yt),
                        seen = length(y)), avoid, Pu)
  }
  propose_points <- function(n) {
    yi <- .mbo_impute(y)
    if (is.null(yi) || length(y) < 3L) return(.mbo_design(ctx, n))
    due <- is.null(model) || length(y) - model$seen >= .mbo_refit_after(length(y))
    if (due && !is.null(model) && workers > MBO_WIDE)
      due <- .mbo_now() - model$ended >= MBO_WIDE_REST * model$took
    # fewer unused candidates than asked for: refit whatever the wait (else picks repeat points
    # in flight or evaluated, as .mbo_select falls back to when every candidate is used)
    if (!due && sum(!model$used) < n) due <- TRUE
    if (due) {
      started <- .mbo_now()
      # results/s since the last fit began (how fast proposals are taken)
      rate <- if (is.null(model)) NULL else
        (length(y) - model$seen) / max(started - model$ended + model$took, 1e-3)
      model <<- fit(yi, n)
      model$ended <<- .mbo_now()
      model$took <<- model$ended - started
      model$rate <<- rate
    }
    picked <- .mbo_select(ctx, n, model)
    model$used[picked$j] <<- TRUE
    model$penalty <<- picked$penalty
    proposals <<- proposals + 1L
    model$C[picked$j, , drop = FALSE]
  }

  Xkeys <- list()             # .mbo_keys of the evaluated rows, in chunks joined at each fit
  if (!is.null(X)) Xkeys <- list(.mbo_keys(.mbo_unit(ctx, X, bounds)))
  refits <- 0L
  proposals <- 0L
  fitted_rows <- integer(0)   # rows each forest was fitted on
  n0 <- .mbo_n_initial(ctx) - length(y)
  if (n0 > 0L) submit(.mbo_design(ctx, n0))
  repeat {
    # with pools, at least what they hold (ev$room), its capacity read before the wait so that
    # it returns (maybe with no result) when a pool joins, and the next turn proposes for it
    room <- ev$room(workers + .mbo_ahead(workers, model$rate, model$took))
    if (room$propose > 0L) submit(propose_points(room$propose))
    if (ev$pending() > 0L) {
      absorb(ev$get(1L, more_room = room$capacity))
    } else if (ev$remaining() == 0L) {
      break
    }
  }
  c(.mbo_summary(ctx, bind(), y), list(refits = refits, proposals = proposals,
                                       max_fit_rows = if (length(fitted_rows)) max(fitted_rows) else 0L))
}
