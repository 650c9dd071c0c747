"""The runtime on its thread backend (no MPI): evaluator contract, optimizer loop, scheduling parts."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest

from testutil import FAULTY, GATED, REPO, wait_until
from emews import AskTellOptimizer, BudgetExhausted, EvaluatorObserver, Optimizer
from emews.runtime.backoff import DEFAULT_SPIN, Backoff, spin_for
from emews.job.wiring import OptimizerFailed, RunSpec, run_in_threads
from emews.objective.function import ObjectiveRef
from emews.runtime.slots import WorkerSlots
from emews.store.results_store import ResultsStore
from emews.core.space import Categorical, Float, Space

SPACE = Space({"x": Float(-2.0, 2.0), "mode": Categorical(("ok", "raise"))})
SLOW = ObjectiveRef(str(REPO / "tests" / "objectives" / "slow.py"))


def spec(optimizer: Optimizer, budget: int = 20, objective: ObjectiveRef = ObjectiveRef(str(FAULTY)),
         **kw) -> RunSpec:
    return RunSpec(SPACE, lambda: optimizer, objective, budget=budget, isolation=kw.pop("isolation", "inline"),
                   show_progress=False, **kw)


class Scripted(Optimizer):
    """Runs a function against the evaluator and keeps what it returns."""

    def __init__(self, script) -> None:
        self.script = script
        self.value = None

    def run(self, evaluator) -> None:
        self.value = self.script(evaluator)


def test_map_returns_results_in_order_with_failures_included() -> None:
    points = [{"x": float(i) / 4, "mode": "raise" if i % 3 == 0 else "ok"} for i in range(-4, 5)]
    opt = Scripted(lambda ev: ev.map(points))
    summary = run_in_threads(spec(opt), workers=3)
    assert summary.error is None
    results = opt.value
    assert [r.params for r in results] == points
    for r in results:
        if r.params["mode"] == "ok":
            assert r.ok and r.objective == pytest.approx(r.params["x"] ** 2) and r.loss == r.objective
        else:
            assert r.status.value == "failed" and math.isinf(r.loss) and "RuntimeError" in r.error


def test_get_waits_for_n_and_returns_everything_ready() -> None:
    def script(ev):
        ev.put([{"x": 0.1, "mode": "ok"}] * 6)
        first = ev.get(4)
        rest = ev.get(10)  # clamped to what is pending
        return len(first), len(first) + len(rest), ev.get(1), ev.pending

    opt = Scripted(script)
    run_in_threads(spec(opt), workers=3)
    n_first, n_total, empty, pending = opt.value
    assert n_first >= 4 and n_total == 6 and empty == [] and pending == 0


def test_get_timeout_returns_early_with_what_arrived(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The task cannot finish before the gate opens, so a ``get`` that returns at all returned
    on its timeout; a ``get`` that ignored it would wait for the task and return its result."""
    gate = tmp_path / "open"
    monkeypatch.setenv("GATE_FILE", str(gate))

    def script(ev):
        ev.put([{"x": 0.1, "mode": "ok"}])
        got = ev.get(1, timeout=0.001)
        gate.touch()
        later = ev.get(1)
        return got, later

    opt = Scripted(script)
    run_in_threads(spec(opt, objective=ObjectiveRef(str(GATED))), workers=1)
    got, later = opt.value
    assert got == [] and len(later) == 1 and later[0].ok


def test_budget_is_enforced_by_the_evaluator() -> None:
    def script(ev):
        ev.put([{"x": 0.0, "mode": "ok"}] * 3)
        with pytest.raises(BudgetExhausted):
            ev.put([{"x": 0.0, "mode": "ok"}] * 3)
        assert ev.remaining == 2
        ev.map([{"x": 0.0, "mode": "ok"}] * 2)
        ev.map([{"x": 0.0, "mode": "ok"}])  # raises BudgetExhausted: ends the run normally

    summary = run_in_threads(spec(Scripted(script), budget=5), workers=2)
    assert summary.error is None and summary.completed == 5


