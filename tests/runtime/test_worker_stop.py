"""A worker that stops on its own (a stop signal reached it first) still reads every message the
optimizer rank sends it, up to the STOP that rank sends every worker last: under MPICH a message left
unread makes MPI_Finalize fail, and mpiexec then SIGKILLs the ranks still running (rank 0 while it
writes its outputs; tests/job/test_stop_signal.py runs the whole job)."""

from __future__ import annotations

import threading

from emews.core.results import Outcome, Status, Task
from emews.runtime.transport import Message, Tag, ThreadHub
from emews.runtime.worker import WorkerStopped, worker_loop
from testutil import RecordingRunner, drained, wait_until


def _recording() -> RecordingRunner:
    return RecordingRunner(lambda task: Outcome(task.id, Status.OK, 0.0))


def _until_stopped(endpoint) -> list[Message]:
    """The distributor's messages up to a worker's STOPPED (a test safety net of 60 s, never a measure)."""
    taken: list[Message] = []

    def stopped() -> bool:
        taken.extend(drained(endpoint))
        return any(m.tag is Tag.STOPPED for m in taken)

    assert wait_until(stopped, timeout=60)
    return taken


def test_a_worker_stopped_by_a_signal_reads_its_messages_until_the_stop() -> None:
    """The signal ends the worker's loop before the optimizer rank knows: it sends STOPPED, then a
    task it dispatched meanwhile and a trial reply still reach the worker, then the STOP. The worker
    returns only after the STOP, with its mailbox empty; the late task never starts (without the
    fix the worker returned at once and the STOP, the task and the reply stayed unread)."""
    hub = ThreadHub(2)
    distributor, worker = hub.endpoint(0), hub.endpoint(1)
    runner = _recording()
    returned = threading.Event()

    def serve() -> None:
        worker_loop(worker, runner, interrupted=lambda: True)
        returned.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    messages = _until_stopped(distributor)
    assert [m.tag for m in messages] == [Tag.STOPPED] and isinstance(messages[0].payload, WorkerStopped)
    distributor.send([Task(7, {"x": 1}, seed=7, submitted=0.0)], 1, Tag.TASK)
    distributor.send(None, 1, Tag.TRIAL_REPLY)
    assert not returned.is_set()  # it waits for the STOP, whatever came before
    distributor.send(False, 1, Tag.STOP)
    thread.join(timeout=60)
    assert returned.is_set()
    assert worker.poll() is None  # nothing left unread
    assert runner.ran == []
    assert distributor.poll() is None  # STOPPED was its last message


def test_a_worker_told_to_stop_returns_at_its_stop_as_before() -> None:
    """A plain run's end: the STOP comes first, the worker takes it, sends STOPPED and returns
    (it does not wait for a second STOP)."""
    hub = ThreadHub(2)
    distributor, worker = hub.endpoint(0), hub.endpoint(1)
    distributor.send([Task(0, {"x": 0}, seed=0, submitted=0.0)], 1, Tag.TASK)
    distributor.send(False, 1, Tag.STOP)
    runner = _recording()
    served = worker_loop(worker, runner)
    assert served == 1 and runner.ran == [0]
    assert worker.poll() is None
    assert [m.tag for m in _until_stopped(distributor)] == [Tag.READY, Tag.OUTCOME, Tag.STOPPED]
