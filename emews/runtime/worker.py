"""The worker loop: receive a task, run the objective, send the outcome back."""

from __future__ import annotations

import socket
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from emews.core.errors import EmewsError
from emews.core.results import Outcome, Status, Task
from emews.objective.team import Team, free_port
from emews.runtime.backoff import Backoff
from emews.runtime.teams import Rendezvous, TeamTask
from emews.runtime.transport import Message, Tag, Transport
from emews.training.messages import Following, LinkClosed, Reply, Report, TrialLink


class IdleProcessLost(EmewsError):
    """What a runner's ``close`` raises when the process that runs its tasks was killed from outside
    while idle (between tasks, before it was asked to stop): no work was lost, the run's end is not
    a failure; the message says what killed it."""


class Runner(Protocol):
    def start(self) -> None: ...

    def run(self, task: Task, should_abort: TaskInbox, team: Team | None = None) -> Outcome | None: ...

    def close(self) -> None: ...


class AbortCheck(Protocol):
    def __call__(self) -> bool: ...


class TaskInbox(AbortCheck, TrialLink, Protocol):
    """What a runner gets with a task: the abort check, and the trial link to the optimizer rank."""

    reported: bool  # the task has sent a training report (a stop signal then pauses it)


@dataclass(slots=True)
class WorkerStopped:
    """A worker's last message: how many tasks it ran, and why its shutdown failed, if it did."""

    served: int
    error: str | None = None
    unfinished: tuple[int, ...] = ()  # tasks it held but did not finish (it stopped on its own)
    began: int | None = None  # the one of them it had started (the others it held unstarted)
    warning: str | None = None  # what went wrong at its end that lost no work (its idle objective process killed)


