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

``seed``: the first N points (``initial_points: N``) are drawn from the space with it, and every
call of the generator runs with Python's, numpy's and torch's global generators seeded from it (Xopt's
generators take no seed and draw from them), so a seeded run is repeated exactly; a resumed run draws
with other seeds than the first (it proposed the first run's points again).

``initial_points: N``: the first N points of the experiment are drawn from the space (``seed``)
before the generator is asked, and it is asked only once it holds a result: Xopt's Bayesian
generators cannot suggest without data. ``emews check`` builds the generator on the workflow's
space, so one whose ``_validate_vocs`` refuses the space's types (Xopt's CNSGA and discrete
variables) is refused before launch; a build that passed is kept (:mod:`emews.core.check_cache`), so
the next command of the same generator, options and space imports nothing of its library (Xopt imports
PyTorch): only the optimizer rank does, where the generator runs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from gest_api.vocs import VOCS, ContinuousVariable, DiscreteVariable

from emews.config.plugins import CLASS_FORMS
from emews.core.check_cache import keep, kept
from emews.core.code_files import code_fingerprint, user_module_files
from emews.core.errors import OptionError
from emews.core.imports import UserImportError, import_user_module
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Result
from emews.core.seeds import global_rngs_seeded, resumed_seed
from emews.core.space import Categorical, Float, Int, Space, registered, to_builtin

ID = "_id"

#: the VOCS variable of each emews dimension type (with more than one possible value); a categorical's
#: values are its values, or their positions when the generator takes numbers only (``categories: indices``)
VARIABLES: dict[type, Callable[[Any, bool], Any]] = {
    Categorical: lambda dim, indices: DiscreteVariable(values=set(range(len(dim.values)) if indices else dim.values)),
    Int: lambda dim, indices: ContinuousVariable(domain=[float(dim.lower), float(dim.upper)]),
    Float: lambda dim, indices: ContinuousVariable(domain=[float(dim.lower), float(dim.upper)]),
}


def space_vocs(space: Space, objective: str, indices: bool = False) -> VOCS:
    """The VOCS of ``space``: searched parameters as variables, single-valued ones as constants."""
    variables = {
        n: registered(VARIABLES, d)(d, indices) for n, d in space.dimensions.items() if d.free and not d.is_single
    }
    constants = {n: d.first for n, d in space.dimensions.items() if not d.free or d.is_single}
    return VOCS(variables=variables, constants=constants, objectives={objective: "MINIMIZE"})


