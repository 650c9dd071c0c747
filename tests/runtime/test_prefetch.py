"""Prefetch against hoarding: fast tasks make the run-time estimate tiny and workers take many tasks
ahead; slower tasks behind them must not wait on one worker while another has nothing to do.

Two remedies, each tested on its own part and together in a real ``emews launch``: a failed task's
run time only ever lengthens the estimate (instant failures no longer deepen prefetch), and a
worker that holds tasks ahead and goes quiet is asked to give back those it has not started
(a recall) for the idle workers."""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path

import pytest

from emews.core.results import Outcome, Status, Task
from emews.runtime.dispatch import Returned, Send
from emews.runtime.slots import SlotDispatch, WorkerSlots
from emews.runtime.transport import Tag, ThreadHub
from emews.runtime.worker import OUTCOME_BATCH_SECONDS, WorkerStopped, worker_loop
from testutil import GATED, RecordingRunner, drained, stored_rows, wait_until, write_workflow



def task(i: int) -> Task:
    return Task(i, {"x": i}, seed=i, submitted=0.0)


def outcome(task_id: int, seconds: float, status: Status = Status.OK) -> Outcome:
    return Outcome(task_id, status, started=100.0, finished=100.0 + seconds)


# -- the estimate: failures ----------------------------------------------------------------------
def test_instant_failures_do_not_deepen_prefetch_but_long_ones_lengthen_the_estimate() -> None:
    """A run of instant failures made the estimate tiny and the depth 256: one worker took every
    task queued, slow ones included. A failure now counts only where it lengthens the estimate."""
    slots = WorkerSlots([1, 2], prefetch=8, short_task=0.005)
    for _ in range(20):
        slots.release(slots.take()[0], 1e-5, failed=True)
    assert slots.depth == 1 and slots.mean_run is None and slots.capacity == 2
    slots.release(slots.take()[0], 1e-3)  # a success is the estimate's first sample
    assert slots.depth == 5 and slots.mean_run == pytest.approx(1e-3)
    slots.release(slots.take()[0], 1e-5, failed=True)  # shorter than the mean: not counted
    assert slots.mean_run == pytest.approx(1e-3)
    slots.release(slots.take()[0], 1.0, failed=True)  # a long failure (a timeout) counts
    assert slots.mean_run == pytest.approx(0.9e-3 + 0.1) and slots.depth == 1


def test_the_slot_dispatch_hands_one_task_per_worker_while_only_failures_came_back() -> None:
    dispatch = SlotDispatch([1, 2], prefetch=256)
    queue = deque(task(i) for i in range(20))
    sent: list[tuple[int, int]] = []
    for _ in range(8):
        for event in dispatch.place(queue, start=True):
            if isinstance(event, Send):
                sent.append((event.rank, len(event.payload)))
                dispatch.ended(event.rank, [outcome(t.id, 1e-5, Status.FAILED) for t in event.payload])
    assert {n for _, n in sent} == {1} and dispatch.capacity == 2


# -- the recall: distributor side ----------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sends(events: list) -> list[Send]:
    return [e for e in events if isinstance(e, Send)]


def test_a_quiet_worker_holding_tasks_ahead_is_asked_for_them_when_another_idles() -> None:
    clock = Clock()
    dispatch = SlotDispatch([1, 2], prefetch=8, clock=clock)
    queue = deque(task(i) for i in range(8))
    first = sends(dispatch.place(queue, start=True))
    assert [(s.rank, [t.id for t in s.payload]) for s in first] == [(1, [0]), (2, [1])]
    dispatch.ended(2, [outcome(1, 1e-5)])  # short: rank 2 (heard last) takes six ahead at once
    (batch,) = sends(dispatch.place(queue, start=True))
    assert batch.rank == 2 and [t.id for t in batch.payload] == [2, 3, 4, 5, 6, 7] and not queue
    dispatch.ended(1, [outcome(0, 1e-5)])  # rank 1 has nothing now, and nothing is queued
    assert dispatch.rebalance() == []  # rank 2 was just heard from
    clock.now += dispatch.recall_after / 2
    assert dispatch.rebalance() == []
    dispatch.ended(2, [outcome(2, 1e-5)])  # still reporting: left alone
    clock.now += dispatch.recall_after * 0.9
    assert dispatch.rebalance() == []
    clock.now += dispatch.recall_after * 0.2  # task 3 has run long: rank 2 holds 4 to 7 unstarted
    assert dispatch.rebalance() == [Send(2, Tag.RECALL, None)]
    assert dispatch.rebalance() == []  # asked once
    # the quiet time is a sample of the estimate (task 3 has run at least that long): one task per worker
    assert dispatch.mean_run == pytest.approx(0.9e-5 + 0.1 * 1.1 * dispatch.recall_after) and dispatch.capacity == 2
    assert dispatch.returned(2, (4, 5, 6, 7)) == [Returned((4, 5, 6, 7))]
    queue.extend(task(i) for i in (4, 5, 6, 7))  # the distributor queues them again, first
    events = dispatch.place(queue, start=True)
    assert [(s.rank, [t.id for t in s.payload]) for s in sends(events)] == [(1, [4])]  # one, to the idle worker
    assert [t.id for t in queue] == [5, 6, 7]
    clock.now += 10 * dispatch.recall_after
    assert dispatch.rebalance() == []  # nobody idles, nobody holds tasks ahead
    dispatch.ended(2, [outcome(3, 3.0)])
    assert [(s.rank, [t.id for t in s.payload]) for s in sends(dispatch.place(queue, start=True))] == [(2, [5])]


