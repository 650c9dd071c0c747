"""Any gest-api generator (the ``suggest``/``ingest`` standard of libEnsemble, Xopt and optimas)
as an emews optimizer.

    optimizer:
      name: "emews.contrib.gest:GestGenerator"
      options: {generator: "xopt.generators.random:RandomGenerator", options: {}}

The generator is built from a VOCS made from the space: floats and ints as continuous variables
(ints rounded on the way back), categorical and ordered parameters as discrete variables, and
parameters with one possible value (constants, ``lower == upper``, one-value lists) as VOCS
constants (gest-api requires ``upper > lower``); with nothing to search no generator is built. The objective is ``objective`` (default ``f``),
always minimized: it is the result's loss (a maximized metric arrives negated). A failed
evaluation is ingested with ``NaN``. Generators that return ``_id`` get it back with the result
of that point, as the standard asks; points of earlier runs are ingested without one.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping, Sequence

from gest_api.vocs import VOCS, ContinuousVariable, DiscreteVariable

from emews import AskTellOptimizer, Categorical, Float, Int
from emews.imports import import_user_module
from emews.results import Result
from emews.space import Space, registered, to_builtin

ID = "_id"

#: the VOCS variable of each emews dimension type (with more than one possible value); a categorical's
#: values are its values, or their positions when the generator takes numbers only (``categories: indices``)
VARIABLES = {
    Categorical: lambda dim, indices: DiscreteVariable(values=set(range(len(dim.values)) if indices else dim.values)),
    Int: lambda dim, indices: ContinuousVariable(domain=[float(dim.lower), float(dim.upper)]),
    Float: lambda dim, indices: ContinuousVariable(domain=[float(dim.lower), float(dim.upper)]),
}


def space_vocs(space: Space, objective: str, indices: bool = False) -> VOCS:
    """The VOCS of ``space``: searched parameters as variables, single-valued ones as constants."""
    variables = {n: registered(VARIABLES, d)(d, indices) for n, d in space.dimensions.items()
                 if d.free and not d.is_single}
    constants = {n: d.first for n, d in space.dimensions.items() if not d.free or d.is_single}
    return VOCS(variables=variables, constants=constants, objectives={objective: "MINIMIZE"})


class GestGenerator(AskTellOptimizer):
    """``generator``: ``package.module:Class`` or ``file.py:Class`` of a gest-api ``Generator``;
    ``options``: its keyword arguments (besides ``vocs``); ``categories: indices`` sends categorical
    values as their positions (Xopt takes numeric discrete values only)."""

    def __init__(self, generator: str, options: Mapping[str, Any] | None = None, objective: str = "f",
                 categories: Literal["values", "indices"] = "values") -> None:
        module, sep, name = generator.rpartition(":")
        if not sep:
            raise ValueError(f"generator {generator!r}: expected package.module:Class or file.py:Class")
        self.generator_class = getattr(import_user_module(module, what="generator"), name, None)
        if not isinstance(self.generator_class, type):
            raise ValueError(f"{module} has no class {name!r}")
        self.options = dict(options or {})
        self.objective = objective
        self.indices = categories == "indices"
        self.ids: dict[int, Any] = {}  # task id -> the generator's _id
        self._fresh: list[Any] = []

    def start(self, space: Space, workers: int) -> None:
        super().start(space, workers)
        vocs = space_vocs(space, self.objective, self.indices)
        # nothing to search (constants only): every point is the same, no generator needed
        self.generator = self.generator_class(vocs=vocs, **self.options) if vocs.variables else None

    def suggest(self, n: int) -> list[dict[str, Any]]:
        raw = self.generator.suggest(n) if self.generator is not None else [{}] * n
        self._fresh = [p.get(ID) for p in raw]
        return [self._point(p) for p in raw]

    def _point(self, suggested: Mapping[str, Any]) -> dict[str, Any]:
        point = {}
        for name, dim in self.space.dimensions.items():
            value = to_builtin(suggested.get(name, dim.first))
            if self.indices and isinstance(dim, Categorical) and not dim.is_single:
                value = dim.values[int(value)]
            elif isinstance(dim, Int) and isinstance(value, float) and math.isfinite(value):
                value = min(max(int(round(value)), dim.lower), dim.upper)
            point[name] = value
        return point

    def _sent(self, name: str, value: Any) -> Any:
        """``value`` as the generator saw it (a categorical's position under ``categories: indices``)."""
        dim = self.space.dimensions.get(name)
        if self.indices and isinstance(dim, Categorical) and not dim.is_single:
            return dim.index(value)
        return value

    def submitted(self, ids: Sequence[int], points: Sequence[dict[str, Any]]) -> None:
        super().submitted(ids, points)
        self.ids.update((i, g) for i, g in zip(ids, self._fresh) if g is not None)

    def ingest(self, results: Sequence[Result]) -> None:
        records = []
        for r in results:
            params = {n: self._sent(n, v) for n, v in r.params.items()}
            record = {**params, self.objective: r.loss if r.ok and math.isfinite(r.loss) else math.nan}
            if r.id in self.ids:
                record[ID] = self.ids.pop(r.id)
            records.append(record)
        if records and self.generator is not None:
            self.generator.ingest(records)
