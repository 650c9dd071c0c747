"""Multi-rank tasks on the distributor: gang scheduling, the members' share, the team's one result.

:class:`TeamDispatch` is the distributor's :class:`~emews.runtime.dispatch.Dispatch` when tasks may be
larger than one rank (``task.ranks``; :class:`~emews.runtime.slots.SlotDispatch` otherwise): queued tasks go to the
:class:`~emews.runtime.gang.GangScheduler` (node-aligned placement, one reservation, EASY backfill);
each placement is sent to its members (a :class:`TeamTask`, or the plain task for a size-1 task);
every member reports an outcome; the first member that fails gets the others cancelled
(``Tag.CANCEL``: their children are killed); once all have reported, the ranks are released
together and the task's one outcome is team rank 0's, or the failing member's.

Inline members cannot be cancelled, and one blocked in an MPI call of ``ctx.comm`` (waiting for a
member that raised, returned or hangs) cannot be interrupted at all: MPICH offers no
``MPI_Comm_revoke`` (ULFM) to wake it. With ``inline_timeout`` a team still running
:data:`STRANDED_GRACE` seconds (``EMEWS_STRANDED_GRACE``: :func:`stranded_grace`) after that timeout
is *stranded* (:meth:`TeamDispatch.stranded`): its task is recorded as timed out and the
distributor ends the job (:class:`TeamStranded`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from emews.core.results import Outcome, Status, Task
from emews.core.wording import counted
from emews.runtime.dispatch import (
    Dispatch,
    Ended,
    Event,
    Fatal,
    Refused,
    Requeue,
    Send,
    Started,
    Stranded,
    Unfinished,
    moving_mean,
    outcome_seconds,
)
from emews.runtime.env_seconds import seconds_from_environment
from emews.runtime.gang import GangScheduler
from emews.runtime.transport import Tag

#: seconds after the task timeout that an inline team's members may take to end before it is stranded
STRANDED_GRACE = 30.0
#: the environment variable that sets another grace for a job (the tests use a few seconds)
STRANDED_GRACE_VARIABLE = "EMEWS_STRANDED_GRACE"


def stranded_grace(environ: Mapping[str, str] = os.environ) -> float:
    """This job's grace: ``EMEWS_STRANDED_GRACE`` seconds where it is set (a number >= 0), else
    :data:`STRANDED_GRACE`; anything else is a :class:`ConfigError` naming the variable."""
    return seconds_from_environment(STRANDED_GRACE_VARIABLE, STRANDED_GRACE, environ)


#: seconds between two questions to the gang scheduler while nothing changed (each reads the
#: running tasks when a wide task waits: at 10,000 workers, every pass would)
SCHEDULE_RECHECK = 0.005


class TeamStranded(Stranded):
    """An inline team did not end after its timeout (a member is blocked where nothing can
    interrupt it): the job must end. The message is one line naming the task and the member."""


@dataclass(frozen=True)
class TeamTask:
    """Distributor -> each member of a multi-rank task: the task and who runs it."""

    task: Task
    ranks: tuple[int, ...]  # world ranks, team rank 0 (the leader) first
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class Rendezvous:
    """Leader -> the other members: the torch.distributed port on the leader's host."""

    task_id: int
    port: int


#: how a failing member's status ranks as the team's cause (a crash explains its peers' errors)
_SEVERITY = {Status.CRASHED: 0, Status.TIMEOUT: 1, Status.FAILED: 2, Status.OK: 3}


@dataclass(slots=True)
class _Running:
    """A task that runs on its team: about 240 bytes (500 with a ``__dict__`` and an empty set each;
    at 100,000 workers tens of thousands run at once)."""

    task: Task
    ranks: tuple[int, ...]
    hosts: tuple[str, ...]
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    cancelled: frozenset[int] = frozenset()  # members told to stop (made anew when some are: rarely)
    requeue: bool = False  # a member's worker stopped: run it again
    started: float = 0.0  # the dispatcher's clock at dispatch

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
            rank, chosen = min(
                failing, key=lambda f: (_SEVERITY[f[1].status], f[0] in self.cancelled, self.ranks.index(f[0]))
            )
            error = f"{self.member(rank)} {chosen.status.value}: {chosen.error or ''}".rstrip(": ")
        return Outcome(
            self.task.id,
            chosen.status,
            leader.value if chosen is leader else None,
            leader.metrics if chosen is leader else chosen.metrics,
            error,
            chosen.rank,
            chosen.host,
            min(started, default=None),
            max(finished, default=None),
            team=self.ranks,
        )


