"""A task sent to a worker after it stopped on its own (a SIGTERM reached that rank alone) runs on
another worker.

Found by the chaos harness (tests/chaos, ``SIGTERM to worker at result #0``): the worker's last
outcome reached rank 0, which sent it the next task at once, while the worker, stopped by the
signal, had already sent its STOPPED naming the tasks it held (none). The worker reads that late
task without starting it (tests/runtime/test_worker_stop.py), and rank 0 retired the worker
requeuing only the tasks the STOPPED named: the late task was in flight for good, and the job
hung at 3/4 evaluations with "1/3 workers busy" until it was killed."""

from __future__ import annotations

from collections import deque

from emews.core.queues import QueuePair
from emews.core.results import Outcome, Status, Task
from emews.runtime.dispatch import Send, Unfinished
from emews.runtime.distributor import Distributor
from emews.runtime.progress import Progress
from emews.runtime.slots import SlotDispatch
from emews.runtime.transport import Tag, ThreadHub
from emews.runtime.worker import WorkerStopped
from testutil import drained


def task(i: int) -> Task:
    return Task(i, {"x": i}, seed=i, submitted=0.0)


def test_the_dispatch_gives_back_a_task_sent_after_the_worker_stopped() -> None:
    dispatch = SlotDispatch([1, 2], prefetch=1)
    queue = deque(task(i) for i in range(3))
    dispatch.place(queue, start=True)  # one task each
    dispatch.ended(1, [Outcome(0, Status.OK, 0.5, started=0.0, finished=1.0)])
    sent = [e for e in dispatch.place(queue, start=True) if isinstance(e, Send)]
    assert [(s.rank, [t.id for t in s.payload]) for s in sent] == [(1, [2])]
    assert dispatch.stopped(1, (), closing=False) == [Unfinished((2,))]  # its STOPPED left before task 2 came


def test_the_distributor_queues_it_again_and_tells_the_pool_it_never_started() -> None:
    """The same on rank 0's distributor (its events applied as its thread does): task 2 is queued
    again for the other workers, and a pool's feeder hears that it never started."""
    hub, queues, unstarted = ThreadHub(3), QueuePair(), []
    distributor = Distributor(
        hub.endpoint(0), queues, [1, 2], sign=1.0, progress=Progress(None, 2), on_unstarted=unstarted.extend
    )
    for rank in (1, 2):
        distributor._on_ready(rank, None)
    queues.tasks.extend(task(i) for i in range(3))
    distributor._place()
    first = {m.payload[0].id: rank for rank in (1, 2) for m in drained(hub.endpoint(rank))}
    assert sorted(first) == [0, 1]
    rank = first[0]
    distributor._on_outcome(rank, [Outcome(0, Status.OK, 0.5, started=0.0, finished=1.0)])
    distributor._place()
    assert [[t.id for t in m.payload] for m in drained(hub.endpoint(rank)) if m.tag is Tag.TASK] == [[2]]
    distributor._on_stopped(rank, WorkerStopped(1, None, (), None))  # it left before task 2 came
    assert [t.id for t in queues.tasks] == [2] and unstarted == [2]
