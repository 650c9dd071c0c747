"""emews.contrib.rbridge under real R (rpy2): round trips, conversions, errors, budget, threads.

These tests need R and rpy2 (tools/install-r.sh; pip install -e '.[r]'). They fail, with the
reason, when R is missing: they are never skipped.
"""

from __future__ import annotations

import logging
import math
import subprocess
import textwrap
import threading
from pathlib import Path

import pytest

from emews.testing import mixed_space

from emews.job.wiring import OptimizerFailed, RunSpec, run_in_threads
from emews.core.space import Float, Int, Space

ROOT = Path(__file__).resolve().parents[2]


def _require_r():
    from emews.contrib import rbridge
    try:
        rbridge.helpers()
    except rbridge.RUnavailable as exc:
        pytest.fail(f"these tests need R and rpy2: {exc}", pytrace=False)
    return rbridge


@pytest.fixture(scope="module")
def rb():
    return _require_r()


def space_all() -> Space:
    """Every dimension type (the conformance kit's space)."""
    return mixed_space()


def objective_file(tmp_path: Path, body: str = "return float(len(str(sorted(params.items()))))") -> str:
    path = tmp_path / "objective_for_r.py"
    path.write_text(f"def run(params):\n    {body}\n")
    return str(path)


def write_r(tmp_path: Path, code: str, name: str = "opt.R") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return path


def run_r(tmp_path: Path, script: Path, *, budget: int = 12, workers: int = 3, space: Space | None = None,
          objective: str | None = None, entry: str | None = None, **options):
    from emews.contrib.rbridge import ROptimizer
    from emews.objective.function import ObjectiveRef

    box = {}

    def make():
        box["opt"] = ROptimizer(script=script, entry=entry, **options)
        return box["opt"]

    spec = RunSpec(space=space or space_all(), make_optimizer=make,
                   objective=ObjectiveRef(objective or objective_file(tmp_path)), budget=budget,
                   isolation="inline", show_progress=False, seed=7)
    summary = run_in_threads(spec, workers=workers)
    return summary, box["opt"]


RANDOM_SEARCH_R = r'''
# random search in R, asynchronous: put() rows as a list of named lists, get() as they come
sample_point <- function(space) {
  pt <- list()
  for (p in space) {
    v <- switch(p$type,
      float = if (isTRUE(p$log)) exp(runif(1, log(p$lower), log(p$upper))) else runif(1, p$lower, p$upper),
      int = if (isTRUE(p$log)) min(max(round(exp(runif(1, log(p$lower), log(p$upper)))), p$lower), p$upper)
            else p$lower + sample.int(p$upper - p$lower + 1L, 1L) - 1L,
      categorical = , ordered = p$values[[sample.int(length(p$values), 1L)]],
      constant = NULL)
    if (!is.null(v)) pt[[p$name]] <- v
  }
  pt
}
emews_optimize <- function(evaluator, space, options) {
  all_res <- NULL
  while (evaluator$remaining() > 0 || evaluator$pending() > 0) {
    want <- min(evaluator$workers() - evaluator$pending(), evaluator$remaining())
    if (want > 0) {
      ids <- evaluator$put(lapply(seq_len(want), function(i) sample_point(space)))
      stopifnot(is.integer(ids), length(ids) == want)
    }
    res <- evaluator$get(1L)
    all_res <- rbind(all_res, res)
  }
  evaluator$set_info("classes", vapply(all_res, function(col) class(col)[1], ""))
  evaluator$log("done after ", nrow(all_res), " results", level = "warning")
  list(n = nrow(all_res), best = min(all_res$loss), remaining = evaluator$remaining(),
       opt = options)
}
'''


def test_round_trip_random_search_in_r(rb, tmp_path):
    script = write_r(tmp_path, RANDOM_SEARCH_R)
    summary, opt = run_r(tmp_path, script, budget=14, workers=3, answer=42, nested={"a": [1, 2], "b": "x"})
    assert summary.error is None, getattr(summary.error, "traceback", summary.error)
    assert summary.completed == 14
    assert opt.value["n"] == 14 and opt.value["remaining"] == 0
    assert opt.value["opt"] == {"answer": 42, "nested": {"a": [1, 2], "b": "x"}}
    assert math.isfinite(opt.value["best"])
    # what R saw: parameters keep their types, results carry id/loss/objective/status/error
    assert opt.info["classes"] == {
        "id": "integer", "x": "numeric", "lr": "numeric", "units": "integer", "width": "integer",
        "activation": "character", "batch": "integer", "shuffle": "logical", "optimizer": "character",
        "loss": "numeric", "objective": "numeric", "status": "character", "error": "character"}