class TeamDispatch(Dispatch):
    """Gang-scheduled tasks of any size; see the module docstring. Not thread-safe (distributor only)."""

    def __init__(
        self,
        nodes: Mapping[int, str],
        *,
        clock: Callable[[], float] = time.monotonic,
        inline_timeout: float | None = None,
    ) -> None:
        self._hosts = dict(nodes)
        self._inline_timeout = inline_timeout  # members run inline with this task timeout
        self._grace = stranded_grace() if inline_timeout is not None else STRANDED_GRACE
        self._scheduler = GangScheduler(self._hosts)
        self._clock = clock
        self._waiting: dict[int, Task] = {}
        self._running: dict[int, _Running] = {}
        self._by_rank: dict[int, int] = {}  # member rank -> task id it runs
        self._live = set(self._hosts)
        self._changed = True  # submitted, released or retired since the scheduler was last asked
        self._recheck_at = 0.0
        self._mean_run: float | None = None

    @property
    def capacity(self) -> int:
        return len(self._hosts)

    @property
    def has_room(self) -> bool:
        return len(self._by_rank) < len(self._hosts)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def mean_run(self) -> float | None:
        """Moving average of the tasks' run time in seconds, first member's start to last
        member's end (``None`` before the first task ended): the distributor paces its idle loop
        and group commits by it, as for single-rank tasks."""
        return self._mean_run

    def busy(self, in_flight: int = 0) -> int:
        """Worker ranks running a task now (whatever ``in_flight``)."""
        return len(self._by_rank)

    def place(self, tasks: deque[Task], *, start: bool) -> list[Event]:
        """First the stranded teams (:meth:`stranded`: their tasks end, then :class:`Fatal`); then
        queued tasks go to the scheduler (a size the job cannot run is refused at once) and, when
        ``start``, what may start now goes to its ranks (a :class:`TeamTask` each member, or the
        plain task for a size-1 task)."""
        events = self.stranded()
        if events and isinstance(events[-1], Fatal):
            return events
        events += self._take(tasks)
        if start:
            events += self._start()
        return events

    def ended(self, rank: int, outcomes: Sequence[Outcome]) -> list[Event]:
        events: list[Event] = []
        for outcome in outcomes:
            events += self._member_done(rank, outcome)
        return events

    def stopped(self, rank: int, unfinished: Sequence[int], *, closing: bool) -> list[Event]:
        """Worker ``rank`` stopped: while the run is closing, what it held is only recorded. Before,
        it stopped on its own: it takes no more tasks, its team's task runs again (its peers are
        cancelled) and queued tasks now too large for the ranks left fail."""
        if closing:
            return [Unfinished(unfinished)]
        self._live.discard(rank)
        self._scheduler.retire(rank)
        self._changed = True
        events: list[Event] = []
        task_id = self._by_rank.get(rank)
        if task_id is not None:
            self._running[task_id].requeue = True
            events += self._member_done(rank, Outcome(task_id, Status.FAILED, error=f"worker rank {rank} stopped"))
        for key in self._scheduler.withdraw_larger(len(self._live)):
            task = self._waiting.pop(key)  # type: ignore[call-overload]
            events.append(
                Refused(
                    task,
                    Outcome(
                        task.id,
                        Status.FAILED,
                        error=(
                            f"task size {task.ranks} ranks: only {counted(len(self._live), 'worker rank')} "
                            f"{'is' if len(self._live) == 1 else 'are'} left"
                        ),
                        finished=time.time(),
                    ),
                )
            )
        return events

    def stranded(self) -> list[Event]:
        """Inline teams still running the grace (:func:`stranded_grace`) after their timeout: each
        member that has not reported times out (it is blocked where nothing can interrupt it), so
        their tasks end; after those events, :class:`Fatal` with the error that ends the job."""
        timeout = self._inline_timeout
        if timeout is None:
            return []
        due = self._clock() - timeout - self._grace
        events: list[Event] = []
        first = None
        overdue = []
        for team in self._running.values():  # in start order: stop at the first one not yet due
            if team.started > due:
                break
            if len(team.ranks) > 1:
                overdue.append(team)
        for team in overdue:
            stuck = [r for r in team.ranks if r not in team.outcomes]
            first = first or _stranded_error(team, stuck, timeout, self._grace)
            team.cancelled = team.cancelled.union(stuck)
            error = _stuck_error(team, timeout, self._grace)
            for rank in stuck:
                events += self._member_done(
                    rank,
                    Outcome(
                        team.task.id,
                        Status.TIMEOUT,
                        error=error,
                        rank=rank,
                        host=self._hosts[rank],
                        finished=time.time(),
                    ),
                )
        if first is not None:
            events.append(Fatal(first))
        return events

    def _take(self, tasks: deque[Task]) -> list[Event]:
        """Move queued tasks to the scheduler; a size the job cannot run fails at once."""
        refused: list[Event] = []
        while tasks:
            task = tasks.popleft()
            if task.refused or type(task.ranks) is not int or not 1 <= task.ranks <= len(self._live):
                refused.append(
                    Refused(
                        task,
                        Outcome(
                            task.id,
                            Status.FAILED,
                            error=task.refused
                            or (
                                f"task size {task.ranks!r} ranks: this job has {counted(len(self._live), 'worker rank')} "
                                f"(task.ranks allows 1 to {len(self._live)})"
                            ),
                            finished=time.time(),
                        ),
                    )
                )
                continue
            self._waiting[task.id] = task
            self._scheduler.submit(task.id, task.ranks)
            self._changed = True
        return refused

    def _start(self) -> list[Event]:
        """Start what the scheduler lets start now: each task, then each member's share. With
        nothing submitted, released or retired since it was last asked, the scheduler is asked
        again only after :data:`SCHEDULE_RECHECK` (time alone changes its answer only through the
        head's patience and overrunning tasks, on the scale of run times)."""
        now = self._clock()
        if not self._changed and now < self._recheck_at:
            return []
        self._changed, self._recheck_at = False, now + SCHEDULE_RECHECK
        events: list[Event] = []
        for placement in self._scheduler.schedule(now):
            task = self._waiting.pop(placement.key)  # type: ignore[call-overload]
            ranks = placement.ranks
            hosts = tuple(self._hosts[r] for r in ranks)
            self._running[task.id] = _Running(task, ranks, hosts, started=self._clock())
            payload: object = [task] if len(ranks) == 1 else [TeamTask(task, ranks, hosts)]
            events.append(Started([task]))
            for rank in ranks:
                self._by_rank[rank] = task.id
                events.append(Send(rank, Tag.TASK, payload))
        return events

    def _member_done(self, rank: int, outcome: Outcome) -> list[Event]:
        """A member's outcome: the members to cancel (its team's first failure), then the task's
        outcome once every member reported (or :class:`Requeue`: a member's worker stopped).
        Nothing for an outcome this dispatcher does not wait for (late, repeated)."""
        team = self._running.get(outcome.task_id)
        if team is None or rank not in team.ranks or rank in team.outcomes:
            return []
        team.outcomes[rank] = outcome
        self._by_rank.pop(rank, None)
        events: list[Event] = []
        if outcome.status is not Status.OK and not team.cancelled:
            cancel = tuple(r for r in team.ranks if r not in team.outcomes)
            team.cancelled = team.cancelled.union(cancel)
            events += [Send(r, Tag.CANCEL, outcome.task_id) for r in cancel]
        if len(team.outcomes) < len(team.ranks):
            return events
        del self._running[outcome.task_id]
        self._scheduler.release(outcome.task_id, self._clock())
        self._changed = True
        if team.requeue:
            events.append(Requeue(outcome.task_id))
            return events
        done = team.outcome()
        if (seconds := outcome_seconds(done)) is not None:
            self._mean_run = moving_mean(self._mean_run, seconds)
        events.append(Ended([done]))
        return events


