"""The distributor's failure paths on the thread backend: what a failure does to the optimizer,
the workers and the store (issue 8: "tests for distributor failure")."""

from __future__ import annotations

from pathlib import Path

import pytest

from emews import Optimizer
from emews.core.queues import DistributorFailed
from emews.core.results import Outcome, Result, Status, Task
from emews.core.space import Constant, Float, Space
from emews.core.task_size import FixedSize
from emews.job.wiring import RunSpec, resume_state, run_optimizer_rank, run_worker_rank
from emews.objective.function import ObjectiveRef
from emews.runtime.transport import Tag, ThreadHub
from emews.store.results_store import ResultsStore
from testutil import FAULTY

SPACE = Space({"x": Float(0.0, 1.0), "mode": Constant("ok")})


class Seen(Optimizer):
    """Submits points one at a time and keeps every result it receives."""

    def __init__(self) -> None:
        self.received: list[Result] = []
        self.error: BaseException | None = None

    def run(self, evaluator) -> None:
        try:
            while evaluator.remaining:
                self.received += evaluator.map([{"x": 0.5, "mode": "ok"}])
        except BaseException as exc:
            self.error = exc
            raise


class BrokenHub(ThreadHub):
    """Mailboxes whose optimizer end breaks after ``healthy`` messages (a transport fault)."""

    def __init__(self, size: int, healthy: int) -> None:
        super().__init__(size)
        self.healthy = healthy

    def endpoint(self, rank: int):
        endpoint = super().endpoint(rank)
        if rank != 0:
            return endpoint
        hub, poll = self, endpoint.poll

        def failing_poll():
            msg = poll()
            if msg is not None and msg.tag is Tag.OUTCOME:
                hub.healthy -= 1
                if hub.healthy < 0:
                    raise ConnectionError("the interconnect went away")
            return msg

        endpoint.poll = failing_poll  # type: ignore[method-assign]
        return endpoint


def _run(hub: ThreadHub, spec: RunSpec, workers: int = 2):
    import threading

    threads = [threading.Thread(target=run_worker_rank, args=(spec, hub.endpoint(r), []),
                                kwargs={"use_alarm": False}, daemon=True) for r in range(1, workers + 1)]
    for t in threads:
        t.start()
    summary = run_optimizer_rank(spec, hub.endpoint(0), list(range(1, workers + 1)))
    for t in threads:
        t.join(timeout=60)
    return summary, [t.is_alive() for t in threads]


def test_a_distributor_failure_reaches_the_optimizer_and_stops_the_workers(tmp_path: Path) -> None:
    opt = Seen()
    spec = RunSpec(SPACE, lambda: opt, ObjectiveRef(str(FAULTY)), budget=50, isolation="inline",
                   show_progress=False, exp_dir=tmp_path)
    summary, alive = _run(BrokenHub(3, healthy=5), spec)
    assert isinstance(opt.error, DistributorFailed) and "interconnect" in str(opt.error)
    assert "interconnect" in str(summary.error)
    assert alive == [False, False] and summary.all_stopped
    with ResultsStore(tmp_path / "results.db") as store:
        stored = {r.id: r.status for r in store}
    assert opt.received and {r.id for r in opt.received} <= set(stored)  # what the optimizer saw is on disk
    assert set(stored.values()) == {Status.OK}


def test_resume_requeues_an_interrupted_task_once_then_records_it_as_failed(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path / "results.db")
    task = Task(0, {"x": 0.5, "mode": "ok"}, 1, 0.0)
    store.commit([task])
    first = resume_state(store)
    assert [t.id for t in first.requeue] == [0] and first.requeue[0].attempt == 1
    second = resume_state(store)
    assert second.requeue == []
    assert [(r.id, r.status) for r in second.history] == [(0, Status.FAILED)]
    assert "stopped 2 times" in second.history[0].error
    with pytest.raises(Exception):  # ids never collide: a second result for task 0 is refused
        store.add([Result.from_outcome(task, Outcome(0, Status.OK, 1.0), 1.0)])
    store.close()


class Batch(Optimizer):
    """Puts all its points at once and waits for every result; on a failure it first calls ``hold``
    (the test waits there until the workers have stopped, so that they stop before the run closes)."""

    def __init__(self, n: int, hold) -> None:
        self.n, self.hold, self.error = n, hold, None

    def run(self, evaluator) -> None:
        try:
            evaluator.map([{"x": i / self.n, "mode": "ok"} for i in range(self.n)])
        except BaseException as exc:
            self.error = exc
            self.hold()
            raise


def test_workers_that_stop_because_the_run_failed_leave_queued_teams_for_resume(tmp_path: Path) -> None:
    """After a distributor failure the workers stop because they are told to, even before the run
    closes: the two-rank tasks still queued are not failed as "too large for the ranks left" (they
    are for ``emews resume``)."""
    import threading

    hub, workers = BrokenHub(3, healthy=2), []
    opt = Batch(8, hold=lambda: [t.join(timeout=60) for t in workers])
    spec = RunSpec(SPACE, lambda: opt, ObjectiveRef(str(FAULTY)), budget=8, isolation="inline",
                   show_progress=False, exp_dir=tmp_path, task_size=FixedSize(2))
    workers += [threading.Thread(target=run_worker_rank, args=(spec, hub.endpoint(r), []),
                                 kwargs={"use_alarm": False}, daemon=True) for r in (1, 2)]
    for t in workers:
        t.start()
    summary = run_optimizer_rank(spec, hub.endpoint(0), [1, 2])
    assert isinstance(opt.error, DistributorFailed) and "interconnect" in str(summary.error)
    assert not any(t.is_alive() for t in workers)
    with ResultsStore(tmp_path / "results.db") as store:
        stored = list(store)
    assert stored and not any("worker ranks are left" in (r.error or "") for r in stored), stored
    assert {r.status for r in stored} == {Status.OK}