class GestGenerator(AskTellOptimizer):
    """``generator``: ``package.module:Class`` or ``file.py:Class`` of a gest-api ``Generator``;
    ``options``: its keyword arguments (besides ``vocs``); ``categories: indices`` sends categorical
    values as their positions (Xopt takes numeric discrete values only); ``initial_points``: points
    drawn from the space (``seed``) before the generator is asked; ``objective``: the name of the
    VOCS objective the losses are told as (``f``)."""

    def __init__(
        self,
        generator: str,
        options: Mapping[str, Any] | None = None,
        objective: str = "f",
        categories: Literal["values", "indices"] = "values",
        initial_points: int = 0,
        seed: int | None = None,
    ) -> None:
        module, sep, name = generator.rpartition(":")
        if not sep:
            raise OptionError("generator", f"{generator!r} names no class", CLASS_FORMS)
        self.generator_ref = generator
        self._generator_class: type | None = None  # imported where it is used (see generator_class)
        self.options = dict(options or {})
        self.objective = objective
        self.indices = categories == "indices"
        if initial_points < 0:
            raise OptionError("initial_points", f"must be 0 or more, got {initial_points}")
        self.initial_points = initial_points
        self.seed = seed
        self.rng = random.Random(seed)
        self._draw_seed = seed  # the seed of this run's draws (another one after a resume)
        self._calls = 0  # calls of the generator in this run
        self.ids: dict[int, Any] = {}  # task id -> the generator's _id
        self._fresh: list[Any] = []
        self._design = 0  # initial points still to draw from the space
        self._has_data = False  # the generator has ingested a result

    @property
    def generator_class(self) -> type:
        """The generator's class, imported on first use: only a check that must build the generator
        and the optimizer rank import its library (Xopt imports PyTorch), not every command."""
        if self._generator_class is None:
            module, _, name = self.generator_ref.rpartition(":")
            try:
                generator_class = getattr(import_user_module(module, what="generator"), name, None)
            except UserImportError as exc:
                raise OptionError("generator", str(exc), CLASS_FORMS) from None
            if not isinstance(generator_class, type):
                raise OptionError("generator", f"{module} has no class {name!r}", CLASS_FORMS)
            self._generator_class = generator_class
        return self._generator_class

    def check(self, space: Space) -> None:
        """Build the generator on ``space``'s VOCS: one that cannot handle its variables says so here.
        A build that passed is kept (:mod:`~emews.core.check_cache`): the next command that checks the
        same generator, options and space imports nothing while the user's modules loaded then (the
        generator's file, the helpers it imports) are unchanged."""
        code = code_fingerprint(self.generator_ref.rpartition(":")[0])
        key = {
            "check": "gest",
            "generator": self.generator_ref,
            "code": code,
            "options": self.options,
            "objective": self.objective,
            "indices": self.indices,
            "space": {n: [d.free, d.to_spec()] for n, d in space.dimensions.items()},
        }
        if code is not None and kept(key) is not None:
            return
        self._generator(space)
        if code is not None:
            keep(key, None, user_module_files())

    def _generator(self, space: Space) -> Any:
        """The generator for ``space`` (``None``: nothing to search, every point is the same); a
        ``ValueError`` in one line when the generator refuses the VOCS."""
        vocs = space_vocs(space, self.objective, self.indices)
        if not vocs.variables:
            return None
        try:
            return self.generator_class(vocs=vocs, **self.options)
        except Exception as exc:  # gest-api's _validate_vocs raises ValueError; Xopt's, pydantic's errors
            errors = getattr(exc, "errors", None)
            detail = errors()[0]["msg"] if callable(errors) and errors() else str(exc)
            raise OptionError(
                "generator", f"{self.generator_class.__name__} cannot take this space: {' '.join(str(detail).split())}"
            ) from None

    def run(self, evaluator: Any) -> None:
        earlier = len(evaluator.history) + len(evaluator.requeued)
        self._design = max(self.initial_points - earlier, 0)
        if self.seed is not None and evaluator.earlier_points:  # resumed: draw on, not the first run's draws again
            self._draw_seed = resumed_seed(self.seed, evaluator.earlier_points)
            self.rng = random.Random(self._draw_seed)
        super().run(evaluator)

    def _seeded(self) -> Any:
        """The global generators seeded for the generator's next call (unseeded run: left as they are)."""
        self._calls += 1
        return global_rngs_seeded(None if self._draw_seed is None else resumed_seed(self._draw_seed, self._calls))

    def start(self, space: Space, workers: int) -> None:
        super().start(space, workers)
        with self._seeded():
            self.generator = self._generator(space)

    def suggest(self, n: int) -> list[dict[str, Any]]:
        drawn = [self.space.sample(self.rng) for _ in range(min(n, self._design))]
        self._design -= len(drawn)
        asked = n - len(drawn) if self._design == 0 and (self._has_data or not self.initial_points) else 0
        raw: list[dict[str, Any]] = [{}] * asked if self.generator is None else []
        if asked and self.generator is not None:
            with self._seeded():
                raw = self.generator.suggest(asked)
        self._fresh = [None] * len(drawn) + [p.get(ID) for p in raw]
        return drawn + [self._point(p) for p in raw]

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
        self.ids.update((i, g) for i, g in zip(ids, self._fresh, strict=False) if g is not None)

    def ingest(self, results: Sequence[Result]) -> None:
        records = []
        for r in results:
            params = {n: self._sent(n, v) for n, v in r.params.items()}
            record = {**params, self.objective: r.loss if r.ok and math.isfinite(r.loss) else math.nan}
            if r.id in self.ids:
                record[ID] = self.ids.pop(r.id)
            records.append(record)
        if records and self.generator is not None:
            with self._seeded():
                self.generator.ingest(records)
            self._has_data = True
