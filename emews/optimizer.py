"""The optimizer contract: one abstract method, ``run(evaluator)``.

An optimizer runs on the optimizer rank's main thread and never sees MPI.
:class:`AskTellOptimizer` derives an asynchronous ``run`` from
``suggest(n)`` / ``ingest(results)`` (the gest-api names) that keeps every
worker busy.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from emews.evaluator import Evaluator
    from emews.results import Result
    from emews.space import Space


class Optimizer(abc.ABC):
    """Base class of every optimizer. Options come in as constructor keywords."""

    @abc.abstractmethod
    def run(self, evaluator: "Evaluator") -> None:
        """Explore the space through ``evaluator`` until done or out of budget."""


class AskTellOptimizer(Optimizer):
    """An optimizer written as ``suggest``/``ingest``, driven asynchronously.

    The loop keeps ``in_flight`` evaluations outstanding (default: one per
    worker; override :meth:`target_in_flight` to adapt), hands every batch of results that has arrived to ``ingest`` and
    asks for just enough new points to refill. ``suggest`` may return fewer
    points than asked (an exhausted grid); returning none with nothing pending
    ends the run.
    """

    #: evaluations to keep outstanding; ``None`` means one per worker
    in_flight: int | None = None

    def target_in_flight(self, evaluator: "Evaluator") -> int:
        """How many evaluations to keep outstanding now."""
        return self.in_flight or evaluator.workers

    def start(self, space: "Space", workers: int) -> None:
        """Called once before the first ``suggest``; store what you need."""
        self.space = space

    @abc.abstractmethod
    def suggest(self, n: int) -> Sequence[dict[str, Any]]:
        """Return up to ``n`` new points to evaluate."""

    @abc.abstractmethod
    def ingest(self, results: Sequence["Result"]) -> None:
        """Learn from finished evaluations (failed ones included)."""

    def run(self, evaluator: "Evaluator") -> None:
        self.start(evaluator.space, evaluator.workers)
        while True:
            want = min(self.target_in_flight(evaluator) - evaluator.pending, evaluator.remaining)
            if want > 0:
                points = list(self.suggest(want))[:want]
                if points:
                    evaluator.put(points)
                elif evaluator.pending == 0:
                    return  # nothing more to suggest and nothing to wait for
            if evaluator.pending == 0:
                if evaluator.remaining == 0:
                    return
                continue
            self.ingest(evaluator.get(1))