def test_no_recall_while_every_worker_has_work_or_none_holds_any_ahead() -> None:
    clock = Clock()
    dispatch = SlotDispatch([1, 2], prefetch=8, clock=clock)
    queue = deque(task(i) for i in range(2))
    dispatch.place(queue, start=True)
    clock.now += 100.0
    assert dispatch.rebalance() == []  # each runs one task: nothing to take back
    dispatch.ended(1, [outcome(0, 1e-5)])
    queue.extend(task(i) for i in range(2, 12))
    events = dispatch.place(queue, start=True)
    assert [(s.rank, len(s.payload)) for s in sends(events)] == [(1, 8), (2, 2)]  # both hold tasks ahead
    clock.now += 100.0
    assert dispatch.rebalance() == []  # but neither idles
    dispatch.stopped(2, (1,), closing=False)
    assert dispatch.rebalance() == []  # a stopped worker is no idle one


def test_a_recall_answered_with_nothing_frees_nothing() -> None:
    """The worker ran what it held before the recall reached it: its outcomes come first, then an
    empty answer; it holds one task, so it is not asked again, and new work goes to the idle one."""
    clock = Clock()
    dispatch = SlotDispatch([1, 2], prefetch=8, clock=clock)
    queue = deque(task(i) for i in range(2))
    dispatch.place(queue, start=True)
    dispatch.ended(2, [outcome(1, 1e-5)])
    queue.extend(task(i) for i in range(2, 5))
    assert [s.rank for s in sends(dispatch.place(queue, start=True))] == [2]
    dispatch.ended(1, [outcome(0, 1e-5)])
    clock.now += 1.0
    assert sends(dispatch.rebalance()) == [Send(2, Tag.RECALL, None)]
    dispatch.ended(2, [outcome(2, 1e-5), outcome(3, 1e-5)])
    assert dispatch.returned(2, ()) == []
    clock.now += 1.0
    assert dispatch.rebalance() == []
    assert [s.rank for s in sends(dispatch.place(deque([task(9)]), start=True))] == [1]


def test_a_worker_that_ran_all_it_held_before_the_recall_counts_as_idle_once() -> None:
    """Its last outcome makes it idle; the empty answer after it must not count it idle again (a
    worker idle twice over would have recalls sent while every worker has work)."""
    clock = Clock()
    dispatch = SlotDispatch([1, 2, 3], prefetch=8, clock=clock)
    queue = deque(task(i) for i in range(3))
    assert [s.rank for s in sends(dispatch.place(queue, start=True))] == [1, 2, 3]
    dispatch.ended(2, [outcome(1, 1e-5)])
    queue.extend(task(i) for i in (3, 4, 5))
    assert [(s.rank, len(s.payload)) for s in sends(dispatch.place(queue, start=True))] == [(2, 3)]
    dispatch.ended(3, [outcome(2, 1e-5)])
    queue.extend(task(i) for i in (6, 7, 8))
    assert [(s.rank, len(s.payload)) for s in sends(dispatch.place(queue, start=True))] == [(3, 3)]
    dispatch.ended(1, [outcome(0, 1e-5)])  # rank 1 idles
    clock.now += 1.0
    assert sends(dispatch.rebalance()) == [Send(2, Tag.RECALL, None)]  # the longest quiet first
    dispatch.ended(2, [outcome(i, 1e-5) for i in (3, 4, 5)])  # rank 2 ran them all meanwhile: it idles
    assert dispatch.returned(2, ()) == []
    queue.extend(task(i) for i in (9, 10))
    assert sorted(s.rank for s in sends(dispatch.place(queue, start=True))) == [1, 2]  # one each
    assert dispatch.rebalance() == []  # rank 3 holds tasks ahead, but nobody idles


