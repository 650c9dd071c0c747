"""The optimizer contract: one abstract method, ``run(evaluator)``.

An optimizer runs on the optimizer rank's main thread and never sees MPI.
:class:`AskTellOptimizer` derives an asynchronous ``run`` from
``suggest(n)`` / ``ingest(results)`` (the gest-api names) that keeps every
worker busy.

Resuming: when a run continues an earlier one, ``evaluator.history`` holds the
earlier run's finished evaluations (they count against the budget) and
``evaluator.requeued`` the tasks that were running when it stopped (submitted
again; their results arrive through ``get``). An optimizer learns the history
before its first proposal; a resumed run whose budget is spent proposes nothing.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emews.core.evaluator import Evaluator
    from emews.core.results import Result
    from emews.core.space import Space


class Optimizer(abc.ABC):
    """Base class of every optimizer. Options come in as constructor keywords."""

    @abc.abstractmethod
    def run(self, evaluator: Evaluator) -> None:
        """Explore the space through ``evaluator`` until done or out of budget."""

    @classmethod
    def takes_open_points(cls, options: Mapping[str, Any]) -> bool:
        """Whether, with these options, points may leave out parameters and carry keys the space does
        not list (a sweep over a CANDLE points file); the workflow then opens its space. Default: no."""
        return False

    @classmethod
    def point_keys(cls, options: Mapping[str, Any]) -> frozenset[str] | None:
        """The keys every point has, with these options, when the space is open and they are known
        all the same (the ``eqpy`` optimizer's ``params``): ``emews check`` checks a command's
        ``{name}`` placeholders against them. Default: ``None`` (not known: not checked)."""
        return None

    @classmethod
    def planned_evaluations(cls, options: Mapping[str, Any], space: Space) -> int | None:
        """How many points the optimizer evaluates with these options, when they say (a sweep: its
        points); the workflow's evaluation budget when it gives none. Default: ``None`` (not known)."""
        return None

    @classmethod
    def describe_plan(cls, options: Mapping[str, Any], space: Space) -> str | None:
        """What the optimizer evaluates with these options, in words, when they say more than the
        space does (a sweep over a points file: its points and the keys they set); ``emews check``
        prints it in place of the space's parameter count. Default: ``None`` (the space says it)."""
        return None

    def written_points(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """The points the options hold as a user wrote them (a sweep's points file), each with
        where it is written (``FILE:LINE``), for checks of their values before launch (a CANDLE
        model's). Default: none (the optimizer makes its points)."""
        return iter(())

    def check(self, space: Space) -> None:  # noqa: B027 (an optional hook: checks nothing by default)
        """Check the options against ``space`` before launch; raise ``ValueError`` saying what is wrong.

        Called by ``emews check`` / ``emews launch`` before anything is written. Default: nothing.
        """


class AskTellOptimizer(Optimizer):
    """An optimizer written as ``suggest``/``ingest``, driven asynchronously.

    The loop keeps ``in_flight`` evaluations outstanding (default: one per
    worker; override :meth:`target_in_flight` to adapt), and with pools at least what the pools
    can hold (``evaluator.room``: a pool that joins gets work before the next result), hands
    every batch of results that has arrived to ``ingest`` and
    asks for just enough new points to refill. ``suggest`` may return fewer
    points than asked (an exhausted grid); returning none with nothing pending
    ends the run.

    Ids: after each ``put`` the loop calls :meth:`submitted` with the task ids of
    the points; the default records them in ``self.task_points`` (id -> point), and
    every result carries its task's ``.id``. Map results back to your own
    bookkeeping by id, never by the point's values.

    Resuming: after ``start`` and before the first ``suggest``, ``ingest`` receives
    ``evaluator.history``. ``ingest`` may therefore receive results of points it never
    suggested (those of earlier runs, and of tasks an earlier run left running:
    ``evaluator.requeued``); their ids are not in ``self.task_points``.
    """

    #: evaluations to keep outstanding; ``None`` means one per worker
    in_flight: int | None = None

    def target_in_flight(self, evaluator: Evaluator) -> int:
        """How many evaluations to keep outstanding now."""
        return self.in_flight or evaluator.workers

    def start(self, space: Space, workers: int) -> None:
        """Called once before the first ``suggest``; store what you need."""
        self.space = space

    @abc.abstractmethod
    def suggest(self, n: int) -> Sequence[dict[str, Any]]:
        """Return up to ``n`` new points to evaluate."""

    @abc.abstractmethod
    def ingest(self, results: Sequence[Result]) -> None:
        """Learn from finished evaluations (failed ones included, earlier runs' ones included)."""

    def submitted(self, ids: Sequence[int], points: Sequence[dict[str, Any]]) -> None:
        """The points of the last ``suggest`` went out as tasks ``ids`` (same order)."""
        self.__dict__.setdefault("task_points", {}).update(zip(ids, points, strict=False))

    #: the evaluations the whole run may make (earlier runs' included); set before :meth:`start`,
    #: for libraries that plan with it (Nevergrad, CMA-ES schedules)
    budget: int | None = None

    def run(self, evaluator: Evaluator) -> None:
        self.task_points: dict[int, dict[str, Any]] = {}
        self.budget = evaluator.budget
        self.start(evaluator.space, evaluator.workers)
        if evaluator.history:
            self.ingest(list(evaluator.history))
        while True:
            # the target is read after the capacity: a pool that joins after it wakes the get below
            room = evaluator.room(lambda: self.target_in_flight(evaluator))
            want = room.propose
            if want > 0:
                points = list(self.suggest(want))[:want]
                if points:
                    self.submitted(evaluator.put(points), points)
                elif evaluator.pending == 0:
                    return  # nothing more to suggest and nothing to wait for
            if evaluator.pending == 0:
                if evaluator.remaining == 0:
                    return
                continue
            results = evaluator.get(1, more_room=room.capacity)  # or none, when a pool joined: propose for it
            if not results:
                continue
            self.ingest(results)
            for result in results:
                self.task_points.pop(result.id, None)
