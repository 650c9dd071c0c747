"""Parameter spaces: typed dimensions and the space that orders them.

A point is a plain ``dict`` keyed by parameter name. Every dimension can
sample itself, check membership, and map to and from the unit interval so
that model-based optimizers can work on ``[0, 1]^d`` whatever the types.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence, Union

Value = Union[int, float, str, bool, None]


class SpaceError(ValueError):
    """An invalid parameter space; ``key`` names the offending entry."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.detail = message


_PLAIN = frozenset((bool, int, float, str, type(None)))


def to_builtin(value: Any) -> Any:
    """Convert numpy scalars (``np.int64``, ``np.str_`` ...) to plain Python values."""
    if type(value) in _PLAIN:
        return value
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    return value


@dataclass(frozen=True)
class _Range:
    """A numeric range ``[lower, upper]``, uniform or (``log``) log-uniform; ``sigma`` is for mutation."""

    lower: float
    upper: float
    log: bool = False
    sigma: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise ValueError("lower and upper must be finite numbers")
        if self.lower > self.upper:
            raise ValueError(f"lower ({self.lower}) is greater than upper ({self.upper})")
        if self.log and self.lower <= 0:
            raise ValueError("log: true needs lower > 0")

    def sample(self, rng: random.Random) -> Any:
        return self.from_unit(rng.random())

    def to_unit(self, value: Any) -> float:
        if self.upper == self.lower:
            return 0.5
        if self.log:
            return (math.log(value) - math.log(self.lower)) / (math.log(self.upper) - math.log(self.lower))
        return (value - self.lower) / (self.upper - self.lower)

    def _scale(self, u: float, lower: float, upper: float) -> float:
        """``u`` in [0, 1] mapped onto [lower, upper], log-uniformly when ``log``."""
        u = min(max(float(u), 0.0), 1.0)
        if self.log:
            return math.exp(math.log(lower) + u * (math.log(upper) - math.log(lower)))
        return lower + u * (upper - lower)

    def from_unit(self, u: float) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Int(_Range):
    """An integer in ``[lower, upper]`` (both inclusive)."""

    lower: int
    upper: int

    def sample(self, rng: random.Random) -> int:
        return self.from_unit(rng.random()) if self.log else rng.randint(self.lower, self.upper)

    def contains(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and self.lower <= value <= self.upper

    def from_unit(self, u: float) -> int:
        # linear: equal-width bins, one per integer
        raw = self._scale(u, self.lower, self.upper) if self.log else \
            self._scale(u, self.lower - 0.5, self.upper + 0.5)
        return int(min(max(round(raw), self.lower), self.upper))

    def grid(self, n: int) -> list[int]:
        if self.upper - self.lower + 1 <= n:
            return list(range(self.lower, self.upper + 1))
        return sorted({self.from_unit(i / (n - 1)) for i in range(n)}) if n > 1 else [self.from_unit(0.5)]


@dataclass(frozen=True)
class Float(_Range):
    """A real number in ``[lower, upper]``; ``log`` samples uniformly in log space."""

    def contains(self, value: Any) -> bool:
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and self.lower <= value <= self.upper)

    def from_unit(self, u: float) -> float:
        return min(max(self._scale(u, self.lower, self.upper), self.lower), self.upper)

    def grid(self, n: int) -> list[float]:
        if n <= 1:
            return [self.from_unit(0.5)]
        return [self.from_unit(i / (n - 1)) for i in range(n)]


@dataclass(frozen=True)
class Categorical:
    """One of an unordered set of values."""

    values: tuple[Value, ...]

    def __post_init__(self) -> None:
        if len(self.values) == 0:
            raise ValueError("values must list at least one value")
        if len(set(map(repr, self.values))) != len(self.values):
            raise ValueError("values must not repeat")

    def sample(self, rng: random.Random) -> Value:
        return self.values[rng.randrange(len(self.values))]

    def contains(self, value: Any) -> bool:
        return any(_same(value, v) for v in self.values)

    def index(self, value: Any) -> int:
        for i, v in enumerate(self.values):
            if _same(value, v):
                return i
        raise ValueError(f"{value!r} is not one of {list(self.values)}")

    def to_unit(self, value: Any) -> float:
        return (self.index(value) + 0.5) / len(self.values)

    def from_unit(self, u: float) -> Value:
        i = int(min(max(float(u), 0.0), 1.0) * len(self.values))
        return self.values[min(i, len(self.values) - 1)]

    def grid(self, n: int) -> list[Value]:
        return list(self.values)


@dataclass(frozen=True)
class Ordered(Categorical):
    """One of an ordered list of values; neighbours are meaningful (e.g. batch sizes)."""

    def to_unit(self, value: Any) -> float:
        if len(self.values) == 1:
            return 0.5
        return self.index(value) / (len(self.values) - 1)

    def from_unit(self, u: float) -> Value:
        u = min(max(float(u), 0.0), 1.0)
        return self.values[int(round(u * (len(self.values) - 1)))]