# -- the recall: worker side ---------------------------------------------------------------------
class _Polling(RecordingRunner):
    """A runner whose tasks look for messages ``polls`` times while they run (as a child's wait
    does) and last 10 us, recording which tasks it ran."""

    def __init__(self, polls: int = 1) -> None:
        super().__init__(lambda task: outcome(task.id, 1e-5), polls)


@pytest.mark.parametrize("polls", [2, 0])
def test_a_worker_gives_back_the_tasks_it_has_not_started_and_never_runs_them(polls: int) -> None:
    """A recall read while task 0 runs (a runner that looks for messages meanwhile, as a child's wait
    does) takes back tasks 1 to 4, queued or still in the inbox; read only between tasks (a runner
    that does not look), the task that starts next stays and the rest go back. None of the tasks
    given back runs, none is named unfinished."""
    hub = ThreadHub(2)
    distributor, worker = hub.endpoint(0), hub.endpoint(1)
    distributor.send([task(0), task(1), task(2)], 1, Tag.TASK)
    distributor.send([task(3), task(4)], 1, Tag.TASK)
    distributor.send(None, 1, Tag.RECALL)
    distributor.send(False, 1, Tag.STOP)
    runner = _Polling(polls)
    served = worker_loop(worker, runner)
    messages = drained(distributor)
    ran, back = ([0], (1, 2, 3, 4)) if polls else ([0, 1], (2, 3, 4))
    assert runner.ran == ran and served == len(ran)
    assert [m.payload for m in messages if m.tag is Tag.RETURNED] == [back]
    assert [o.task_id for m in messages if m.tag is Tag.OUTCOME for o in m.payload] == ran
    stopped = messages[-1].payload
    assert messages[-1].tag is Tag.STOPPED and isinstance(stopped, WorkerStopped) and stopped.unfinished == ()


def test_an_idle_worker_answers_a_recall_with_nothing_and_goes_on() -> None:
    hub = ThreadHub(2)
    distributor, worker = hub.endpoint(0), hub.endpoint(1)
    distributor.send(None, 1, Tag.RECALL)
    distributor.send([task(0), task(1)], 1, Tag.TASK)
    distributor.send(False, 1, Tag.STOP)
    runner = _Polling()
    assert worker_loop(worker, runner) == 2 and runner.ran == [0, 1]
    messages = drained(distributor)
    assert [m.payload for m in messages if m.tag is Tag.RETURNED] == [()]
    assert messages[-1].tag is Tag.STOPPED and messages[-1].payload.unfinished == ()


class _Draining:
    """A thread endpoint that counts a message waiting for it as a send not yet complete, so that a
    stopping worker reads its inbox while it waits (as an MPI rank does until its last sends are taken)."""

    def __init__(self, hub: ThreadHub, rank: int) -> None:
        self._endpoint, self._box = hub.endpoint(rank), hub.boxes[rank]
        self.rank, self.size = rank, hub.size

    def send(self, payload, dest: int, tag: Tag) -> None:
        self._endpoint.send(payload, dest, tag)

    def poll(self):
        return self._endpoint.poll()

    @property
    def sending(self) -> int:
        return 0 if self._box.empty() else 1

    def idle_backoff(self):
        return self._endpoint.idle_backoff()


def test_a_stopping_worker_names_what_it_holds_instead_of_giving_it_back() -> None:
    """A worker that stops on its own (a signal) names its tasks in its last message; a recall it
    reads after that is not answered, so no task is both given back and named unfinished."""
    hub = ThreadHub(2)
    distributor, worker = hub.endpoint(0), _Draining(hub, 1)
    stopping = []

    class _Interrupted(_Polling):
        def run(self, task, should_abort, team=None) -> Outcome | None:
            self.ran.append(task.id)
            distributor.send(None, 1, Tag.RECALL)  # arrives while the task ends, unread
            distributor.send(False, 1, Tag.STOP)  # rank 0's last message to every worker (await_stop reads it)
            stopping.append(True)
            return None  # interrupted mid-task: it stays unfinished

    distributor.send([task(0), task(1)], 1, Tag.TASK)
    runner = _Interrupted()
    worker_loop(worker, runner, interrupted=lambda: bool(stopping))
    assert hub.boxes[1].empty()  # the recall was read
    messages = drained(distributor)
    assert [m.tag for m in messages] == [Tag.READY, Tag.STOPPED] and messages[1].payload.unfinished == (0, 1)


