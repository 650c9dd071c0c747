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