class Inbox:
    """The worker's view of its messages; polled during a task to notice an abort.

    Tasks that arrive while one runs (prefetched) are kept, in order, for later.
    ``interrupted`` (a signal arrived) counts as an abort, except for a training trial (a task
    that has reported): it goes on to its next report, where the optimizer rank pauses it,
    until ``aborting`` (the signal's grace is over). A cancel of the multi-rank task running now
    (``current``; another member failed) is an abort too. It is also the running trial's
    :class:`~emews.training.messages.TrialLink` to the optimizer rank (``post`` / ``take``). Team ports
    (``rendezvous``) and cancels are kept by task id. A recall is answered as it is received, also
    while a task runs (:meth:`give_back`).
    """

    def __init__(
        self,
        transport: Transport,
        interrupted: Callable[[], bool] = lambda: False,
        optimizer_rank: int = 0,
        aborting: Callable[[], bool] | None = None,
    ) -> None:
        self._transport = transport
        self._interrupted = interrupted
        self._aborting = aborting or interrupted
        self._optimizer_rank = optimizer_rank
        self.held: deque[Message] = deque()
        self.replies: deque[Reply] = deque()
        self.stop: Message | None = None
        self.reported = False  # the running task is a training trial: it sent a report, or follows its leader's
        self.rendezvous: dict[int, int] = {}
        self.cancelled: set[int] = set()
        self.current: int | None = None
        #: the worker's queue of tasks handed over (its first runs now, or next); ``None`` once it
        #: stops, when recalls are no longer answered (its last message names what it held)
        self.queued: deque[Task | TeamTask] | None = None

    def next(self) -> Message | None:
        """The next task or stop message (``None``: none now; other kinds are kept aside)."""
        if self.held:
            return self.held.popleft()
        if self.stop is not None:
            return self.stop
        msg = self._transport.poll()
        if msg is not None and msg.tag is Tag.STOP:
            self.stop = msg
        if msg is None or msg.tag is Tag.TASK or msg.tag is Tag.STOP:
            return msg
        self._aside(msg)
        return None

    def receive(self) -> None:
        """Take one waiting message (if any) into the inbox."""
        if self.stop is None:
            msg = self._transport.poll()
            if msg is not None:
                if msg.tag is Tag.STOP:
                    self.stop = msg
                elif msg.tag in _ASIDE:
                    self._aside(msg)
                else:
                    self.held.append(msg)

    def _aside(self, msg: Message) -> None:
        if msg.tag is Tag.TRIAL_REPLY:
            self.replies.append(msg.payload)
        elif msg.tag is Tag.RENDEZVOUS:
            self.rendezvous[msg.payload.task_id] = msg.payload.port
        elif msg.tag is Tag.RECALL:
            self.give_back()
        else:
            self.cancelled.add(msg.payload)

    def give_back(self) -> None:
        """Answer a recall: every task held that has not started goes back to the optimizer rank,
        in order (all queued but the first, which runs or starts next, and those still in the
        inbox); they are dropped here first, so none runs twice."""
        queued = self.queued
        if queued is None:
            return
        back: list[int] = []
        while len(queued) > 1:
            back.append(_task_of(queued.pop()).id)
        back.reverse()
        kept: deque[Message] = deque()
        for msg in self.held:
            if msg.tag is Tag.TASK:
                back.extend(_task_of(t).id for t in msg.payload)
            else:
                kept.append(msg)
        self.held = kept
        self._transport.send(tuple(back), self._optimizer_rank, Tag.RETURNED)

    def post(self, message: object) -> None:
        """Send a trial message to the optimizer rank (a team member's :class:`Following` is kept here)."""
        if isinstance(message, Following):
            self.reported = True
            return
        self.reported = self.reported or isinstance(message, Report)
        self._transport.send(message, self._optimizer_rank, Tag.TRIAL)

    def take(self, session: int, block: bool = True) -> Reply | None:
        """The next reply for ``session`` (replies to earlier, abandoned sessions are dropped).
        Raises :class:`~emews.training.messages.LinkClosed` when the task must be abandoned meanwhile, or
        once STOP arrived: the optimizer rank answers nothing after it (a reply sent before it was
        received before it)."""
        backoff = self._transport.idle_backoff()
        while True:
            while self.replies:
                reply = self.replies.popleft()
                if reply.session == session:
                    return reply
            if self() or self.stop is not None:
                raise LinkClosed("the worker is stopping")
            if self.replies:
                continue
            if not block:
                return None
            backoff.idle()

    @property
    def aborted(self) -> bool:
        """A stop that aborts running work has arrived (the run failed or was cancelled)."""
        return self.stop is not None and bool(self.stop.payload)

    def __call__(self) -> bool:
        """Whether the running task must be abandoned (an abort, a signal or its cancel arrived)."""
        self.receive()
        if self.aborted:
            return True
        if self.current is not None and self.current in self.cancelled:
            return True
        return self._aborting() or (not self.reported and self._interrupted())


#: messages a worker keeps aside by kind rather than queueing them as work
_ASIDE = frozenset((Tag.TRIAL_REPLY, Tag.RENDEZVOUS, Tag.CANCEL, Tag.RECALL))


#: outcomes of short tasks run back to back travel together, but none waits longer than this
OUTCOME_BATCH_SECONDS = 100e-6