def test_the_outcome_of_a_task_longer_than_the_batch_window_is_sent_before_the_next_queued_task_runs() -> None:
    """Outcomes of back-to-back short tasks travel together, at most ``OUTCOME_BATCH_SECONDS``
    apart; the window counted from the end of a batch's first task, so the outcome of a long task
    with another queued behind it waited until that one ended too (a slow task's result reached
    the optimizer a whole task late)."""
    hub = ThreadHub(2)
    distributor, worker = hub.endpoint(0), hub.endpoint(1)
    seen: dict[int, list[int]] = {}

    class _LongThenLook(_Polling):
        def run(self, task, should_abort, team=None) -> Outcome:
            if task.id == 0:
                time.sleep(20 * OUTCOME_BATCH_SECONDS)
            seen[task.id] = [o.task_id for m in drained(distributor) if m.tag is Tag.OUTCOME for o in m.payload]
            return outcome(task.id, 1e-5)

    distributor.send([task(0), task(1)], 1, Tag.TASK)
    distributor.send(False, 1, Tag.STOP)
    assert worker_loop(worker, _LongThenLook()) == 2
    assert seen == {0: [], 1: [0]}


# -- both, for real ------------------------------------------------------------------------------
@pytest.mark.parametrize("first", ["fail", "fast"])
def test_gated_tasks_behind_instant_ones_start_on_both_workers(emews_cmd, tmp_path: Path, first: str) -> None:
    """16 instant tasks (failures, or successes), then 6 held at a gate, on 2 workers: each worker
    starts a gated task while the gate is closed (before, one worker took all six ahead and would
    have run them back to back while the other idled); each runs once. The gate opens once two
    gated tasks started, or after a safety net of 90 s (then the test fails)."""
    points = tmp_path / "points.jsonl"
    lines = [{"kind": first, "x": i} for i in range(16)] + [{"kind": "gated", "x": i} for i in range(6)]
    points.write_text("".join(json.dumps(p) + "\n" for p in lines))
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep", "options": {"file": str(points)}},
        objective={"module": str(GATED), "function": "run"},
        space={"kind": {"type": "categorical", "values": ["fail", "fast", "gated"]},
               "x": {"type": "int", "lower": 0, "upper": 100}},
        budget={"evaluations": len(lines), "fail_fast": 0}, task={"isolation": "process", "timeout": 300})
    marks, gate = tmp_path / "marks", tmp_path / "open"
    marks.mkdir()
    emews_cmd.env.update(GATE_FILE=str(gate), MARK_DIR=str(marks))
    proc = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")

    def started() -> dict[str, list[str]]:  # task id -> the ranks that started it (its marks' lines once written)
        return {m.name: [line.split()[0] for line in lines] for m in marks.iterdir()
                if (lines := [line for line in m.read_text().splitlines(keepends=True) if line.endswith("\n")])}

    try:
        wait_until(lambda: len(started()) >= 2 or proc.poll() is not None, timeout=90)
        started_while_closed = started()
    finally:
        gate.touch()
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert sorted(started_while_closed.values()) == [["1"], ["2"]], \
        f"gated tasks started while the gate was closed (task id: rank): {started_while_closed}"
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == len(lines) and len({r["id"] for r in rows}) == len(lines)
    gated = [r for r in rows if json.loads(r["params"])["kind"] == "gated"]
    assert {r["status"] for r in gated} == {"ok"} and {r["rank"] for r in gated} == {1, 2}
    assert sorted(m.name for m in marks.iterdir()) == sorted(str(r["id"]) for r in gated)
    for m, ranks in started().items():  # each gated task started once, on the rank that reported it
        (rank,) = ranks
        assert int(rank) == next(r["rank"] for r in gated if str(r["id"]) == m)
    assert emews_cmd.leftovers_after_exit() == []
