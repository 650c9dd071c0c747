"""The optimizer's view of the task-distribution layer."""

from __future__ import annotations

import time
from collections import abc
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emews.core.direction import Direction
from emews.core.errors import EmewsError
from emews.core.queues import QueuePair
from emews.core.results import Result, StoredReport, Task, TrialEnd, reports_before_ends
from emews.core.seeds import task_seed
from emews.core.space import Space, SpaceError
from emews.core.task_size import FixedSize, TaskSize, TaskSizeError, whole_ranks


class BudgetExhausted(EmewsError, RuntimeError):
    """More evaluations were asked for than the budget has left.

    Raised out of ``Optimizer.run`` it ends the run normally.
    """


#: the evaluation budget of a run that only steps or time limit: more than any run submits
UNLIMITED = 2**62


def room_count(more_room: int | None) -> int | None:
    """``get``'s ``more_room``, checked: the capacity the optimizer proposed for, or ``None``."""
    if more_room is None or (isinstance(more_room, int) and not isinstance(more_room, bool)):
        return more_room
    raise TypeError(
        f"get(more_room=...) takes the capacity the optimizer proposed for (a whole number: "
        f"evaluator.capacity as read before it proposed), not {more_room!r}"
    )


@dataclass(frozen=True)
class Room:
    """What an optimizer that keeps evaluations outstanding does now (:meth:`Evaluator.room`):
    propose ``propose`` points (maybe none), then wait with ``get(1, more_room=capacity)``."""

    #: evaluations to keep outstanding now: the optimizer's own count, or with pools what they hold if more
    in_flight: int
    #: evaluations to propose now: ``in_flight`` less those pending, within the budget (at least 0)
    propose: int
    #: the capacity read first: ``get(..., more_room=capacity)`` returns once the workers can hold more
    capacity: int

    @classmethod
    def of(cls, capacity: int, in_flight: int, pending: int, remaining: int) -> Room:
        """The room of an evaluator with ``pending`` and ``remaining`` evaluations."""
        return cls(in_flight, max(min(in_flight - pending, remaining), 0), capacity)


def own_count(own: int | Callable[[], int]) -> int:
    """``room``'s ``own``: the count, or the function's (called after the capacity was read)."""
    return own() if callable(own) else own


class EvaluatorObserver:
    """Sees what passes through an evaluator, in order (tests, benchmarks, live views):
    subclass and override what you need; add it with ``evaluator.observers.append``."""

    def submitted(self, tasks: Sequence[Task]) -> None:
        """``tasks`` were queued (their ids, validated points and submit times)."""

    def received(self, results: Sequence[Result]) -> None:
        """``results`` are being handed to the optimizer (by ``get`` or ``map``)."""

    def cancelled(self, ids: Sequence[int]) -> None:
        """The tasks ``ids`` were cancelled (``cancel``): no result comes for them."""


