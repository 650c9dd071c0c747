"""Multi-rank tasks on the distributor: gang scheduling, the members' share, the team's one result.

:class:`TeamDispatch` is what the distributor uses instead of :class:`~emews.runtime.slots.WorkerSlots`
when tasks may be larger than one rank (``task.ranks``): queued tasks go to the
:class:`~emews.runtime.gang.GangScheduler` (node-aligned placement, one reservation, EASY backfill);
each placement is sent to its members (a :class:`TeamTask`, or the plain task for a size-1 task);
every member reports an outcome; the first member that fails gets the others cancelled
(``Tag.CANCEL``: their children are killed); once all have reported, the ranks are released
together and the task's one outcome is team rank 0's, or the failing member's.

Inline members cannot be cancelled, and one blocked in an MPI call of ``ctx.comm`` (waiting for a
member that raised, returned or hangs) cannot be interrupted at all: MPICH offers no
``MPI_Comm_revoke`` (ULFM) to wake it. With ``inline_timeout`` a team still running
:data:`STRANDED_GRACE` seconds after that timeout is *stranded* (:meth:`TeamDispatch.stranded`):
its task is recorded as timed out and the distributor ends the job (:class:`TeamStranded`).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping

from emews.core.errors import EmewsError
from emews.core.results import Outcome, Status, Task
from emews.runtime.gang import GangScheduler

#: seconds after the task timeout that an inline team's members may take to end before it is stranded
STRANDED_GRACE = 30.0


class TeamStranded(EmewsError):
    """An inline team did not end after its timeout (a member is blocked where nothing can
    interrupt it): the job must end. The message is one line naming the task and the member."""


@dataclass(frozen=True)
class TeamTask:
    """Distributor -> each member of a multi-rank task: the task and who runs it."""

    task: Task
    ranks: tuple[int, ...]   # world ranks, team rank 0 (the leader) first
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class Rendezvous:
    """Leader -> the other members: the torch.distributed port on the leader's host."""

    task_id: int
    port: int


@dataclass(frozen=True)
class TeamEvent:
    """What a member's outcome means for its task: members to cancel, and the task's outcome once
    every member reported (``requeue``: run it again instead, a member's worker stopped)."""

    task_id: int
    cancel: tuple[int, ...] = ()
    outcome: Outcome | None = None
    requeue: bool = False


#: how a failing member's status ranks as the team's cause (a crash explains its peers' errors)
_SEVERITY = {Status.CRASHED: 0, Status.TIMEOUT: 1, Status.FAILED: 2, Status.OK: 3}


@dataclass
class _Running:
    task: Task
    ranks: tuple[int, ...]
    hosts: tuple[str, ...]
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    cancelled: set[int] = field(default_factory=set)   # members told to stop
    requeue: bool = False                               # a member's worker stopped: run it again
    started: float = 0.0                                # the dispatcher's clock at dispatch

    def member(self, rank: int) -> str:
        """``team rank 1 of 4 (rank 3 on node7)``."""
        index = self.ranks.index(rank)
        return f"team rank {index} of {len(self.ranks)} (rank {rank} on {self.hosts[index]})"

    def outcome(self) -> Outcome:
        """The task's outcome once every member reported: the leader's, or the cause of failure."""
        leader = self.outcomes[self.ranks[0]]
        if len(self.ranks) == 1:
            return leader
        started = [o.started for o in self.outcomes.values() if o.started is not None]
        finished = [o.finished for o in self.outcomes.values() if o.finished is not None]
        failing = [(r, o) for r, o in self.outcomes.items() if o.status is not Status.OK]
        if not failing:
            chosen, error = leader, leader.error
        else:  # the worst status; among equals, a member that was not cancelled
            rank, chosen = min(failing, key=lambda f: (_SEVERITY[f[1].status], f[0] in self.cancelled,
                                                       self.ranks.index(f[0])))
            error = f"{self.member(rank)} {chosen.status.value}: {chosen.error or ''}".rstrip(": ")
        return Outcome(self.task.id, chosen.status, leader.value if chosen is leader else None,
                       leader.metrics if chosen is leader else chosen.metrics, error,
                       chosen.rank, chosen.host, min(started, default=None), max(finished, default=None))