def test_points_from_r_are_valid_python_values(rb, tmp_path):
    script = write_r(tmp_path, RANDOM_SEARCH_R)
    record = tmp_path / "seen.jsonl"
    obj = objective_file(tmp_path, f"import json; open({str(record)!r}, 'a').write(json.dumps("
                                   "{k: [type(v).__name__, v] for k, v in params.items()}) + '\\n'); return 1.0")
    summary, _ = run_r(tmp_path, script, budget=10, workers=2, objective=obj)
    assert summary.error is None, getattr(summary.error, "traceback", summary.error)
    import json
    seen = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(seen) == 10
    space = space_all()
    for point in seen:
        assert {k: t for k, (t, _) in point.items()} == {
            "x": "float", "lr": "float", "units": "int", "width": "int", "activation": "str",
            "batch": "int", "shuffle": "bool", "optimizer": "str"}
        assert space.contains({k: v for k, (_, v) in point.items()})


def test_conversions_space_to_r_and_back(rb):
    import rpy2.rinterface as ri
    space = space_all()
    r_space = rb.space_to_r(space)
    describe = ri.evalr('function(s) vapply(s, function(p) paste(p$type, class(if (is.null(p$values)) '
                        'if (is.null(p$value)) p$lower else p$value else p$values), isTRUE(p$log)), "")')
    got = rb.r_to_py(describe(r_space))
    assert got == {"x": "float numeric FALSE", "lr": "float numeric TRUE", "units": "int integer FALSE",
                   "width": "int integer TRUE", "activation": "categorical character FALSE",
                   "batch": "ordered integer FALSE", "shuffle": "categorical logical FALSE",
                   "optimizer": "constant character FALSE"}

    # data.frame with factors and doubles for ints; the constant column left out
    df = ri.evalr('data.frame(x = c(1, 2L), lr = c(0.5, 1e-3), units = c(3, 64), width = c(1024, 2), '
                  'activation = factor(c("tanh", "relu")), batch = c(16, 128), shuffle = c("TRUE", "FALSE"))')
    points = rb.points_from_r(space, df)
    assert points == [
        {"x": 1.0, "lr": 0.5, "units": 3, "width": 1024, "activation": "tanh", "batch": 16, "shuffle": True,
         "optimizer": "adam"},
        {"x": 2.0, "lr": 1e-3, "units": 64, "width": 2, "activation": "relu", "batch": 128, "shuffle": False,
         "optimizer": "adam"}]
    assert [type(points[1][k]) for k in ("x", "units", "batch", "shuffle")] == [float, int, int, bool]
    assert all(space.validate(p) == p for p in points)

    # a list of named lists (rows), and a single named list
    rows = ri.evalr('list(list(x = 0.5, lr = 0.1, units = 2L, width = 8L, activation = "sigmoid", '
                    'batch = 32L, shuffle = TRUE, optimizer = "adam"))')
    assert rb.points_from_r(space, rows)[0]["shuffle"] is True
    one = ri.evalr('list(x = 0.5, lr = 0.1, units = 2L, width = 8L, activation = "sigmoid", batch = 32L, '
                   'shuffle = FALSE)')
    assert rb.points_from_r(space, one) == [{"x": 0.5, "lr": 0.1, "units": 2, "width": 8, "activation": "sigmoid",
                                             "batch": 32, "shuffle": False, "optimizer": "adam"}]
    # non-integral ints pass through unchanged so that validation names them
    bad = rb.points_from_r(Space({"k": Int(0, 5)}), ri.evalr('data.frame(k = 2.5)'))
    assert bad == [{"k": 2.5}]
    with pytest.raises(Exception, match="NA for parameter 'k'"):
        rb.points_from_r(Space({"k": Int(0, 5)}), ri.evalr('data.frame(k = NA_real_)'))

    # options: nested Python data to R and back
    opts = {"a": 1, "b": 2.5, "c": "s", "d": True, "e": None, "f": [1, 2, 3], "g": {"h": ["x", "y"]}}
    back = rb.r_to_py(rb.py_to_r(opts))
    assert back == {"a": 1, "b": 2.5, "c": "s", "d": True, "e": None, "f": [1, 2, 3], "g": {"h": ["x", "y"]}}