def _stranded_error(team: _Running, stuck: list[int], timeout: float, grace: float) -> TeamStranded:
    """The one line that ends the job, naming the task and its first stuck member."""
    more = f" (and {len(stuck) - 1} more)" if len(stuck) > 1 else ""
    return TeamStranded(
        f"task {team.task.id}: {team.member(stuck[0])}{more} did not end {grace:g} s after "
        f"the task timeout of {timeout:g} s; an inline member blocked in MPI cannot be interrupted, so "
        f"the job ends (the task is recorded as timed out; isolation: process keeps the job going)"
    )


def _stuck_error(team: _Running, timeout: float, grace: float) -> str:
    """The error of a stuck member's timed-out outcome, with what the members that ended said."""
    others = "".join(f"; {_reported(team.ranks.index(r), o)}" for r, o in team.outcomes.items())
    return (
        f"did not end {grace:g} s after the task timeout of {timeout:g} s, blocked where "
        f"an inline member cannot be interrupted (an MPI call of ctx.comm?){others}"
    )


def _reported(member: int, outcome: Outcome) -> str:
    """What a member that ended said: ``team rank 1 returned``, or its status and last error line."""
    if outcome.status is Status.OK:
        return f"team rank {member} returned"
    lines = [ln.strip() for ln in (outcome.error or "").splitlines() if ln.strip()]
    return f"team rank {member} {outcome.status.value}" + (f": {lines[-1]}" if lines else "")