def test_invalid_points_are_refused_with_the_key() -> None:
    opt = Scripted(lambda ev: ev.put([{"x": 9.0, "mode": "ok"}]))
    summary = run_in_threads(spec(opt), workers=1)
    assert isinstance(summary.error, OptimizerFailed)
    assert "x" in str(summary.error.error) and "invalid point" in str(summary.error.error)


@pytest.mark.parametrize("point", [[0.1], 0.5, "x", None])
def test_a_proposal_that_is_not_a_point_is_refused_saying_so(point) -> None:
    """3p of reliability-2026-11: a list proposed as a point failed with ``AttributeError: 'list'
    object has no attribute 'keys'``; the failure now says what was proposed and what a point is."""
    opt = Scripted(lambda ev: ev.put([point]))
    summary = run_in_threads(spec(opt), workers=1)
    assert isinstance(summary.error, OptimizerFailed)
    assert f"optimizer proposed {point!r}, not a point (a dict keyed by parameter name)" in str(summary.error.error)
    assert summary.completed == 0


class Recording(AskTellOptimizer):
    def __init__(self, in_flight=None) -> None:
        self.in_flight = in_flight
        self.max_pending = 0
        self.seen = 0
        self.n = 0

    def suggest(self, n):
        self.n += n
        return [{"x": 0.5, "mode": "ok"} for _ in range(n)]

    def ingest(self, results):
        self.seen += len(results)

    def run(self, evaluator):
        recording = self

        class Pending(EvaluatorObserver):
            def submitted(self, tasks):
                recording.max_pending = max(recording.max_pending, evaluator.pending)

        evaluator.observers.append(Pending())
        super().run(evaluator)


def test_ask_tell_loop_keeps_in_flight_and_uses_the_whole_budget() -> None:
    opt = Recording()
    summary = run_in_threads(spec(opt, budget=30, objective=SLOW), workers=3)
    assert summary.completed == 30 and opt.seen == 30 and opt.n == 30
    assert opt.max_pending == 3  # one per worker by default

    opt = Recording(in_flight=5)
    run_in_threads(spec(opt, budget=30, objective=SLOW), workers=3)
    assert opt.max_pending == 5


def test_maximize_flips_the_sign_of_the_loss(tmp_path: Path) -> None:
    opt = Scripted(lambda ev: ev.map([{"x": 1.5, "mode": "ok"}, {"x": 0.5, "mode": "ok"}]))
    s = spec(opt, direction="maximize", exp_dir=tmp_path)
    summary = run_in_threads(s, workers=2)
    assert [r.loss for r in opt.value] == [-2.25, -0.25]
    assert summary.best.objective == 2.25
    stored = list(ResultsStore(tmp_path / "results.db"))
    assert [r.objective for r in stored] == [2.25, 0.25]


def test_process_isolation_in_threads_restarts_after_a_crash(tmp_path: Path) -> None:
    space = Space({"mode": Categorical(("kill", "ok")), "x": Float(0.0, 4.0)})
    points = [{"mode": m, "x": 2.0} for m in ("kill", "ok", "kill", "ok")]
    opt = Scripted(lambda ev: ev.map(points))
    s = RunSpec(space, lambda: opt, ObjectiveRef(str(FAULTY)), budget=4, isolation="process",
                exp_dir=tmp_path, show_progress=False)
    run_in_threads(s, workers=1)
    assert [r.status.value for r in opt.value] == ["crashed", "ok", "crashed", "ok"]


def test_run_leaves_no_threads_behind() -> None:
    before = set(threading.enumerate())
    run_in_threads(spec(Recording(), budget=10), workers=3)
    assert set(threading.enumerate()) <= before, set(threading.enumerate()) - before


def drain(slots: WorkerSlots) -> list[int]:
    """Take every free slot one at a time; the ranks in the order handed out."""
    taken = []
    while slots:
        taken.append(slots.take()[0])
    return taken


