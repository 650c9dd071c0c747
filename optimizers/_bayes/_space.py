"""Mapping an emews :class:`~emews.space.Space` to scikit-optimize dimensions and back.

* ``Int``          -> ``Integer`` (``prior="log-uniform"`` when ``log``)
* ``Float``        -> ``Real`` (``prior="log-uniform"`` when ``log``)
* ``Categorical``  -> ``Categorical`` over the value *indices* (one-hot encoded for the
  model), so that mixed-type values (``None``, ``True``, ``"relu"``, ``2.5``) never reach skopt
* ``Ordered``      -> ``Integer`` index, so neighbours stay neighbours
* ``Constant`` and any dimension with a single possible value are left out and re-added.

Points coming back are plain Python values (skopt hands out ``np.int64`` / ``np.float64``).
"""

from __future__ import annotations

from typing import Any, Mapping

from skopt.space import Categorical as SkCategorical
from skopt.space import Integer as SkInteger
from skopt.space import Real as SkReal
from skopt.space import Space as SkSpace
from skopt.utils import normalize_dimensions

from emews.space import Categorical, Constant, Float, Int, Ordered, Space, to_builtin


def _is_fixed(dim: Any) -> bool:
    if isinstance(dim, Constant):
        return True
    if isinstance(dim, Categorical):  # Ordered included
        return len(dim.values) == 1
    return dim.lower == dim.upper


def _fixed_value(dim: Any) -> Any:
    if isinstance(dim, Constant):
        return dim.value
    if isinstance(dim, Categorical):
        return dim.values[0]
    return dim.lower


class SpaceMap:
    """Translate points between an emews space and a (normalized) skopt space."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.fixed = {n: _fixed_value(d) for n, d in space.dimensions.items() if _is_fixed(d)}
        self.names = [n for n in space.dimensions if n not in self.fixed]
        dims = []
        for name in self.names:
            dim = space[name]
            if isinstance(dim, Ordered):
                dims.append(SkInteger(0, len(dim.values) - 1, name=name))
            elif isinstance(dim, Categorical):
                dims.append(SkCategorical(list(range(len(dim.values))), name=name))
            elif isinstance(dim, Int):
                dims.append(SkInteger(dim.lower, dim.upper, prior="log-uniform" if dim.log else "uniform",
                                      name=name))
            elif isinstance(dim, Float):
                dims.append(SkReal(dim.lower, dim.upper, prior="log-uniform" if dim.log else "uniform",
                                   name=name))
            else:  # pragma: no cover - the Space type is closed
                raise TypeError(f"{name}: unsupported dimension {dim!r}")
        #: every dimension scaled to [0, 1], categoricals one-hot: what the surrogates see
        self.skopt: SkSpace | None = normalize_dimensions(dims) if dims else None

    @property
    def n_dims(self) -> int:
        return len(self.names)

    def to_skopt(self, point: Mapping[str, Any]) -> list[Any]:
        """An emews point as a skopt point (a list in ``self.names`` order)."""
        out: list[Any] = []
        for name in self.names:
            dim, value = self.space[name], point[name]
            out.append(dim.index(value) if isinstance(dim, Categorical) else value)
        return out

    def from_skopt(self, x: list[Any]) -> dict[str, Any]:
        """A skopt point as an emews point of plain Python values, constants re-added."""
        free = dict(zip(self.names, x))
        point: dict[str, Any] = {}
        for name, dim in self.space.dimensions.items():
            if name in self.fixed:
                point[name] = self.fixed[name]
                continue
            value = to_builtin(free[name])
            if isinstance(dim, Categorical):
                point[name] = dim.values[int(value)]
            elif isinstance(dim, Int):
                point[name] = int(min(max(round(value), dim.lower), dim.upper))
            else:
                point[name] = float(min(max(float(value), dim.lower), dim.upper))
        return point