def worker_loop(
    transport: Transport,
    runner: Runner,
    *,
    optimizer_rank: int = 0,
    interrupted: Callable[[], bool] = lambda: False,
    aborting: Callable[[], bool] | None = None,
) -> int:
    """Serve tasks until told to stop (or ``interrupted``); return the number of tasks run.

    Tasks handed over ahead of time (prefetch) wait in a local queue; a recall takes back those
    not started (:meth:`Inbox.give_back`, for an idle worker). An
    outcome is sent as soon as its task ends, unless more queued tasks follow
    at once: then outcomes are sent together, once ``OUTCOME_BATCH_SECONDS`` have passed since
    the first of them started, so short tasks cost the optimizer rank fewer messages (and a
    longer task's outcome is not held while the next one runs).
    A send is complete before the next task starts (the inbox is drained meanwhile),
    so a large result reaches the optimizer rank while this rank is still in MPI.
    The first message is ``Tag.READY``, once the runner is set up (an inline objective imported and
    its setup run): a rank that never sends it (stopped, blocked where its setup's timer cannot reach
    it) is run without. The last message is always :class:`WorkerStopped`, also when shutting down fails. A worker
    that stopped on its own (a stop signal) then still reads its messages until the STOP that
    the optimizer rank sends every worker as its last message (:func:`await_stop`).
    """
    backoff = transport.idle_backoff()
    inbox = Inbox(transport, interrupted, optimizer_rank, aborting)
    queued: deque[Task | TeamTask] = deque()
    inbox.queued = queued
    unsent: list[Outcome] = []
    oldest = 0.0
    served = 0
    error: str | None = None
    began: int | None = None  # the task running now
    try:
        _start(runner, transport, optimizer_rank, interrupted)
        while not interrupted():
            if queued:
                inbox.receive()  # a message a task: an abort behind the tasks handed over ahead is seen
                if inbox.aborted:  # and those are not started: they stay unfinished
                    break
                item = queued[0]
                if not unsent:  # a batch's age counts from its first task's start: the outcome
                    oldest = time.perf_counter()  # of a task longer than the window goes at once
                began = _task_of(item).id
                outcome = (
                    _run_team(runner, item, inbox, transport)
                    if isinstance(item, TeamTask)
                    else _run_guarded(runner, item, inbox, transport.rank)
                )
                if outcome is None:  # aborted mid-task: it stays among the unfinished
                    break
                queued.popleft()
                began = None
                unsent.append(outcome)
                served += 1
                if not queued or time.perf_counter() - oldest >= OUTCOME_BATCH_SECONDS:
                    transport.send(unsent, optimizer_rank, Tag.OUTCOME)
                    unsent = []
                    _settle(transport, inbox, backoff)
                continue
            msg = inbox.next()
            if msg is None:
                backoff.idle()
                continue
            backoff.reset()
            if msg.tag is Tag.STOP:
                break
            if msg.tag is Tag.TASK:
                queued.extend(msg.payload)
    except BaseException:
        error = f"worker rank {transport.rank} on {socket.gethostname()}: " + traceback.format_exc()
    finally:
        inbox.queued = None  # what it holds now is named in WorkerStopped, not given back
        warning, failed = _close(runner, transport.rank)
        if failed is not None:
            error = (error or "") + failed
        if unsent:
            transport.send(unsent, optimizer_rank, Tag.OUTCOME)
        stopped = WorkerStopped(served, error, _unfinished(queued, inbox), began, warning)
        transport.send(stopped, optimizer_rank, Tag.STOPPED)
        _settle(transport, inbox, backoff, deadline=time.monotonic() + FINAL_SEND_SECONDS)
        await_stop(inbox)
    return served


def _close(runner: Runner, rank: int) -> tuple[str | None, str | None]:
    """Shut ``runner`` down: the warning to pass on (its idle process was killed from outside: no
    work lost) and the teardown's failure (its traceback), each ``None`` when there is none."""
    try:
        runner.close()
    except IdleProcessLost as exc:
        return f"rank {rank} ({socket.gethostname()}): {exc}", None
    except BaseException:
        return None, f"teardown failed on rank {rank} ({socket.gethostname()}):\n" + traceback.format_exc()
    return None, None


def _start(runner: Runner, transport: Transport, optimizer_rank: int, interrupted: Callable[[], bool]) -> None:
    """Set the runner up, then say this worker is ready: the optimizer rank hands tasks only to a
    worker that said so (nothing when a stop signal came meanwhile)."""
    runner.start()
    if not interrupted():
        transport.send(None, optimizer_rank, Tag.READY)


def await_stop(inbox: Inbox) -> None:
    """Read this worker's messages until the optimizer rank's STOP, its last one to this worker.

    A worker that stopped on its own (a stop signal reached it before the optimizer rank's STOP)
    must not leave a message unread: MPI_Finalize fails on a message still unmatched at that
    point (MPICH: "Communicator being freed has 1 unmatched message(s)"), the rank then exits
    without telling the process manager it finalized, and mpiexec (Hydra) SIGKILLs every rank
    still running, rank 0 among them while it writes its outputs ("BAD TERMINATION ... Killed
    (signal 9)"). The optimizer rank sends STOP to every worker, also to one that stopped on its
    own, and nothing after it, so STOP always comes; as long as rank 0 runs the worker waits for
    it, as it would at the job's last barrier (:func:`emews.job.mpi_main.leave_together`),
    sleeping up to 10 ms between polls.
    """
    backoff = Backoff(max_delay=10e-3)
    while inbox.stop is None:
        inbox.receive()
        backoff.idle()