@dataclass(frozen=True)
class Constant:
    """A fixed value passed to every evaluation."""

    value: Value

    def sample(self, rng: random.Random) -> Value:
        return self.value

    def contains(self, value: Any) -> bool:
        return value == self.value

    def to_unit(self, value: Any) -> float:
        return 0.5

    def from_unit(self, u: float) -> Value:
        return self.value

    def grid(self, n: int) -> list[Value]:
        return [self.value]


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps ``True`` apart from ``1`` but lets ``2`` match ``2.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


Dimension = Union[Int, Float, Categorical, Ordered, Constant]


@dataclass(frozen=True)
class Space:
    """An ordered mapping of parameter names to dimensions."""

    dimensions: Mapping[str, Dimension] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.dimensions:
            raise SpaceError("space", "needs at least one parameter")
        object.__setattr__(self, "dimensions", dict(self.dimensions))

    def __iter__(self) -> Iterator[str]:
        return iter(self.dimensions)

    def __len__(self) -> int:
        return len(self.dimensions)

    def __getitem__(self, name: str) -> Dimension:
        return self.dimensions[name]

    @property
    def names(self) -> list[str]:
        return list(self.dimensions)

    @property
    def free(self) -> dict[str, Dimension]:
        """The dimensions an optimizer searches over (constants left out)."""
        return {k: d for k, d in self.dimensions.items() if not isinstance(d, Constant)}

    def sample(self, rng: random.Random) -> dict[str, Value]:
        return {name: dim.sample(rng) for name, dim in self.dimensions.items()}

    def contains(self, point: Mapping[str, Any]) -> bool:
        return set(point) == set(self.dimensions) and all(
            dim.contains(point[name]) for name, dim in self.dimensions.items())

    def validate(self, point: Mapping[str, Any]) -> dict[str, Value]:
        """Return ``point`` as plain Python values, or raise ``SpaceError`` naming the bad key."""
        if point.keys() != self.dimensions.keys():
            missing = set(self.dimensions) - set(point)
            if missing:
                raise SpaceError(sorted(missing)[0], "missing from point")
            extra = sorted(set(point) - set(self.dimensions))
            raise SpaceError(extra[0], f"not a parameter of this space ({', '.join(self.names)})")
        clean = {}
        for name, dim in self.dimensions.items():
            value = point[name]
            if type(value) not in _PLAIN:
                value = to_builtin(value)
            if type(value) is int and type(dim) is Float:
                value = float(value)
            if not dim.contains(value):
                raise SpaceError(name, f"value {value!r} is outside {dim}")
            clean[name] = value
        return clean

    def to_unit(self, point: Mapping[str, Any]) -> list[float]:
        """Map the free parameters of ``point`` to ``[0, 1]`` coordinates."""
        return [dim.to_unit(point[name]) for name, dim in self.free.items()]

    def from_unit(self, coords: Sequence[float]) -> dict[str, Value]:
        """Inverse of :meth:`to_unit`; constants are filled in."""
        if len(coords) != len(self.free):
            raise ValueError(f"expected {len(self.free)} coordinates, got {len(coords)}")
        free_coords = iter(coords)
        return {name: dim.value if isinstance(dim, Constant) else dim.from_unit(next(free_coords))
                for name, dim in self.dimensions.items()}


def load_candle_json(path: str | Path) -> Space:
    """Load a CANDLE Supervisor GA parameter file (a JSON list of parameter objects)."""
    path = Path(path)
    try:
        entries = json.loads(path.read_text())
    except OSError as exc:
        raise SpaceError("space.file", f"cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise SpaceError("space.file", f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(entries, list):
        raise SpaceError("space.file", f"{path} must hold a JSON list of parameter objects")
    dims: dict[str, Dimension] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "name" not in entry or "type" not in entry:
            raise SpaceError(f"[{i}]", "each entry needs 'name' and 'type'")
        name = str(entry["name"])
        try:
            dims[name] = candle_dimension(entry)
        except (ValueError, TypeError, KeyError) as exc:
            raise SpaceError(name, str(exc)) from exc
    return Space(dims)


CANDLE_TYPES = ("int", "float", "categorical", "ordered", "logical", "constant")


def candle_dimension(entry: Mapping[str, Any]) -> Dimension:
    """Build one dimension from a CANDLE GA JSON entry."""
    kind = entry["type"]
    sigma = entry.get("sigma")
    if kind == "int":
        return Int(int(entry["lower"]), int(entry["upper"]), sigma=sigma)
    if kind == "float":
        return Float(float(entry["lower"]), float(entry["upper"]), bool(entry.get("log", False)), sigma=sigma)
    if kind in ("categorical", "ordered"):
        values = tuple(_cast_element(v, entry.get("element_type")) for v in entry["values"])
        return Categorical(values) if kind == "categorical" else Ordered(values)
    if kind == "logical":
        return Categorical((True, False))
    if kind == "constant":
        return Constant(entry["value"])
    raise ValueError(f"unknown type {kind!r}; allowed: {', '.join(CANDLE_TYPES)}")


def _cast_element(value: Any, element_type: str | None) -> Value:
    casts = {"int": int, "float": float, "string": str, "str": str, None: lambda v: v}
    if element_type not in casts:
        raise ValueError(f"unknown element_type {element_type!r}; allowed: int, float, string")
    return casts[element_type](value)