def test_param_set_helpers_encode_and_decode(rb):
    import rpy2.rinterface as ri
    space = space_all()
    environment = rb.helpers()
    fn = ri.evalr('''function(space, e) {
      f <- function(space) {
        ps <- emews_param_set(space)
        set.seed(1)
        d <- ParamHelpers::generateDesign(20, ps, fun = lhs::randomLHS)
        pts <- emews_decode(space, d)
        back <- emews_decode(space, emews_encode(space, pts))
        list(ids = ParamHelpers::getParamIds(ps), n = nrow(pts), same = identical(pts, back), pts = pts)
      }
      environment(f) <- e
      f(space)
    }''')
    out = rb.r_to_py(fn(rb.space_to_r(space), environment))
    assert out["ids"] == ["x", "lr", "units", "width", "activation", "batch", "shuffle"]
    assert out["n"] == 20 and out["same"] is True
    points = rb.points_from_r(space, fn(rb.space_to_r(space), environment)[3])
    assert len(points) == 20 and all(space.contains(p) for p in points)


def test_r_error_becomes_python_exception_with_message_and_trace(rb, tmp_path):
    script = write_r(tmp_path, '''
        helper <- function(x) {
          if (x > 1) stop("the R optimizer gave up at x = ", x)
          x
        }
        emews_optimize <- function(evaluator, space, options) {
          evaluator$map(data.frame(x = 0.5, lr = 0.1, units = 2L, width = 8L, activation = "relu",
                                   batch = 16L, shuffle = TRUE))
          helper(3)
        }
    ''')
    summary, _ = run_r(tmp_path, script, budget=5)
    assert isinstance(summary.error, OptimizerFailed)
    err = summary.error.error
    assert isinstance(err, rb.RError)
    assert err.r_message == "the R optimizer gave up at x = 3"
    assert err.call and "helper" in err.call
    assert any("helper(3)" in line and "opt.R#" in line for line in err.trace), err.trace
    assert "the R optimizer gave up at x = 3" in str(err) and "R traceback" in str(err)
    assert summary.completed == 1


def test_script_errors_are_reported(rb, tmp_path):
    from emews.contrib.rbridge import ROptimizer, RError
    syntax = write_r(tmp_path, "emews_optimize <- function(evaluator, space, options) {\n", "bad.R")
    summary, _ = run_r(tmp_path, syntax)
    assert isinstance(summary.error.error, RError) and "cannot load" in str(summary.error.error)
    no_entry = write_r(tmp_path, "something_else <- function() 1\n", "noentry.R")
    summary, _ = run_r(tmp_path, no_entry)
    assert "does not define a function named 'emews_optimize'" in str(summary.error.error)
    summary, _ = run_r(tmp_path, tmp_path / "missing.R")
    assert isinstance(summary.error.error, FileNotFoundError)
    with pytest.raises(ValueError, match="script: ROptimizer needs one"):
        ROptimizer()


def test_budget_exhausted_from_r_ends_the_run_normally(rb, tmp_path):
    # asks for 3 points per round without looking at remaining(): the last put overshoots
    script = write_r(tmp_path, '''
        emews_optimize <- function(evaluator, space, options) {
          repeat evaluator$map(data.frame(x = runif(3, -5, 5), lr = 0.1, units = 2L, width = 8L,
                                          activation = "relu", batch = 16L, shuffle = TRUE))
        }
    ''')
    summary, _ = run_r(tmp_path, script, budget=7)
    assert summary.error is None
    assert summary.completed == 6  # 3 + 3; the third map asked for 3 with 1 left


def test_budget_exhausted_can_be_caught_in_r(rb, tmp_path):
    script = write_r(tmp_path, '''
        emews_optimize <- function(evaluator, space, options) {
          pt <- function(n) data.frame(x = runif(n, -5, 5), lr = 0.1, units = 2L, width = 8L,
                                       activation = "relu", batch = 16L, shuffle = TRUE)
          caught <- tryCatch({ evaluator$map(pt(5)); "no" },
                             emews_budget_exhausted = function(e) conditionMessage(e))
          evaluator$map(pt(evaluator$remaining()))
          list(caught = caught, remaining = evaluator$remaining())
        }
    ''')
    summary, opt = run_r(tmp_path, script, budget=4)
    assert summary.error is None and summary.completed == 4
    assert opt.value["caught"].startswith("BudgetExhausted: 5 evaluations asked for, 4 left")
    assert opt.value["remaining"] == 0


def test_invalid_point_from_r_raises_value_error(rb, tmp_path):
    script = write_r(tmp_path, '''
        emews_optimize <- function(evaluator, space, options) {
          evaluator$put(data.frame(x = 99, lr = 0.1, units = 2L, width = 8L, activation = "relu",
                                   batch = 16L, shuffle = TRUE))
        }
    ''')
    summary, _ = run_r(tmp_path, script)
    err = summary.error.error
    assert isinstance(err, ValueError) and "invalid point" in str(err) and "x" in str(err)
    bad_type = write_r(tmp_path, '''
        emews_optimize <- function(evaluator, space, options) {
          evaluator$put(data.frame(x = 1, lr = 0.1, units = 2L, width = 8L, activation = "elu",
                                   batch = 16L, shuffle = TRUE))
        }
    ''', "badcat.R")
    summary, _ = run_r(tmp_path, bad_type)
    assert isinstance(summary.error.error, ValueError) and "activation" in str(summary.error.error)