def test_worker_slots_prefetch_only_while_tasks_are_short() -> None:
    slots = WorkerSlots([1, 2, 3], prefetch=2, short_task=0.01)
    assert drain(slots) == [1, 2, 3] and slots.capacity == 3
    for rank in (1, 2, 3):
        slots.release(rank, 0.001)  # short tasks: everyone gets a second slot
    assert slots.depth == 2 and slots.capacity == 6
    taken = drain(slots)
    assert sorted(taken) == [1, 1, 2, 2, 3, 3]
    for rank in taken:
        slots.release(rank, 1.0)  # long tasks: extra slots are withdrawn again
    assert slots.depth == 1
    assert sorted(drain(slots)) == [1, 2, 3]


def test_worker_slots_depth_follows_task_length() -> None:
    slots = WorkerSlots([1, 2], prefetch=8, short_task=0.005)
    slots.release(slots.take()[0], 1e-5)
    assert slots.depth == 8
    for _ in range(60):
        slots.release(slots.take()[0], 0.002)  # 2 ms tasks: 5 ms / 2 ms -> 2 deep
    assert slots.depth == 2


def test_worker_slots_hand_work_to_the_last_worker_that_reported_in_batches() -> None:
    slots = WorkerSlots([1, 2, 3], prefetch=4, short_task=1.0)
    drain(slots)
    slots.release(2, None)
    slots.release(3, None)
    assert slots.take() == (3, 1)
    slots.release(1, 0.001)  # depth grows to 4: every worker gains 3 slots
    assert slots.take(limit=10) == (1, 4)
    assert slots.take(limit=2) == (2, 2)


def test_a_retired_worker_gets_no_slot_back_and_leaves_the_capacity() -> None:
    slots = WorkerSlots([1, 2, 3], prefetch=1)
    drain(slots)
    slots.retire(2)
    slots.release(2, 0.5)  # its last outcome arrives after it stopped: no slot for it
    slots.release(1, 0.5)
    assert slots.capacity == 2 and drain(slots) == [1]


def test_backoff_spins_then_sleeps_with_growing_delays() -> None:
    delays: list[float] = []
    backoff = Backoff(spin=0.0, min_delay=1e-4, max_delay=8e-4, sleep=delays.append)
    for _ in range(6):
        backoff.idle()
    assert delays == [1e-4, 2e-4, 4e-4, 8e-4, 8e-4, 8e-4]
    backoff.reset()
    backoff.idle()
    assert delays[-1] == 1e-4
    spinning = Backoff(spin=10.0, sleep=delays.append)
    spinning.idle()
    assert len(delays) == 7  # still inside the spin window: no sleep
    backoff.idle()
    backoff.max_delay = 1.5e-4   # lowered while it sleeps: the next sleep obeys at once
    backoff.idle()
    backoff.idle()
    assert delays[-2:] == [1.5e-4, 1.5e-4]
    backoff.reset()
    backoff.min_delay = backoff.max_delay = 1e-3  # both raised after the reset: obeyed at once
    backoff.idle()
    assert delays[-1] == 1e-3


def test_idle_ranks_poll_only_when_each_has_a_core(monkeypatch) -> None:
    monkeypatch.delenv("EMEWS_SPIN_SECONDS", raising=False)
    assert spin_for(ranks_on_node=4, cores=2) == 0.0        # oversubscribed: sleep at once
    assert spin_for(ranks_on_node=4, cores=4) == DEFAULT_SPIN
    monkeypatch.setenv("EMEWS_SPIN_SECONDS", "0.002")
    assert spin_for(ranks_on_node=4, cores=2) == 0.002
    delays: list[float] = []
    monkeypatch.setattr(Backoff, "spin_default", 0.0)
    Backoff(sleep=delays.append).idle()
    assert delays == [50e-6]  # a backoff made without a window takes the process's default


def test_distributor_looks_for_results_within_a_small_share_of_a_task() -> None:
    """While tasks run, the distributor sleeps at most a small share of a task (100 us to 1 ms)."""
    from emews.runtime.distributor import Distributor

    interval = Distributor._poll_interval
    assert interval(None) == Distributor.poll_latency_max   # nothing known yet
    assert interval(0.069) == pytest.approx(0.069 * Distributor.poll_latency_share)
    assert interval(0.069) < Distributor.poll_latency_max
    assert interval(0.001) == Distributor.poll_latency_min
    assert interval(600.0) == Distributor.poll_latency_max


