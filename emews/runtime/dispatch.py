"""Where the distributor's tasks run: one interface, two placements, and the events they return.

:class:`Dispatch` places queued tasks on worker ranks and follows what they report. Its two
implementations are :class:`~emews.runtime.slots.SlotDispatch` (single-rank tasks: free slots per
worker, prefetch while tasks are short) and :class:`~emews.runtime.teams.TeamDispatch` (tasks of
any size, ``task.ranks``: gang-scheduled, node-aligned, EASY backfill). A placement never calls
back into the distributor and never sends a message: each method returns the *events* that
follow from it, in order, and the distributor acts on them (sends, records, queues again).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from emews.core.errors import EmewsError
from emews.core.results import Outcome, Task
from emews.runtime.transport import Tag


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``payload`` to worker ``rank`` under ``tag`` (a task batch, a cancel)."""

    rank: int
    tag: Tag
    payload: Any


@dataclass(frozen=True, slots=True)
class Started:
    """These tasks were handed to workers: they are in flight from now on."""

    tasks: Sequence[Task]


@dataclass(frozen=True, slots=True)
class Ended:
    """These in-flight tasks ended with these outcomes (a result each, unless set aside)."""

    outcomes: Sequence[Outcome]


@dataclass(frozen=True, slots=True)
class Refused:
    """A task taken from the queue that cannot run (a size the job cannot hold): its outcome."""

    task: Task
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class Requeue:
    """An in-flight task runs again (a member's worker stopped): recorded, then queued first."""

    task_id: int


@dataclass(frozen=True, slots=True)
class Unfinished:
    """A worker stopped holding these tasks: recorded (``emews resume`` runs them) and, unless
    the run is closing, queued again for the other workers."""

    task_ids: Sequence[int]


@dataclass(frozen=True, slots=True)
class Returned:
    """A busy worker gave back these tasks, which it held and had not started (a recall): recorded
    (``emews resume`` runs them) and queued again, first, for the idle workers."""

    task_ids: Sequence[int]


class Stranded(EmewsError):
    """A worker keeps a task past its timeout and nothing can interrupt it (an inline team blocked in
    MPI, a worker rank that is stopped or hung): the job must end (:class:`Fatal`); ``emews resume``
    goes on. The message is one line naming the task or the worker."""


@dataclass(frozen=True, slots=True)
class Lost:
    """Worker ``rank`` stopped answering (``why``: stopped, or blocked where nothing interrupts it): it
    gets no more tasks and the run goes on without it; the task it ``began`` runs again elsewhere,
    counting an attempt, and those it held ``unstarted`` run again as they were."""

    rank: int
    why: Stranded
    began: int | None = None
    unstarted: Sequence[int] = ()


@dataclass(frozen=True, slots=True)
class Fatal:
    """The job must end with ``error`` (a :class:`Stranded` worker or team)."""

    error: BaseException


Event = Send | Started | Ended | Refused | Requeue | Unfinished | Returned | Lost | Fatal


def moving_mean(mean: float | None, run_seconds: float) -> float:
    """The moving average of task run time after a task that ran ``run_seconds`` (a tenth of
    the weight on the newest; the first task's time while ``mean`` is ``None``)."""
    return run_seconds if mean is None else 0.9 * mean + 0.1 * run_seconds


def outcome_seconds(outcome: Outcome) -> float | None:
    """How long the task of ``outcome`` ran, by the worker's clock (``None``: not known)."""
    return None if outcome.started is None else (outcome.finished or 0.0) - outcome.started


class Dispatch(ABC):
    """How queued tasks are placed on worker ranks; not thread-safe (the distributor thread only)."""

    #: :meth:`place` has work on every pass, even with nothing queued (it holds tasks of its own
    #: or watches running ones); ``False`` lets the distributor skip it while the queue is empty
    watches_running: bool = True
    #: :meth:`rebalance` may take tasks back from a busy worker while another idles (it has work to
    #: do on a pass with nothing queued)
    rebalances: bool = False

    @property
    @abstractmethod
    def capacity(self) -> int:
        """Tasks the workers may hold together at present."""

    @property
    @abstractmethod
    def has_room(self) -> bool:
        """A worker could start a task now (if one were queued)."""

    def stalled(self, *, closing: bool = False) -> list[Event]:
        """Checked while the distributor idles: :class:`Lost` (or, for the last worker, :class:`Fatal`,
        unless ``closing``: the run waits for the workers' stops) for a worker that has held a task
        far past its timeout without a word or never said it was ready (nothing: none is, or this
        placement watches its own)."""
        return []

    def ready(self, rank: int) -> list[Event]:
        """Worker ``rank`` set up its objective runner and takes tasks from now on (``Tag.READY``)."""
        return []

    @property
    def waiting(self) -> int:
        """Tasks taken from the queue that have not started."""
        return 0

    @property
    def mean_run(self) -> float | None:
        """Moving average of task run time in seconds (``None``: not known)."""
        return None

    @abstractmethod
    def busy(self, in_flight: int) -> int:
        """Worker ranks running a task now, ``in_flight`` tasks being out."""

    @abstractmethod
    def place(self, tasks: deque[Task], *, start: bool) -> list[Event]:
        """Take tasks from the front of ``tasks`` and hand out what may run now (nothing new
        starts unless ``start``)."""

    @abstractmethod
    def ended(self, rank: int, outcomes: Sequence[Outcome]) -> list[Event]:
        """Worker ``rank`` reported these outcomes."""

    @abstractmethod
    def stopped(self, rank: int, unfinished: Sequence[int], *, closing: bool) -> list[Event]:
        """Worker ``rank`` stopped, holding the tasks ``unfinished``; ``closing``: the run ends."""

    def rebalance(self) -> list[Event]:
        """Nothing is queued: take back tasks a busy worker holds unstarted where another idles
        (a recall, answered by :meth:`returned`)."""
        return []

    def returned(self, rank: int, task_ids: Sequence[int]) -> list[Event]:
        """Worker ``rank`` answered a recall, giving back the tasks ``task_ids`` (never started)."""
        return [Returned(task_ids)] if task_ids else []