class TeamDispatch:
    """Gang-scheduled tasks of any size; see the module docstring. Not thread-safe (distributor only)."""

    def __init__(self, nodes: Mapping[int, str], *, clock: Callable[[], float] = time.monotonic,
                 inline_timeout: float | None = None) -> None:
        self._hosts = dict(nodes)
        self._inline_timeout = inline_timeout  # members run inline with this task timeout
        self._scheduler = GangScheduler(self._hosts)
        self._clock = clock
        self._waiting: dict[int, Task] = {}
        self._running: dict[int, _Running] = {}
        self._by_rank: dict[int, int] = {}   # member rank -> task id it runs
        self._live = set(self._hosts)

    @property
    def busy(self) -> int:
        """Worker ranks running a task now."""
        return len(self._by_rank)

    @property
    def waiting(self) -> int:
        """Tasks taken from the queue that have not started."""
        return len(self._waiting)

    def take(self, tasks: deque[Task]) -> list[Outcome]:
        """Move queued tasks to the scheduler; a size the job cannot run fails at once (returned)."""
        refused = []
        while tasks:
            task = tasks.popleft()
            if task.refused or type(task.ranks) is not int or not 1 <= task.ranks <= len(self._live):
                refused.append(Outcome(task.id, Status.FAILED, error=task.refused or (
                    f"task size {task.ranks!r} ranks: this job has {len(self._live)} worker ranks "
                    f"(task.ranks allows 1 to {len(self._live)})"), finished=time.time()))
                self._waiting[task.id] = task
                continue
            self._waiting[task.id] = task
            self._scheduler.submit(task.id, task.ranks)
        return refused

    def task(self, task_id: int) -> Task:
        """A task given to :meth:`take` that has not started (or was refused)."""
        return self._waiting.pop(task_id)

    def dispatch(self, send: Callable[[object, int], None]) -> list[Task]:
        """Start what the scheduler lets start now; ``send(payload, rank)`` each member's share."""
        started = []
        for placement in self._scheduler.schedule(self._clock()):
            task = self._waiting.pop(placement.key)  # type: ignore[call-overload]
            ranks = placement.ranks
            hosts = tuple(self._hosts[r] for r in ranks)
            self._running[task.id] = _Running(task, ranks, hosts, started=self._clock())
            payload: object = [task] if len(ranks) == 1 else [TeamTask(task, ranks, hosts)]
            for rank in ranks:
                self._by_rank[rank] = task.id
                send(payload, rank)
            started.append(task)
        return started

    def member_done(self, rank: int, outcome: Outcome) -> TeamEvent | None:
        """A member's outcome (``None``: not one this dispatcher waits for)."""
        team = self._running.get(outcome.task_id)
        if team is None or rank not in team.ranks or rank in team.outcomes:
            return None
        team.outcomes[rank] = outcome
        self._by_rank.pop(rank, None)
        cancel: tuple[int, ...] = ()
        if outcome.status is not Status.OK and not team.cancelled:
            cancel = tuple(r for r in team.ranks if r not in team.outcomes)
            team.cancelled.update(cancel)
        if len(team.outcomes) < len(team.ranks):
            return TeamEvent(outcome.task_id, cancel)
        del self._running[outcome.task_id]
        self._scheduler.release(outcome.task_id, self._clock())
        return TeamEvent(outcome.task_id, cancel, team.outcome(), team.requeue)

    def stranded(self) -> tuple[list[TeamEvent], TeamStranded | None]:
        """Inline teams still running :data:`STRANDED_GRACE` seconds after their timeout: each
        member that has not reported times out (it is blocked where nothing can interrupt it), so
        their tasks end; returns those events and the error that must end the job (``None``: none)."""
        timeout = self._inline_timeout
        if timeout is None:
            return [], None
        due = self._clock() - timeout - STRANDED_GRACE
        events, first = [], None
        for team in [t for t in self._running.values() if len(t.ranks) > 1 and t.started <= due]:
            stuck = [r for r in team.ranks if r not in team.outcomes]
            others = "".join(f"; {_reported(team.ranks.index(r), o)}" for r, o in team.outcomes.items())
            error = (f"did not end {STRANDED_GRACE:g} s after the task timeout of {timeout:g} s, blocked where "
                     f"an inline member cannot be interrupted (an MPI call of ctx.comm?){others}")
            if first is None:
                more = f" (and {len(stuck) - 1} more)" if len(stuck) > 1 else ""
                first = TeamStranded(
                    f"task {team.task.id}: {team.member(stuck[0])}{more} did not end {STRANDED_GRACE:g} s after "
                    f"the task timeout of {timeout:g} s; an inline member blocked in MPI cannot be interrupted, so "
                    f"the job ends (the task is recorded as timed out; isolation: process keeps the job going)")
            team.cancelled.update(stuck)
            for rank in stuck:
                event = self.member_done(rank, Outcome(team.task.id, Status.TIMEOUT, error=error, rank=rank,
                                                       host=self._hosts[rank], finished=time.time()))
                if event is not None and event.outcome is not None:
                    events.append(event)
        return events, first

    def stopped(self, rank: int) -> tuple[list[TeamEvent | None], list[Outcome]]:
        """Worker ``rank`` stopped on its own: it takes no more tasks; its team task is run again
        (its peers cancelled). Returns what :meth:`member_done` returned for it, and the queued tasks
        now too large for the ranks left (failed)."""
        self._live.discard(rank)
        self._scheduler.retire(rank)
        events = []
        task_id = self._by_rank.get(rank)
        if task_id is not None:
            self._running[task_id].requeue = True
            events.append(self.member_done(rank, Outcome(task_id, Status.FAILED, error=f"worker rank {rank} stopped")))
        too_large = [Outcome(key, Status.FAILED, error=(  # type: ignore[arg-type]
            f"task size {self._waiting[key].ranks} ranks: only {len(self._live)} worker ranks are left"),
            finished=time.time()) for key in self._scheduler.withdraw_larger(len(self._live))]
        return events, too_large


def _reported(member: int, outcome: Outcome) -> str:
    """What a member that ended said: ``team rank 1 returned``, or its status and last error line."""
    if outcome.status is Status.OK:
        return f"team rank {member} returned"
    lines = [ln.strip() for ln in (outcome.error or "").splitlines() if ln.strip()]
    return f"team rank {member} {outcome.status.value}" + (f": {lines[-1]}" if lines else "")
