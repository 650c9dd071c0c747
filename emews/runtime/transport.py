"""Point-to-point messaging between ranks, behind one small interface.

:class:`MPITransport` wraps an mpi4py communicator; :class:`ThreadTransport`
connects threads in one process so the whole runtime can be tested without
``mpiexec`` (as ``mpi4py.futures`` swaps backends with one factory).
"""

from __future__ import annotations

import pickle
import queue
import time
from enum import IntEnum
from typing import Any, NamedTuple, Protocol

from emews.core.errors import EmewsError
from emews.runtime.backoff import Backoff


class Tag(IntEnum):
    """Message kinds; the MPI tag of each message."""

    TASK = 1  # distributor -> worker: a list of Tasks, to run in order
    OUTCOME = 2  # worker -> distributor: a list of Outcomes
    STOP = 3  # distributor -> worker: finish (payload: True to abort running work)
    STOPPED = 4  # worker -> distributor: the worker has finished (payload: tasks served)
    TRIAL = 5  # worker -> distributor: a training trial's report / restore request (emews.training.messages)
    TRIAL_REPLY = 6  # distributor -> worker: the answer (a training.Reply)
    RENDEZVOUS = 7  # team rank 0 -> the other members of a multi-rank task: its port (teams.Rendezvous)
    CANCEL = 8  # distributor -> worker: abandon this multi-rank task (payload: task id), a member failed
    RECALL = 9  # distributor -> worker: give back the tasks held that have not started (payload: None)
    RETURNED = 10  # worker -> distributor: the answer, the ids of the tasks given back (a tuple, maybe empty)
    READY = 11  # worker -> distributor: its runner is set up (the objective imported inline), it takes tasks


_TAGS = {int(tag): tag for tag in Tag}


def quiet_barrier(comm: Any, patience: float | None = None) -> bool:
    """A barrier whose waiting ranks sleep (a non-blocking barrier polled with back-off) instead
    of spinning in MPI's progress engine, which on a full node takes the core of the rank that
    has work; ``False`` when ``patience`` seconds passed first."""
    request = comm.Ibarrier()
    backoff = Backoff(max_delay=10e-3)
    deadline = None if patience is None else time.monotonic() + patience
    while not request.Test():
        if deadline is not None and time.monotonic() > deadline:
            return False
        backoff.idle()
    return True


def drop_unread(comm: Any) -> int:
    """Receive, and drop unread, every message still waiting for this rank on ``comm``; how many.

    For a rank whose part is over (after :func:`emews.job.mpi_main.leave_together`): MPICH's
    MPI_Finalize fails on a message still unmatched ("Communicator being freed has 1 unmatched
    message(s)"), the rank then exits without telling the process manager it finalized, and
    mpiexec (Hydra) SIGKILLs every rank still running and prints BAD TERMINATION. No message
    should be left (a worker reads until its STOP, rank 0 until every worker's STOPPED); this
    keeps one that is anyway from killing the job. The bytes are not unpickled."""
    from mpi4py import MPI

    status = MPI.Status()
    dropped = 0
    while (message := comm.Improbe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)) is not None:
        message.Recv([bytearray(max(status.Get_count(MPI.BYTE), 1)), MPI.BYTE])
        dropped += 1
    return dropped


def quiet_bcast(comm: Any, value: Any = None, root: int = 0) -> Any:
    """``comm.bcast`` whose receivers sleep until the root is ready (:func:`quiet_barrier`): the
    workers wait for rank 0's plan while rank 0 loads the configuration on the same cores."""
    quiet_barrier(comm)
    return comm.bcast(value, root=root)


class Message(NamedTuple):
    source: int
    tag: Tag
    payload: Any


class Transport(Protocol):
    rank: int
    size: int

    def send(self, payload: Any, dest: int, tag: Tag) -> None:
        """Start sending ``payload``; never waits for the receiver."""

    def poll(self) -> Message | None:
        """Return the next message for this rank, or ``None`` at once if there is none."""

    @property
    def sending(self) -> int:
        """Sends started but not yet complete (the receiver has not taken them)."""

    def idle_backoff(self) -> Backoff:
        """The back-off of this rank while it waits for its next message."""


class ThreadLevelTooLow(EmewsError, RuntimeError):
    """MPI was initialised without the thread support the optimizer rank needs."""


