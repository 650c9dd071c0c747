"""Mapping an emews :class:`~emews.core.space.Space` to scikit-optimize dimensions and back.

* ``Int``          -> ``Integer`` (``prior="log-uniform"`` when ``log``)
* ``Float``        -> ``Real`` (``prior="log-uniform"`` when ``log``)
* ``Categorical``  -> ``Categorical`` over the value *indices* (one-hot encoded for the
  model), so that mixed-type values (``None``, ``True``, ``"relu"``, ``2.5``) never reach skopt
* ``Ordered``      -> ``Integer`` index, so neighbours stay neighbours
* ``Constant`` and any dimension with a single possible value are left out and re-added.

Points coming back are plain Python values (skopt hands out ``np.int64`` / ``np.float64``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skopt.space import Categorical as SkCategorical
from skopt.space import Integer as SkInteger
from skopt.space import Real as SkReal
from skopt.space import Space as SkSpace
from skopt.utils import normalize_dimensions

from emews.core.space import Categorical, Float, Int, Ordered, Space, registered, to_builtin


def _prior(dim: Int | Float) -> str:
    return "log-uniform" if dim.log else "uniform"


#: the skopt dimension searched for each emews dimension type (constants and single values are left out)
SKOPT_DIMENSIONS: dict[type, Callable[[Any, str], Any]] = {
    Ordered: lambda dim, name: SkInteger(0, len(dim.values) - 1, name=name),
    Categorical: lambda dim, name: SkCategorical(list(range(len(dim.values))), name=name),
    Int: lambda dim, name: SkInteger(dim.lower, dim.upper, prior=_prior(dim), name=name),
    Float: lambda dim, name: SkReal(dim.lower, dim.upper, prior=_prior(dim), name=name),
}


class SpaceMap:
    """Translate points between an emews space and a (normalized) skopt space."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.fixed = {n: d.first for n, d in space.dimensions.items() if d.is_single}
        self.names = [n for n in space.dimensions if n not in self.fixed]
        dims = [registered(SKOPT_DIMENSIONS, space[name])(space[name], name) for name in self.names]
        #: every dimension scaled to [0, 1], categoricals one-hot: what the surrogates see
        self.skopt: SkSpace | None = normalize_dimensions(dims) if dims else None

    @property
    def n_dims(self) -> int:
        return len(self.names)

    def to_skopt(self, point: Mapping[str, Any]) -> list[Any]:
        """An emews point as a skopt point (a list in ``self.names`` order)."""
        return [self.space[name].encode(point[name]) for name in self.names]

    def from_skopt(self, x: list[Any]) -> dict[str, Any]:
        """A skopt point as an emews point of plain Python values, constants re-added."""
        free = dict(zip(self.names, x, strict=False))
        return {
            name: self.fixed[name] if name in self.fixed else dim.decode(to_builtin(free[name]))
            for name, dim in self.space.dimensions.items()
        }
