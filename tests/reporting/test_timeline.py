"""Runs, load over time and utilization (emews/reporting/timeline.py): a hand-computed schedule
stored through the real store API, and properties over random schedules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

from emews.config.experiment import create_experiment
from emews.reporting import data, timeline
from emews.reporting.load import resample
from emews.core.results import Result, Status, Task
from emews.store.results_store import ResultsStore

T0 = 1_700_000_000.0
SPACE = {"x": {"type": "float", "lower": 0.0, "upper": 1.0}}


def experiment(folder: Path, schedule: list[tuple[float, float, float, int]], workers: int,
               requeued: tuple[int, ...] = ()) -> Path:
    """An experiment whose store holds ``schedule``: (submitted, started, finished, rank) per task."""
    exp = create_experiment(folder / "exp", name="t", workflow={"space": SPACE, "budget": {"evaluations": 9}},
                            site={}, info={"workers": workers, "site": "local"})
    tasks = [Task(i, {"x": 0.5}, i, T0 + sub) for i, (sub, _, _, _) in enumerate(schedule)]
    results = [Result(i, {"x": 0.5}, Status.OK, 1.0 + i, 1.0 + i, rank=rank, host="h", submitted=T0 + sub,
                      started=T0 + start, finished=T0 + end) for i, (sub, start, end, rank) in enumerate(schedule)]
    with ResultsStore(exp / "results.db") as store:
        store.commit(tasks, [])
        store.mark_attempted(list(requeued))
        store.commit([], results)
    return exp


def test_a_hand_computed_schedule(tmp_path: Path) -> None:
    # worker 1 runs task 0 for 4 s; worker 2 waits 1 s for task 1 (ready at 0: dispatch), runs it
    # until 2, waits until task 2 is submitted at 3 (nothing ready: the optimizer), runs it until 4
    exp = experiment(tmp_path, [(0, 0, 4, 1), (0, 1, 2, 2), (3, 3, 4, 2)], workers=2)
    loaded = data.load(exp)
    use = timeline.utilization(loaded.results, loaded.workers)
    assert timeline.runs(loaded.results) == [(T0, T0 + 4)]
    assert (use.elapsed, use.busy_seconds, use.idle_dispatch_seconds, use.idle_optimizer_seconds) == \
        pytest.approx((4.0, 6.0, 1.0, 1.0))
    assert (use.busy, use.idle_dispatch, use.idle_optimizer) == pytest.approx((0.75, 0.125, 0.125))
    curve = timeline.load(loaded.results)
    assert list(curve.times - T0) == [0, 1, 2, 3, 4]
    assert list(curve.busy) == [1, 2, 1, 2, 0] and list(curve.waiting) == [1, 0, 0, 0, 0]


def test_a_resume_two_hours_later_is_a_second_run_and_its_gap_is_not_idle_time(tmp_path: Path) -> None:
    later = 7200.0
    # task 1 was running at the stop (submitted in run 1) and ran again in run 2 (attempt 1)
    exp = experiment(tmp_path, [(0, 0, 2, 1), (1, later + 1, later + 3, 1), (later, later, later + 2, 2)],
                     workers=2, requeued=(1,))
    loaded = data.load(exp)
    assert list(loaded.results["attempt"]) == [0, 1, 0]
    assert timeline.runs(loaded.results) == [(T0, T0 + 2), (T0 + later, T0 + later + 3)]
    use = timeline.utilization(loaded.results, loaded.workers)
    assert use.elapsed == pytest.approx(5.0)
    assert use.busy == pytest.approx(6.0 / 10.0)
    assert use.idle_dispatch == pytest.approx(0.0) and use.idle_optimizer == pytest.approx(0.4)


@st.composite
def schedules(draw: st.DrawFn) -> tuple[pd.DataFrame, int]:
    """Tasks run back to back on each worker, each submitted some time before it started."""
    workers = draw(st.integers(1, 4))
    rows = []
    for rank in range(1, workers + 1):
        t = 0.0
        for _ in range(draw(st.integers(0, 6))):
            t += draw(st.floats(0, 3))
            wait = draw(st.floats(0, 2))
            run = draw(st.floats(0.01, 5))
            rows.append({"submitted": max(t - wait, 0.0), "started": t, "finished": t + run, "rank": rank,
                         "attempt": 0})
            t += run
    return pd.DataFrame(rows, columns=["submitted", "started", "finished", "rank", "attempt"]), workers


@given(schedules())
def test_busy_and_the_two_idle_shares_add_up_to_all_worker_time(case: tuple[pd.DataFrame, int]) -> None:
    frame, workers = case
    use = timeline.utilization(frame, workers)
    if frame.empty:
        assert use.elapsed == 0 and use.busy == 0
        return
    assert use.elapsed == pytest.approx(frame["finished"].max() - frame["submitted"].min())  # one run: gaps < 60 s
    assert use.busy_seconds == pytest.approx((frame["finished"] - frame["started"]).sum())
    assert use.busy + use.idle_optimizer + use.idle_dispatch == pytest.approx(1.0)
    assert min(use.idle_optimizer_seconds, use.idle_dispatch_seconds) >= -1e-9
    # dispatch idle time never exceeds the time tasks spent ready and not started
    assert use.idle_dispatch_seconds <= (frame["started"] - frame["submitted"]).sum() + 1e-9


@given(st.lists(st.tuples(st.floats(0.001, 10), st.integers(0, 8)), min_size=2, max_size=60), st.integers(1, 30))
def test_resampling_the_load_keeps_its_worker_time(steps: list[tuple[float, int]], bins: int) -> None:
    times = np.concatenate(([0.0], np.cumsum([dt for dt, _ in steps])))
    values = np.array([v for _, v in steps] + [0], float)
    edges, means = resample(times, values, bins)
    assert edges[0] == times[0] and edges[-1] == pytest.approx(times[-1])
    assert float(np.sum(means * np.diff(edges))) == pytest.approx(float(np.sum(values[:-1] * np.diff(times))))