def test_while_long_tasks_run_the_distributor_sleeps_without_spinning_and_commits_in_larger_groups() -> None:
    """Long tasks (a mean of 0.4 s or more): the idle loop sleeps the poll interval at once, and a
    group gathers results for a share of a task's run time (up to 20 ms); short ones, or none
    known: the spin and the first sleep it was made with, groups of 1 ms."""
    from emews.core.queues import QueuePair
    from emews.core.results import Task
    from emews.runtime.distributor import Distributor
    from emews.runtime.group_commit import GroupCommit
    from emews.runtime.progress import Progress

    distributor = Distributor(None, QueuePair(), [1, 2], sign=1.0, progress=Progress(None, 2))  # type: ignore[arg-type]
    slots, group = distributor._dispatch._slots, distributor._group
    backoff = Backoff(spin=1e-3, min_delay=50e-6)
    distributor._pace(backoff, 1e-3, 50e-6)  # nothing runs
    assert (backoff.spin, backoff.min_delay, backoff.max_delay, group.interval) == (1e-3, 50e-6, 1e-3, 1e-3)
    distributor._in_flight[0] = Task(0, {}, 0, 0.0)
    cases = ((60.0, True, GroupCommit.interval_max), (6.0, True, 6.0 * GroupCommit.interval_share),
             (0.01, False, GroupCommit.interval_min))
    for mean, steady, commit in cases:
        slots._mean_run = mean
        distributor._pace(backoff, 1e-3, 50e-6)
        interval = Distributor._poll_interval(mean)
        assert backoff.max_delay == interval and group.interval == pytest.approx(commit)
        assert (backoff.spin, backoff.min_delay) == ((0.0, interval) if steady else (1e-3, 50e-6))


def test_a_group_waits_for_more_results_while_workers_starve_only_when_tasks_are_long(monkeypatch) -> None:
    """Short tasks (or none known): a result goes at once when the workers wait for the optimizer;
    long ones: it waits the group's interval like any other (20 ms of a 60 s task)."""
    import time

    from emews.core.queues import QueuePair
    from emews.core.results import Outcome, Result, Status, Task
    from emews.runtime.group_commit import GroupCommit
    from emews.runtime.progress import Progress

    now = [100.0]
    monkeypatch.setattr(time, "perf_counter", lambda: now[0])
    group = GroupCommit(QueuePair(), Progress(None, 4), 4)
    task = Task(1, {"x": 0.0}, 0, 0.0)
    for mean, wait in ((None, 0.0), (0.5, 0.0), (60.0, GroupCommit.interval_max)):
        group.pace(mean)
        group.results.append(Result.from_outcome(task, Outcome(1, Status.OK, 1.0), 1.0))
        assert group.due(starving=True, running=3) is (wait == 0.0)
        assert not group.due(starving=False, running=3)
        now[0] += wait + 1e-9
        assert group.due(starving=True, running=3) and group.due(starving=False, running=3) is (wait > 0.0)
        assert group.due(starving=False, running=0)  # nothing runs: at once
        group.commit({}, 0, closing=False)


def test_progress_line_shows_done_budget_failures_best_and_busy_workers() -> None:
    import io

    from emews.core.results import Outcome, Result, Status, Task
    from emews.runtime.progress import Progress, ProgressReporter

    def result(i: int, status: Status, value: float | None) -> Result:
        return Result.from_outcome(Task(i, {"x": 0.0}, 0, 0.0), Outcome(i, status, value), 1.0)

    progress = Progress(budget=10, workers=4)
    stream = io.StringIO()
    with ProgressReporter(progress, stream=stream, interval=0.01):
        progress.record([result(0, Status.OK, 2.5), result(1, Status.FAILED, None), result(2, Status.OK, 0.75)], 3)
        assert wait_until(lambda: "3/10" in stream.getvalue()), "no periodic progress line"
    lines = stream.getvalue().splitlines()
    assert len(lines) >= 2  # periodic lines, then the final one
    assert lines[-1].startswith("3/10 evaluations, 1 failed, best 0.75, 3/4 workers busy")
