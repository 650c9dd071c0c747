"""What the GA evolves: a point of the space (a ``dict``) carrying a DEAP fitness."""

from __future__ import annotations

import copy
import math
from typing import Any

from deap import base

from emews.core.results import Result

#: the value types of a point that a clone shares instead of copying
_IMMUTABLE = frozenset({int, float, str, bool, type(None)})


class LossFitness(base.Fitness):
    """A single-objective DEAP fitness over ``Result.loss`` (smaller is better)."""

    weights = (-1.0,)


class Individual(dict):
    """A point keyed by parameter name, with ``fitness`` (DEAP) and the ``result`` that scored it.

    Equality is the point's equality, so DEAP's ``HallOfFame`` keeps distinct points.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fitness = LossFitness()
        self.result: Result | None = None
        #: the weighted fitness of the parent this individual was bred from (``None``: not bred)
        self.parent_fitness: tuple[float, ...] | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> Individual:
        """``copy.deepcopy``: :meth:`clone`."""
        return self.clone(memo)

    def clone(self, memo: dict[int, Any] | None = None) -> Individual:
        """DEAP's ``clone`` (the toolbox's, without ``copy.deepcopy``'s own bookkeeping): the point
        and the fitness copied, the scoring ``result`` shared (it is never changed, only replaced),
        not deep-copied with its parameters and metrics for every parent of every child bred (most
        of the GA's time at 1,000 workers, ``bench/scale.py``)."""
        twin = Individual.__new__(Individual)  # no throwaway fitness: DEAP's __init__ costs an ABC check
        if all(type(value) in _IMMUTABLE for value in self.values()):
            dict.update(twin, self)  # a point of numbers and strings: nothing to copy deeper
        else:
            dict.update(twin, copy.deepcopy(dict(self), memo))
        fitness = LossFitness.__new__(LossFitness)
        fitness.wvalues = self.fitness.wvalues  # a tuple of floats, as DEAP's own Fitness.__deepcopy__
        twin.fitness = fitness
        twin.result = self.result
        twin.parent_fitness = self.parent_fitness
        return twin

    def bred(self) -> None:
        """Mark this clone of a parent as a new child: remember the parent's fitness, drop its own."""
        if self.fitness.valid:
            self.parent_fitness = self.fitness.wvalues
            del self.fitness.values

    @property
    def ok(self) -> bool:
        """Whether the evaluation that scored this individual succeeded."""
        return self.result is not None and self.result.ok

    @property
    def loss(self) -> float | None:
        """The fitness the GA selected on (a failure policy may have filled it in)."""
        return self.fitness.values[0] if self.fitness.valid else None


def to_record(ind: Individual) -> dict[str, Any]:
    """A JSON-safe description of ``ind`` (non-finite numbers become ``null``)."""
    r = ind.result
    return {
        "params": dict(ind),
        "loss": _finite(ind.loss),
        "objective": None if r is None else _finite(r.objective),
        "status": None if r is None else r.status.value,
        "task_id": None if r is None else r.id,
    }


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None