class MPITransport:
    """Messages over an mpi4py communicator (pickled objects, matched probes).

    Sends are non-blocking (``isend``) and their requests are kept until complete,
    as ``mpi4py.futures`` does: two ranks that send each other large messages at
    the same time can never deadlock, because neither waits in a send and both keep
    receiving. Completed requests are reaped on every poll.
    """

    def __init__(self, comm: Any, *, threads: bool = False) -> None:
        from mpi4py import MPI

        if threads and MPI.Query_thread() < MPI.THREAD_SERIALIZED:
            raise ThreadLevelTooLow(
                "the optimizer rank calls MPI from its distributor thread and needs MPI_THREAD_SERIALIZED "
                f"or better; this MPI was initialised with level {MPI.Query_thread()} "
                "(do not set mpi4py.rc.thread_level below 'serialized')"
            )
        self._comm = comm
        self._status = MPI.Status()
        self._any_source = MPI.ANY_SOURCE
        self._any_tag = MPI.ANY_TAG
        self._requests: list[Any] = []
        self._testall = MPI.Request.Testall
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()

    def send(self, payload: Any, dest: int, tag: Tag) -> None:
        self._requests.append(self._comm.isend(payload, dest=dest, tag=int(tag)))

    @property
    def sending(self) -> int:
        self._reap()
        return len(self._requests)

    def _reap(self) -> None:
        requests = self._requests
        if not requests:
            return
        if self._testall(requests):
            requests.clear()
        else:
            self._requests = [r for r in requests if not r.Test()]

    def idle_backoff(self) -> Backoff:
        """An MPI rank polls (only a probe sees a message): it spins briefly, then sleeps at most
        1 ms between probes."""
        return Backoff()

    def poll(self) -> Message | None:
        if self._requests:
            self._reap()
        status = self._status
        msg = self._comm.improbe(self._any_source, self._any_tag, status)
        if msg is None:
            return None
        source, tag = status.Get_source(), status.Get_tag()
        return Message(source, _TAGS[tag], msg.recv())


class ThreadHub:
    """The shared mailboxes of a set of :class:`ThreadTransport` endpoints."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.boxes: list[queue.SimpleQueue[Message]] = [queue.SimpleQueue() for _ in range(size)]

    def endpoint(self, rank: int) -> ThreadTransport:
        return ThreadTransport(self, rank)


#: the longest an idle thread endpoint sleeps between polls (:meth:`ThreadTransport.wait`): a message
#: wakes it at once, so this bounds only how late it sees a flag that no message announces; polling
#: every millisecond instead, 192 idle worker threads took the cores of the busy ones (165-207 s runs)
THREAD_IDLE_WAIT = 0.05


class ThreadTransport:
    """An in-process endpoint; payloads are pickled on send, as MPI would copy them.

    An idle rank sleeps in :meth:`wait` (blocked on its mailbox) instead of polling it.
    """

    def __init__(self, hub: ThreadHub, rank: int) -> None:
        self._hub = hub
        self._box = hub.boxes[rank]
        self._early: Message | None = None  # taken by ``wait``, handed out by the next ``poll``
        self.rank = rank
        self.size = hub.size

    def send(self, payload: Any, dest: int, tag: Tag) -> None:
        data = pickle.loads(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
        self._hub.boxes[dest].put(Message(self.rank, tag, data))

    sending = 0  # a thread mailbox takes a message at once

    def poll(self) -> Message | None:
        early = self._early
        if early is not None:
            self._early = None
            return early
        try:
            return self._box.get_nowait()
        except queue.Empty:
            return None

    def idle_backoff(self) -> Backoff:
        """A thread endpoint sleeps on its mailbox at once (a message wakes it), ``THREAD_IDLE_WAIT``
        at a time."""
        return Backoff(spin=0.0, min_delay=THREAD_IDLE_WAIT, max_delay=THREAD_IDLE_WAIT, sleep=self.wait)

    def wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``, or until a message for this rank arrives (the next
        :meth:`poll` returns it); a :class:`~emews.runtime.backoff.Backoff`'s ``sleep``."""
        if self._early is None:
            try:
                self._early = self._box.get(timeout=seconds)
            except queue.Empty:
                pass
