"""Any Nevergrad optimizer as an emews optimizer, through Nevergrad's ask/tell API.

    optimizer: {name: "emews.contrib.nevergrad:NevergradOptimizer", options: {optimizer: TwoPointsDE, seed: 1}}

Floats and ints become ``Scalar``s (``Log`` when ``log``; ints cast), categoricals ``Choice``,
ordered ones ``TransitionChoice`` (neighbours stay neighbours). Parameters with one possible value
(constants, ``lower == upper``, a one-value list) are passed as they are and not searched: Nevergrad
refuses such bounds. Nevergrad learns the budget at start. A failed evaluation is told as a loss
worse than any seen (Nevergrad clips ``inf`` with a warning). A resumed run tells Nevergrad the
earlier runs' results, draws with another seed than the first run (a seeded run asked the first
run's points again), and does not propose an earlier run's point again (an optimizer's first ask,
the centre for many, is the same in every run): such an ask is told the stored loss and asked again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import nevergrad as ng

from emews.core.errors import OptionError, did_you_mean
from emews.core.evaluator import Evaluator
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Result
from emews.core.seeds import fitted_seed, resumed_seed
from emews.core.space import Categorical, Float, Int, Ordered, Space, registered, to_builtin

#: the Nevergrad parameter of each emews dimension type (with more than one possible value)
PARAMETERS: dict[type, Callable[[Any], Any]] = {
    Ordered: lambda dim: ng.p.TransitionChoice(list(dim.values)),
    Categorical: lambda dim: ng.p.Choice(list(dim.values)),
    Int: lambda dim: _integer((ng.p.Log if dim.log else ng.p.Scalar)(lower=dim.lower, upper=dim.upper), dim),
    Float: lambda dim: (ng.p.Log if dim.log else ng.p.Scalar)(lower=dim.lower, upper=dim.upper),
}


#: the widest int range Nevergrad casts to integers itself: it casts through a float64, and beyond
#: 2**53 the cast overflows (2**63 became -2**63); wider ranges are rounded by :func:`_whole`
CAST_UP_TO = 2**53


def _integer(parameter: Any, dim: Int) -> Any:
    return parameter.set_integer_casting() if max(abs(dim.lower), abs(dim.upper)) <= CAST_UP_TO else parameter


def _whole(dim: Any, value: Any) -> Any:
    """An int parameter's value as a Python int inside its bounds (a float of a wide range rounded)."""
    if isinstance(dim, Int) and isinstance(value, float) and math.isfinite(value):
        return min(max(int(round(value)), dim.lower), dim.upper)
    return value


class NevergradOptimizer(AskTellOptimizer):
    """``optimizer``: a name in ``nevergrad.optimizers.registry`` (NGOpt, CMA, TwoPointsDE, ...;
    default TwoPointsDE); ``seed``: the parametrization's random seed (None: unseeded)."""

    def __init__(self, optimizer: str = "TwoPointsDE", seed: int | None = None) -> None:
        if optimizer not in ng.optimizers.registry:
            raise OptionError(
                "optimizer",
                f"unknown Nevergrad optimizer {optimizer!r}{did_you_mean(optimizer, ng.optimizers.registry)}",
                "a name of nevergrad.optimizers.registry (NGOpt, TwoPointsDE, CMA, ...)",
            )
        self.name, self.seed = optimizer, seed
        self.candidates: dict[int, Any] = {}
        self._fresh: list[Any] = []
        self._worst = 0.0
        self._draw_seed = fitted_seed(seed)
        #: the earlier runs' points (their searched values) and the loss told for each
        self._earlier: dict[str, float] = {}

    #: how many asks in a row may land on an earlier run's point before one is proposed anyway
    REASKS = 20

    def run(self, evaluator: Evaluator) -> None:
        """Run the ask/tell loop; a resumed seeded run draws with another seed than the first."""
        if self.seed is not None and evaluator.earlier_points:  # resumed: draw on, not the first run's draws again
            self._draw_seed = resumed_seed(self.seed, evaluator.earlier_points)
        super().run(evaluator)

    def start(self, space: Space, workers: int) -> None:
        super().start(space, workers)
        self.searched = {n: d for n, d in space.free.items() if not d.is_single}
        self.fixed = {n: d.first for n, d in space.dimensions.items() if n not in self.searched}
        self.opt = None
        if self.searched:
            parametrization = ng.p.Dict(**{n: registered(PARAMETERS, d)(d) for n, d in self.searched.items()})
            parametrization.random_state.seed(self._draw_seed)  # any integer
            self.opt = ng.optimizers.registry[self.name](parametrization, budget=self.budget, num_workers=workers)

    def suggest(self, n: int) -> list[dict[str, Any]]:
        self._fresh = [self._ask() for _ in range(n)] if self.opt is not None else [None] * n
        return [self._point(c) for c in self._fresh]

    def _ask(self) -> Any:
        """A candidate whose point no earlier run evaluated (after :attr:`REASKS` tries, the last one)."""
        assert self.opt is not None
        candidate = self.opt.ask()
        for _ in range(self.REASKS):
            known = self._earlier.get(self._key(self._point(candidate)))
            if known is None:
                break
            self.opt.tell(candidate, known)
            candidate = self.opt.ask()
        return candidate

    def _key(self, point: Mapping[str, Any]) -> str:
        return repr([point[n] for n in self.searched])

    def _point(self, candidate: Any) -> dict[str, Any]:
        values = (
            {} if candidate is None else {k: _whole(self.space[k], to_builtin(v)) for k, v in candidate.value.items()}
        )
        return {name: values.get(name, self.fixed.get(name)) for name in self.space.dimensions}

    def submitted(self, ids: Sequence[int], points: Sequence[dict[str, Any]]) -> None:
        super().submitted(ids, points)
        self.candidates.update(zip(ids, self._fresh, strict=False))

    def ingest(self, results: Sequence[Result]) -> None:
        if self.opt is None:
            return
        for r in results:
            if r.ok and math.isfinite(r.loss):
                self._worst = max(self._worst, r.loss)
            loss = r.loss if r.ok and math.isfinite(r.loss) else abs(self._worst) * 2 + 1.0
            candidate = self.candidates.pop(r.id, None)
            if candidate is None:  # an earlier run's result: told as a point Nevergrad did not ask for
                candidate = self.opt.parametrization.spawn_child(new_value={n: r.params[n] for n in self.searched})
                self._earlier[self._key(r.params)] = loss
            self.opt.tell(candidate, loss)