def test_seed_get_timeout_and_warnings(rb, tmp_path, caplog):
    script = write_r(tmp_path, '''
        emews_optimize <- function(evaluator, space, options) {
          warning("a warning from R")
          early <- evaluator$get(1L, timeout = 0.01)   # nothing pending: returns at once
          ids <- evaluator$put(data.frame(x = runif(2, -5, 5), lr = 0.1, units = 2L, width = 8L,
                                          activation = "relu", batch = 16L, shuffle = TRUE))
          got <- evaluator$get(2L)
          list(early = nrow(early), got = sort(got$id) == sort(ids), r = runif(1),
               seed = evaluator$seed(), direction = evaluator$direction(), workers = evaluator$workers())
        }
    ''')
    with caplog.at_level(logging.WARNING, logger="emews.contrib.rbridge"):
        _, first = run_r(tmp_path, script, budget=2, workers=2)
        _, second = run_r(tmp_path, script, budget=2, workers=2)
    assert first.value["early"] == 0 and first.value["got"] == [True, True]
    assert first.value["r"] == second.value["r"]  # R's RNG seeded from the evaluator's seed
    assert first.value["seed"] == 7 and first.value["direction"] == "minimize" and first.value["workers"] == 2
    assert any("a warning from R" in r.getMessage() for r in caplog.records)
    _, seeded = run_r(tmp_path, script, budget=2, workers=2, seed=3)
    assert seeded.value["r"] != first.value["r"]


def test_room_tells_an_r_optimizer_how_many_to_propose_and_the_capacity_to_wait_on(rb, tmp_path):
    """``evaluator$room(own)`` is Python's ``Evaluator.room``: a job of 2 workers, an own count of 3."""
    script = write_r(tmp_path, '''
        emews_optimize <- function(evaluator, space, options) {
          before <- evaluator$room(3L)
          evaluator$put(data.frame(x = 0.5, lr = 0.1, units = 2L, width = 8L, activation = "relu",
                                   batch = 16L, shuffle = TRUE))
          after <- evaluator$room(3L)
          got <- evaluator$get(1L, more_room = after$capacity)
          list(before = before, after = after, got = nrow(got))
        }
    ''')
    summary, opt = run_r(tmp_path, script, budget=2, workers=2)
    assert summary.error is None, summary.error
    before, after = opt.value["before"], opt.value["after"]
    # a job keeps its own count whatever the prefetch (capacity: the 2 workers, or more ahead)
    assert (before["in_flight"], before["propose"]) == (3, 2) and before["capacity"] >= 2  # the budget allows 2
    assert (after["in_flight"], after["propose"]) == (3, 1) and after["capacity"] >= 2 and opt.value["got"] == 1


def test_off_main_thread_is_refused(rb, tmp_path):
    from emews.contrib.rbridge import ROptimizer
    script = write_r(tmp_path, RANDOM_SEARCH_R)
    box = {}

    def target():
        try:
            ROptimizer(script=script).run(object())
        except Exception as exc:
            box["error"] = exc

    t = threading.Thread(target=target, name="not-main")
    t.start()
    t.join()
    assert isinstance(box["error"], RuntimeError)
    assert "main thread" in str(box["error"]) and "not-main" in str(box["error"])


def test_result_column_clash_is_reported(rb, tmp_path):
    script = write_r(tmp_path, RANDOM_SEARCH_R)
    summary, _ = run_r(tmp_path, script, space=Space({"loss": Float(0, 1)}))
    assert "clashes with a result column" in str(summary.error.error)


def test_install_r_script_is_a_quick_noop_here():
    proc = subprocess.run(["bash", str(ROOT / "tools" / "install-r.sh")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("install-r: OK: R ") and "nothing to install" in lines[-1], proc.stdout


def test_starting_r_leaves_the_environment_of_later_programs_alone() -> None:
    """rpy2 prepends library folders to LD_LIBRARY_PATH; children of this process must not see them."""
    import os
    import subprocess
    import sys

    before = os.environ.get("LD_LIBRARY_PATH")
    _require_r()._r()
    assert os.environ.get("LD_LIBRARY_PATH") == before
    child = subprocess.run([sys.executable, "-c", "import emews, pip"], capture_output=True, text=True)
    assert child.returncode == 0, child.stderr
