"""mbo's fallback at width (issue 27 item 3): the work of a proposal is bounded however many
results are in and points are in flight. The bounds are R functions of optimizers/mbo.R,
called through rpy2; counted, never timed. Needs R and rpy2 (fails without them, as test_mbo)."""

from __future__ import annotations

from pathlib import Path

import pytest

import emews.optimizers.mbo as mbo


@pytest.fixture(scope="module")
def r():
    from emews.contrib import rbridge

    try:
        _, ro = rbridge._r()
    except rbridge.RUnavailable as exc:
        pytest.fail(f"mbo needs R and rpy2: {exc}", pytrace=False)

    ro.r["source"](str(Path(mbo.__file__).with_name("mbo.R")))
    return ro.r


def test_a_forest_is_fitted_on_at_most_2000_results_the_best_half_and_the_most_recent(r):
    for n in (10, 2000):
        assert list(r(f".mbo_fit_rows(as.numeric({n}:1))")) == list(range(1, n + 1))  # all, in order
    rows = list(r(".mbo_fit_rows(c(as.numeric(5000:1001), rep(0, 1000)))"))
    assert len(rows) == int(r("MBO_MAX_FIT_ROWS")[0]) == 2000
    # the 1,000 best are the last 1,000 (losses 0): also the most recent; then the next recent
    assert rows == sorted(rows) and rows[-1] == 5000 and rows[0] == 3001


def test_an_ei_batch_is_kept_away_from_at_most_64_pending_points(r):
    for n, kept in ((10, 10), (64, 64), (5000, 64)):
        rows = r(f".mbo_evenly(matrix(seq_len({n}), ncol = 1), MBO_MAX_PENALIZED)")
        values = list(rows)
        assert len(values) == kept
        assert values[0] == 1 and values[-1] == n  # the oldest and the newest pending kept



def test_a_forest_ranks_candidates_with_a_category_no_result_has_yet(r):
    """The first fits of a wide run see a few results, not every categorical value among them:
    the forest still ranks candidates with the missing value (mlr dropped the empty level, and
    predict failed: 'New factor levels not present in the training data', which ended mbo runs
    at 1,000 workers after 4 results)."""
    r("""
      .w_ctx <- list(learner = mlr::makeLearner("regr.randomForest", predict.type = "se",
                                                se.method = "sd", ntree = 10L, nodesize = 2L))
      .w_lv <- c("1", "2", "3")
      .w_X <- data.frame(p1 = c(0.1, 0.5, 0.9, 0.3), p2 = factor(c("1", "1", "2", "1"), levels = .w_lv))
      .w_C <- data.frame(p1 = c(0.2, 0.7), p2 = factor(c("3", "2"), levels = .w_lv))
      .w_pr <- suppressWarnings(.mbo_fit_predict(.w_ctx, .w_X, c(1, 2, 3, 4), .w_C))
    """)
    assert len(r(".w_pr$mean")) == 2 and len(r(".w_pr$se")) == 2


def _model(r, candidates: int, pending: int, infill: str = "ei") -> None:
    """An R model of ``candidates`` random unit rows after .mbo_mark with ``pending`` points in
    flight (unit rows), in .w_model; .w_ctx has the infill."""
    r(f"""
      set.seed(1)
      .w_ctx <- list(opts = list(infill = "{infill}", lambda = 1))
      .w_Cu <- matrix(runif({candidates} * 3), ncol = 3)
      .w_P <- matrix(runif({max(pending, 1)} * 3), ncol = 3)[seq_len({pending}), , drop = FALSE]
      .w_model <- .mbo_mark(.w_ctx, list(Cu = .w_Cu, keys = .mbo_keys(.w_Cu), mu = runif({candidates}),
                                         se = runif({candidates}), ymin = 0), character(0), .w_P)
    """)


def test_the_pending_points_are_looked_at_once_per_fit_at_most_64_of_them(r):
    """The EI penalty of a fit with 5,000 points in flight is the one of the 64 evenly spaced
    among them (the oldest and newest kept): nothing per proposal grows with the points in flight."""
    _model(r, 500, 5000)
    all_pending = list(r(".w_model$penalty"))
    r(".w_kept <- .mbo_mark(.w_ctx, .w_model, character(0), .mbo_evenly(.w_P, MBO_MAX_PENALIZED))")
    assert list(r(".w_kept$penalty")) == all_pending
    assert int(r("nrow(.mbo_evenly(.w_P, MBO_MAX_PENALIZED))")[0]) == 64


def test_a_proposal_takes_candidates_of_the_last_fit_never_one_used_since(r):
    """Between fits, proposals come from the fit's candidates: a candidate equal to a point
    evaluated or in flight at the fit, or picked since, is not picked again (while others are left)."""
    _model(r, 50, 10, infill="cb")
    r(".w_model$used[1:20] <- TRUE")
    picked: list[int] = []
    for _ in range(3):  # three proposals of 10 between two fits, as propose_points makes them
        r(".w_sel <- .mbo_select(.w_ctx, 10L, .w_model); .w_model$used[.w_sel$j] <- TRUE")
        picked += [int(j) for j in r(".w_sel$j")]
    assert len(set(picked)) == 30 and min(picked) > 20
    r(".w_sel <- .mbo_select(.w_ctx, 5L, .w_model)")  # every candidate used: the least bad again
    assert len(r(".w_sel$j")) == 5


def test_above_128_workers_proposals_are_put_out_ahead_for_the_length_of_a_fit(r):
    """Up to 128 workers nothing is queued beyond the workers (seeded runs as before); above,
    1/64 of the workers before a fit was timed, then the results that arrive in two fits'
    time, at most 1/8 of the workers: a worker freed while R fits takes a queued proposal."""
    assert int(r(".mbo_ahead(128L, 50, 2)")[0]) == 0
    assert int(r(".mbo_ahead(10000L, NULL, NULL)")[0]) == 156
    assert int(r(".mbo_ahead(10000L, 167, 3)")[0]) == 1002
    assert int(r(".mbo_ahead(10000L, 10, 0.5)")[0]) == 156
    assert int(r(".mbo_ahead(10000L, 1000, 10)")[0]) == 1250