class Evaluator:
    """Submit points and collect results; the budget is enforced here.

    ``put`` never blocks; ``get`` blocks until results arrive; ``map``
    evaluates a batch and returns its results in order (the seam that
    DEAP's ``toolbox.map`` plugs into).

    When the run continues an earlier one (``emews resume``):

    ``history``  the finished evaluations of the earlier runs (in id order), as
                 ``evaluator.history``; they count against the budget, and an
                 optimizer learns them before its first proposal.
    ``requeue``  the tasks that were running when the earlier run stopped: they are
                 submitted again at once with their ids (``evaluator.requeued``),
                 count as submitted and pending, and their results arrive through
                 ``get`` like any other.
    ``waiting``  tasks of earlier runs whose trials wait for a promotion (ASHA): as ``requeue``
                 (in ``evaluator.requeued``, pending) but not submitted: the distributor holds them.
    ``first_id`` the next task id; ids never collide with earlier ones.
    ``exp_dir``  where optimizers may write artifacts (``None``: write nothing).
    ``reports``  reads the training reports stored so far (see :meth:`reports`).
    ``scheduler_end`` reads the report a trial's scheduler ended it at (see :meth:`ended_by_scheduler`).
    ``stopped_early`` reads whether a trial's scheduler ended it early (see :meth:`stopped_by_scheduler`).
    ``task_size`` how many worker ranks each point's task runs on (``task.ranks``; default 1).
    ``metric``   the name of the objective's metric: what the reports' metrics hold it under
                 (``None`` when not known).
    """

    def __init__(
        self,
        queues: QueuePair,
        space: Space,
        *,
        workers: int,
        budget: int | None,
        direction: str | Direction = Direction.MINIMIZE,
        seed: int = 0,
        first_id: int = 0,
        history: Sequence[Result] = (),
        requeue: Sequence[Task] = (),
        waiting: Sequence[Task] = (),
        exp_dir: Path | None = None,
        observers: Sequence[EvaluatorObserver] = (),
        reports: Callable[[int | None], list[StoredReport]] | None = None,
        scheduler_end: Callable[[int], TrialEnd | None] | None = None,
        stopped_early: Callable[[int], bool] | None = None,
        task_size: TaskSize | None = None,
        metric: str | None = None,
    ) -> None:
        self.space = space
        self.metric = metric
        self.task_size = task_size or FixedSize(1)
        self._gang = self.task_size.gang
        self.observers: list[EvaluatorObserver] = list(observers)
        self.workers = workers
        #: the evaluations the run may make (:data:`UNLIMITED` when only steps or time limit it)
        self.budget = UNLIMITED if budget is None else budget
        self.direction = Direction.of(direction)
        self.seed = seed
        self.exp_dir = None if exp_dir is None else Path(exp_dir)
        self.history: tuple[Result, ...] = tuple(history)
        self.requeued: tuple[Task, ...] = (*requeue, *waiting)
        self._queues = queues
        self._read_reports = reports
        self._scheduler_end = scheduler_end
        self._stopped_early = stopped_early
        earlier = [r.id for r in self.history] + [t.id for t in self.requeued]
        self._next_id = max([first_id, *(i + 1 for i in earlier)])
        #: points earlier runs put (one id each, in order, also those lost at a kill -9): an
        #: optimizer that draws its points from a seeded sequence skips this many draws on resume
        self.earlier_points = self._next_id
        self._submitted = len(self.requeued)
        self._handed_out = 0
        self._ready: dict[int, Result] = {}
        for task in self.requeued:  # sized again by task.ranks, which may keep the size the store has
            self._size(task, stored=task.ranks)
        if requeue:
            queues.submit(requeue)

    @property
    def remaining(self) -> int:
        """Evaluations the budget still allows to be submitted (earlier runs' included)."""
        return max(self.budget - len(self.history) - self._submitted, 0)

    @property
    def pending(self) -> int:
        """Submitted evaluations whose results the optimizer has not yet received."""
        return self._submitted - self._handed_out

    @property
    def capacity(self) -> int:
        """Tasks the workers can hold right now: ``workers`` for long tasks, more when
        tasks are short and each worker gets its next ones ahead (prefetch), and with pools what
        the live pools hold. A plain read; ``get(..., more_room=capacity)`` returns early once it
        grows past what was read (:meth:`room` reads it for an optimizer that keeps tasks outstanding)."""
        return max(self._queues.capacity, self.workers)

    def room(self, own: int | Callable[[], int]) -> Room:
        """What an optimizer whose own rule says ``own`` evaluations outstanding (one per worker, a
        lookahead, a reserve; or a function giving it, called after the capacity is read, when it
        depends on the capacity) does now: the capacity, read first; how many to keep outstanding
        (``own``, or when pools run the tasks, workers that join while it runs, the capacity if
        that is more); how many to propose. Call it before each proposal and wait with
        ``get(..., more_room=room.capacity)``: a pool that joins then gets work before the next result."""
        capacity = self.capacity
        keep = self._queues.keep_in_flight(own_count(own), capacity)
        return Room.of(capacity, keep, self.pending, self.remaining)

    @property
    def submitted(self) -> int:
        """Evaluations submitted in this run (requeued ones included)."""
        return self._submitted

    def reports(self, trial: int | None = None) -> list[StoredReport]:
        """The training reports stored so far (of one trial, a task id, or of all), in arrival order;
        each is on disk before the trial scheduler saw it. Empty when the run keeps no store."""
        return [] if self._read_reports is None else self._read_reports(trial)

    def scheduled_reports(self, trial: int) -> list[StoredReport]:
        """``trial``'s reports its trial scheduler took in, in arrival order: :meth:`reports` up to the
        one it was first answered stop or complete at (an objective that trained on, deaf to the
        answer, reported to no scheduler after it)."""
        end = None if self._scheduler_end is None else self._scheduler_end(trial)
        reports = self.reports(trial)
        return reports if end is None else reports_before_ends(reports, {trial: end})

    def ended_by_scheduler(self, trial: int) -> bool:
        """Whether ``trial``'s trial scheduler ended it (answered a report with stop or complete);
        ``False`` when the run keeps no store."""
        return self._scheduler_end is not None and self._scheduler_end(trial) is not None

    def stopped_by_scheduler(self, trial: int) -> bool:
        """Whether ``trial``'s trial scheduler stopped it early (answered a report with stop before
        any complete, or paused it for a promotion that never came: Optuna's pruned trial, ``stopped
        early`` in results.csv); ``False`` when the run keeps no store."""
        return self._stopped_early is not None and self._stopped_early(trial)

    def put(
        self, points: Iterable[Mapping[str, Any]], *, ranks: int | Sequence[int] | None = None, priority: float = 0.0
    ) -> list[int]:
        """Queue ``points`` for evaluation; return their task ids (results carry them as ``.id``).

        ``ranks``: the worker ranks each task runs on (one number for all, or one per point),
        instead of the workflow's ``task.ranks`` (which must then be other than 1, e.g. ``optimizer``).
        ``priority``: tasks of a higher priority start first, in the order put within a priority
        (in this job's queue, and with pools, ``emews launch --pools``, in the shared queue: a pool
        always claims the highest priority queued). Multi-rank tasks are placed by size, not priority.
        """
        if not isinstance(priority, (int, float)) or priority != priority or priority in (float("inf"), -float("inf")):
            raise ValueError(f"priority must be a finite number, not {priority!r}")
        points = list(points)
        sizes = self._given_sizes(ranks, len(points))
        if len(points) > self.remaining:
            raise BudgetExhausted(
                f"{len(points)} evaluations asked for, {self.remaining} left of a budget of {self.budget}"
            )
        tasks: list[Task] = []
        now = time.time()
        for point in points:
            if type(point) is not dict and not isinstance(point, abc.Mapping):
                raise ValueError(f"optimizer proposed {point!r}, not a point (a dict keyed by parameter name)")
            try:
                params = self.space.validate(point)
            except SpaceError as exc:
                raise ValueError(f"optimizer proposed an invalid point {dict(point)!r}: {exc}") from None
            task = Task(self._next_id, params, self._task_seed(self._next_id), now, priority=float(priority))
            if sizes is not None:
                task.ranks = sizes[len(tasks)]
            elif self._gang:
                self._size(task)
            tasks.append(task)
            self._next_id += 1
        self._submitted += len(tasks)
        if tasks:
            self._queues.submit(tasks)
            for observer in self.observers:
                observer.submitted(tasks)
        return [t.id for t in tasks]

    def _size(self, task: Task, stored: int | None = None) -> None:
        """Size ``task`` by the workflow's ``task.ranks``; a size function that fails or gives no
        whole number fails that task alone (``task.refused``: the distributor's result says why)."""
        try:
            task.ranks = (
                self.task_size(task.params) if stored is None else self.task_size.on_resume(task.params, stored)
            )
        except TaskSizeError as exc:
            task.refused = f"cannot size the task: {exc}"

    def _given_sizes(self, ranks: int | Sequence[int] | None, count: int) -> list[int] | None:
        """The optimizer's sizes for ``count`` points (``None``: the workflow's ``task.ranks``)."""
        if ranks is None:
            return None
        if not self.task_size.gang:
            raise ValueError(
                "the optimizer gave task sizes (put(..., ranks=...)) but the workflow runs "
                "single-rank tasks: set task.ranks (e.g. task.ranks: optimizer)"
            )
        given = [ranks] * count if isinstance(ranks, int) or not isinstance(ranks, abc.Sequence) else list(ranks)
        if len(given) != count:
            raise ValueError(f"put got {count} points but {len(given)} task sizes")
        try:
            return [whole_ranks(r, "the optimizer") for r in given]
        except TaskSizeError as exc:
            raise ValueError(str(exc)) from None

    def cancel(self, ids: Iterable[int]) -> list[int]:
        """Cancel the tasks among ``ids`` that have not started (in this job's queue, or with pools
        in the shared queue, unclaimed); return their ids. No result comes for them, and they
        count neither as pending nor against the budget. The others run to their end: their
        results come as usual."""
        cancelled = self._queues.cancel(ids)
        self._submitted -= len(cancelled)
        if cancelled:
            for observer in self.observers:
                observer.cancelled(cancelled)
        return cancelled

    def get(self, n: int = 1, timeout: float | None = None, *, more_room: int | None = None) -> list[Result]:
        """Wait until ``n`` results are ready (or ``timeout``), then return all ready ones.

        Returns at least ``min(n, pending)`` results unless the timeout passes first;
        returns ``[]`` at once when nothing is pending. ``more_room``: the :attr:`capacity` the
        optimizer proposed for (:attr:`Room.capacity`); also return (with what is ready, maybe nothing) as soon as the
        workers can hold more than that (a pool joined the experiment), so that an optimizer that
        keeps its in-flight count by the capacity proposes for them then, not after its next result.
        """
        room = room_count(more_room)
        n = min(n, self.pending)
        if n <= 0:
            return []
        self._wait(lambda: len(self._ready) >= n, timeout, room)
        results = list(self._ready.values())
        self._ready.clear()
        self._handed_out += len(results)
        return self._hand_out(results)

    def map(self, points: Sequence[Mapping[str, Any]]) -> list[Result]:
        """Evaluate ``points`` and return their results in the same order."""
        ids = self.put(points)
        self._wait(lambda: all(i in self._ready for i in ids), None)
        self._handed_out += len(ids)
        return self._hand_out([self._ready.pop(i) for i in ids])

    def _hand_out(self, results: list[Result]) -> list[Result]:
        for observer in self.observers:
            observer.received(results)
        return results

    def _wait(self, done: Any, timeout: float | None, room: int | None = None) -> None:
        """Collect results until ``done()``, the ``timeout``, or the capacity is above ``room``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            for result in self._queues.collect(left, room_above=room):
                self._ready[result.id] = result
            if room is not None and self._queues.capacity > room:
                return

    def _task_seed(self, task_id: int) -> int:
        return task_seed(self.seed, task_id)