def _unfinished(queued: deque[Task | TeamTask], inbox: Inbox) -> tuple[int, ...]:
    """Ids of the tasks this worker holds and did not run: queued, or still in its inbox."""
    waiting = [_task_of(t).id for msg in inbox.held if msg.tag is Tag.TASK for t in msg.payload]
    return tuple(_task_of(t).id for t in queued) + tuple(waiting)


def _task_of(item: Task | TeamTask) -> Task:
    return item.task if isinstance(item, TeamTask) else item


#: how long a stopping worker waits for the optimizer rank to take its last messages
FINAL_SEND_SECONDS = 60.0


def _settle(transport: Transport, inbox: Inbox, backoff: Backoff, deadline: float | None = None) -> None:
    """Wait until the optimizer rank has taken every message sent, receiving meanwhile."""
    while transport.sending and (deadline is None or time.monotonic() < deadline):
        inbox.receive()
        backoff.idle()
    backoff.reset()


def _run_team(runner: Runner, item: TeamTask, inbox: Inbox, transport: Transport) -> Outcome | None:
    """This rank's part of a multi-rank task: learn the team's port, run the objective as its
    member; a cancel (another member failed) ends it with a cancelled outcome, not a stop."""
    task = item.task
    inbox.current = task.id
    _forget_other_tasks(inbox, task.id)
    try:
        team = join_team(item, transport, inbox)
        outcome = None if team is None else _run_guarded(runner, task, inbox, transport.rank, team)
        if outcome is None and task.id in inbox.cancelled:
            outcome = Outcome(
                task.id,
                Status.FAILED,
                error="cancelled: another member of the team failed",
                rank=transport.rank,
                host=socket.gethostname(),
                finished=time.time(),
            )
        return outcome
    finally:
        inbox.current = None
        inbox.cancelled.discard(task.id)
        inbox.rendezvous.pop(task.id, None)


def _forget_other_tasks(inbox: Inbox, task_id: int) -> None:
    """Drop ports and cancels of earlier tasks that arrived after this rank's part ended (a rank runs
    one multi-rank task at a time: only the current task's can still matter)."""
    for stale in [i for i in inbox.rendezvous if i != task_id]:
        del inbox.rendezvous[stale]
    inbox.cancelled.intersection_update((task_id,))


def join_team(item: TeamTask, transport: Transport, inbox: Inbox) -> Team | None:
    """Team rank 0 picks a free port on its host and sends it to the others, who wait for it
    (``None``: the task was cancelled or the worker is stopping meanwhile)."""
    me = item.ranks.index(transport.rank)
    task_id = item.task.id
    if me == 0:
        port = free_port()
        for rank in item.ranks[1:]:
            transport.send(Rendezvous(task_id, port), rank, Tag.RENDEZVOUS)
    else:
        backoff = transport.idle_backoff()
        while (sent := inbox.rendezvous.pop(task_id, None)) is None:
            if inbox():
                return None
            backoff.idle()
        port = sent
    return Team(task_id, item.ranks, item.hosts, me, port)


def _run_guarded(runner: Runner, task: Task, inbox: Inbox, rank: int, team: Team | None = None) -> Outcome | None:
    """Run one task; a fault in the runner itself becomes a failed result, not a dead worker."""
    inbox.reported = False
    try:
        return runner.run(task, inbox) if team is None else runner.run(task, inbox, team)
    except Exception:
        return Outcome(
            task.id,
            Status.FAILED,
            error="worker error:\n" + traceback.format_exc(),
            rank=rank,
            host=socket.gethostname(),
            finished=time.time(),
        )
