"""Parameter spaces: typed dimensions and the space that orders them.

A point is a plain ``dict`` keyed by parameter name. Every dimension can
sample itself, check membership, and map to and from the unit interval so
that model-based optimizers can work on ``[0, 1]^d`` whatever the types.

Per-type behaviour lives on the dimension classes (the contract: :class:`DimensionType`): the
YAML form (:meth:`~DimensionType.to_spec`), the model encoding (``encode``/``decode``),
GA mutation (``mutate``). Conversions that belong to an optional library (R,
skopt, Optuna) are one registry per library, keyed by dimension type, next
to that library's code and read through :func:`registered`; a new parameter
type is one class here plus one entry per such registry.
"""

from __future__ import annotations

import abc
import math
import random
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from emews.core.errors import EmewsError
from emews.core.results import utf8_text

Value = int | float | str | bool | None


class SpaceError(EmewsError, ValueError):
    """An invalid parameter space; ``key`` names the offending entry."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.detail = message


_PLAIN = frozenset((bool, int, float, str, type(None)))


def to_builtin(value: Any) -> Any:
    """Convert numpy scalars (``np.int64``, ``np.str_`` ...) to plain Python values, and arrays
    and tensors of one or more dimensions to (nested) lists."""
    if type(value) in _PLAIN:
        return value
    if getattr(value, "ndim", 0) and callable(getattr(value, "tolist", None)):
        return value.tolist()
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    return value


def plain_value(value: Any, otherwise: Callable[[Any], Any] | None = None, *, escape: bool = False) -> Any:
    """``value`` with numpy scalars made plain, inside lists and dicts too (what JSON can hold);
    ``otherwise`` (e.g. ``repr``), when given, turns any other leaf into something plain; ``escape``:
    strings' lone surrogates (a non-UTF-8 file name) escaped, so that the store can write a metric
    (a point's values are left as they are: the space compares them)."""
    value = to_builtin(value)
    text: Callable[[str], str] = utf8_text if escape else str
    if isinstance(value, str):
        return text(value)
    if isinstance(value, (list, tuple)):
        return [plain_value(v, otherwise, escape=escape) for v in value]
    if isinstance(value, Mapping):
        return {text(str(k)): plain_value(v, otherwise, escape=escape) for k, v in value.items()}
    if otherwise is None or isinstance(value, (bool, int, float, str, type(None))):
        return value
    return otherwise(value)


#: default GA mutation step as a fraction of a numeric dimension's range
DEFAULT_SIGMA_FRACTION = 0.1


class DimensionType(abc.ABC):
    """What every dimension type provides: the contract of :class:`Int`, :class:`Float`,
    :class:`Categorical`, :class:`Ordered` and :class:`Constant` (frozen dataclasses)."""

    #: the ``type:`` of the dimension in a workflow file
    kind: ClassVar[str]
    #: whether optimizers search over it (a constant is not searched)
    free: ClassVar[bool] = True

    @abc.abstractmethod
    def sample(self, rng: random.Random) -> Any:
        """One value drawn from ``rng`` (uniformly, or log-uniformly for a ``log`` range)."""

    @abc.abstractmethod
    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one of the dimension's values."""

    def holds_as_is(self, value: Any) -> bool:
        """A quick yes for a value :meth:`Space.validate` would keep unchanged (a plain Python
        value of the dimension's own type, inside it); ``False`` means "take the full check"."""
        return False

    @abc.abstractmethod
    def to_unit(self, value: Any) -> float:
        """``value`` mapped into [0, 1] (log scale for a ``log`` range, positions for choices)."""

    @abc.abstractmethod
    def from_unit(self, u: float) -> Any:
        """The value at ``u`` in [0, 1], the inverse of :meth:`to_unit`."""

    @abc.abstractmethod
    def grid(self, n: int) -> list[Any]:
        """At most ``n`` values spread over the dimension (every value of a choice)."""

    @abc.abstractmethod
    def to_spec(self) -> dict[str, Any]:
        """The dimension as written under ``space:`` in the resolved workflow.yaml."""

    @property
    @abc.abstractmethod
    def is_single(self) -> bool:
        """Whether exactly one value is possible (nothing to search)."""

    @property
    @abc.abstractmethod
    def first(self) -> Any:
        """The lowest (or first listed) value: the only one when :attr:`is_single`."""

    @abc.abstractmethod
    def encode(self, value: Any) -> Any:
        """``value`` as a model coordinate: numbers stay numbers, choices become their index."""

    @abc.abstractmethod
    def decode(self, x: Any) -> Any:
        """Inverse of :meth:`encode`, clipped into the dimension."""

    @abc.abstractmethod
    def mutate(self, value: Any, rng: random.Random) -> Any:
        """One GA-mutated value, always inside the dimension."""


@dataclass(frozen=True)
class _Range(DimensionType):
    """A numeric range ``[lower, upper]``, uniform or (``log``) log-uniform; ``sigma`` is for mutation."""

    lower: float
    upper: float
    log: bool = False
    sigma: float | None = None

    #: bounds must be whole numbers (``Int``)
    _integral: ClassVar[bool] = False

    def __post_init__(self) -> None:
        for what in ("lower", "upper"):
            value = getattr(self, what)
            if not is_number(value) or (self._integral and not isinstance(value, int)):
                kind = "an integer" if self._integral else "a number"
                raise ValueError(f"{what} must be {kind}, got {value!r}")
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise ValueError("lower and upper must be finite numbers")
        if self._integral:
            _require_int_range(int(self.lower), "lower")
            _require_int_range(int(self.upper), "upper")
        if self.sigma is not None and not (is_number(self.sigma) and math.isfinite(self.sigma)):
            raise ValueError(f"sigma must be a finite number, got {self.sigma!r}")
        if self.lower > self.upper:
            raise ValueError(f"lower ({self.lower}) is greater than upper ({self.upper})")
        if not self._integral and not math.isfinite(float(self.upper) - float(self.lower)):
            raise ValueError(  # model-based optimizers scale by the width: NaN, OverflowError mid-run
                f"the range from {self.lower} to {self.upper} is wider than a double holds (upper - lower overflows)"
            )
        if self.log and self.lower <= 0:
            raise ValueError("log: true needs lower > 0")
        if self.log:  # sampling is on the optimizer's hot path
            object.__setattr__(self, "_log_bounds", (math.log(self.lower), math.log(self.upper)))

    def sample(self, rng: random.Random) -> Any:
        return self.from_unit(rng.random())

    def to_unit(self, value: Any) -> float:
        if self.upper == self.lower:
            return 0.5
        if self.log:
            span = math.log(self.upper) - math.log(self.lower)  # 0 when the bounds are one ulp apart
            return (math.log(value) - math.log(self.lower)) / span if span else 0.5
        return (value - self.lower) / (self.upper - self.lower)

    def _scale(self, u: float, lower: float, upper: float) -> float:
        """``u`` in [0, 1] mapped onto [lower, upper], log-uniformly when ``log``."""
        u = min(max(float(u), 0.0), 1.0)
        if self.log:
            if lower == self.lower and upper == self.upper:
                log_lower, log_upper = self._log_bounds  # type: ignore[attr-defined]
            else:
                log_lower, log_upper = math.log(lower), math.log(upper)
            return math.exp(log_lower + u * (log_upper - log_lower))
        return lower + u * (upper - lower)

    def to_spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.kind, "lower": self.lower, "upper": self.upper}
        if self.log:
            out["log"] = True
        if self.sigma is not None:
            out["sigma"] = self.sigma
        return out

    @property
    def is_single(self) -> bool:
        return self.lower == self.upper

    @property
    def first(self) -> Any:
        return self.lower

    def encode(self, value: Any) -> Any:
        return value

    def mutation_sigma(self) -> float:
        """The Gaussian mutation step: ``sigma``, else 10% of the range (log: in decades)."""
        if self.sigma is not None:
            return float(self.sigma)
        if self.log:
            span = math.log10(self.upper) - math.log10(self.lower)
        else:
            span = self.upper - self.lower
        return DEFAULT_SIGMA_FRACTION * span

    def mutate(self, value: Any, rng: random.Random) -> Any:
        """A Gaussian step of :meth:`mutation_sigma` (in log10 units when ``log``), clipped."""
        sigma = self.mutation_sigma()
        if self.log:
            lo, hi = math.log10(self.lower), math.log10(self.upper)
            x = min(max(math.log10(value) + rng.gauss(0.0, sigma), lo), hi)
            return self.decode(10.0**x)
        return self.decode(value + rng.gauss(0.0, sigma))


#: the most values a ``range`` may hold and still have a ``len()`` (a C ssize_t)
_MAX_LEN = sys.maxsize


@dataclass(frozen=True)
class Int(_Range):
    """An integer in ``[lower, upper]`` (both inclusive)."""

    lower: int
    upper: int

    kind: ClassVar[str] = "int"
    _integral: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "_values", range(self.lower, self.upper + 1))

    def sample(self, rng: random.Random) -> int:
        if self.log:
            return self.from_unit(rng.random())
        if self.upper - self.lower < _MAX_LEN:
            return rng.choice(self._values)  # type: ignore[attr-defined]  # what randint(lower, upper) draws
        return rng.randrange(self.lower, self.upper + 1)  # the same draw: a range this long has no len()

    def contains(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and self.lower <= value <= self.upper

    def holds_as_is(self, value: Any) -> bool:
        return type(value) is int and self.lower <= value <= self.upper

    def from_unit(self, u: float) -> int:
        # linear: equal-width bins, one per integer
        raw = self._scale(u, self.lower, self.upper) if self.log else self._scale(u, self.lower - 0.5, self.upper + 0.5)
        return int(min(max(round(raw), self.lower), self.upper))

    def grid(self, n: int) -> list[int]:
        if self.upper - self.lower + 1 <= n:
            return list(range(self.lower, self.upper + 1))
        return sorted({self.from_unit(i / (n - 1)) for i in range(n)}) if n > 1 else [self.from_unit(0.5)]

    def decode(self, x: Any) -> int:
        return int(min(max(round(x), self.lower), self.upper))

    def mutation_sigma(self) -> float:
        """As for any range, but a linear default step is at least 1."""
        sigma = super().mutation_sigma()
        return sigma if self.sigma is not None or self.log else max(sigma, 1.0)


@dataclass(frozen=True)
class Float(_Range):
    """A real number in ``[lower, upper]``; ``log`` samples uniformly in log space."""

    kind: ClassVar[str] = "float"

    def sample(self, rng: random.Random) -> float:  # from_unit(rng.random()), inlined: a hot path
        if self.log:
            log_lower, log_upper = self._log_bounds  # type: ignore[attr-defined]
            value = math.exp(log_lower + rng.random() * (log_upper - log_lower))
            return min(max(value, self.lower), self.upper)
        value = self.lower + rng.random() * (self.upper - self.lower)
        return value if value <= self.upper else self.upper

    def holds_as_is(self, value: Any) -> bool:
        return type(value) is float and self.lower <= value <= self.upper

    def contains(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and self.lower <= value <= self.upper

    def from_unit(self, u: float) -> float:
        return min(max(self._scale(u, self.lower, self.upper), self.lower), self.upper)

    def grid(self, n: int) -> list[float]:
        """``n`` evenly spaced values (log-spaced when ``log``) from ``lower`` to ``upper`` themselves,
        those between rounded to the fewest significant digits (12 or more) that keep them apart:
        ``1e-4 .. 1`` is 1e-4, 1e-3, ..., not 0.00010000000000000009. Each value once: a range of
        one value (``lower == upper``) or a few ulps has fewer than ``n``."""
        if n <= 1:
            return [self.from_unit(0.5)]
        inner = [self.from_unit(i / (n - 1)) for i in range(1, n - 1)]
        for digits in range(12, 18):  # 17 significant digits give each float back as it is
            values = [self.lower, *(float(f"{v:.{digits}g}") for v in inner), self.upper]
            if all(a < b for a, b in zip(values, values[1:], strict=False)) or digits == 17:
                return list(dict.fromkeys(values))
        raise AssertionError("unreachable: 17 digits keep every float")

    def decode(self, x: Any) -> float:
        return float(min(max(float(x), self.lower), self.upper))


@dataclass(frozen=True)
class Categorical(DimensionType):
    """One of an unordered set of values."""

    values: tuple[Value, ...]

    kind: ClassVar[str] = "categorical"

    def __post_init__(self) -> None:
        if len(self.values) == 0:
            raise ValueError("values must list at least one value")
        _require_finite(self.values, "values")
        if len(set(map(repr, self.values))) != len(self.values):
            raise ValueError("values must not repeat")
        positions: dict[Any, int] = {}
        for i, v in enumerate(self.values):
            key = _lookup_key(v)
            earlier = positions.get(key) if key is not None else None
            if earlier is None:
                earlier = next(
                    (j for j in range(i) if _lookup_key(self.values[j]) is None and _same(v, self.values[j])), None
                )
            if earlier is not None:  # 1 and 1.0: a point holding either is the other one too
                raise ValueError(
                    f"values must not repeat: {self.values[earlier]!r} and {v!r} are one value "
                    "(a whole number and its float match each other; list one of them)"
                )
            if key is not None:
                positions[key] = i
        object.__setattr__(self, "_positions", positions)

    def sample(self, rng: random.Random) -> Value:
        return rng.choice(self.values)  # values[rng.randrange(len(values))], at less cost

    def contains(self, value: Any) -> bool:
        return self._find(value) is not None

    def holds_as_is(self, value: Any) -> bool:
        return type(value) in _PLAIN and (type(value) is bool, value) in self._positions  # type: ignore[attr-defined]

    def index(self, value: Any) -> int:
        i = self._find(value)
        if i is None:
            raise ValueError(f"{value!r} is not one of {list(self.values)}")
        return i

    def _find(self, value: Any) -> int | None:
        """Position of ``value`` by :func:`_same`: a dict lookup for hashable values."""
        key = _lookup_key(value)
        if key is not None:
            found = self._positions.get(key)  # type: ignore[attr-defined]
            if found is not None or len(self._positions) == len(self.values):  # type: ignore[attr-defined]
                return found
        return next((i for i, v in enumerate(self.values) if _same(value, v)), None)

    def to_unit(self, value: Any) -> float:
        return (self.index(value) + 0.5) / len(self.values)

    def from_unit(self, u: float) -> Value:
        i = int(min(max(float(u), 0.0), 1.0) * len(self.values))
        return self.values[min(i, len(self.values) - 1)]

    def grid(self, n: int) -> list[Value]:
        return list(self.values)

    def to_spec(self) -> dict[str, Any]:
        return {"type": self.kind, "values": list(self.values)}

    @property
    def is_single(self) -> bool:
        return len(self.values) == 1

    @property
    def first(self) -> Value:
        return self.values[0]

    def encode(self, value: Any) -> int:
        return self.index(value)

    def decode(self, x: Any) -> Value:
        return self.values[int(x)]

    def mutate(self, value: Any, rng: random.Random) -> Value:
        """A different value, drawn uniformly."""
        n = len(self.values)
        if n == 1:
            return self.values[0]
        j = rng.randrange(n - 1)
        return self.values[j if j < self.index(value) else j + 1]


@dataclass(frozen=True)
class Ordered(Categorical):
    """One of an ordered list of values; neighbours are meaningful (e.g. batch sizes).

    ``sigma`` (CANDLE Supervisor's GA): mutation is a Gaussian step of that many positions,
    rounded and kept within the list; without it, one step to a neighbour.
    """

    sigma: float | None = None

    kind: ClassVar[str] = "ordered"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sigma is not None and not (is_number(self.sigma) and math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"sigma must be a finite number >= 0, got {self.sigma!r}")

    def to_spec(self) -> dict[str, Any]:
        spec = super().to_spec()
        if self.sigma is not None:
            spec["sigma"] = self.sigma
        return spec

    def to_unit(self, value: Any) -> float:
        if len(self.values) == 1:
            return 0.5
        return self.index(value) / (len(self.values) - 1)

    def from_unit(self, u: float) -> Value:
        u = min(max(float(u), 0.0), 1.0)
        return self.values[int(round(u * (len(self.values) - 1)))]

    def mutate(self, value: Any, rng: random.Random) -> Value:
        """A Gaussian step of ``sigma`` positions (rounded, kept within the list), as Supervisor's
        ``OrderedParameter``; without ``sigma``, one step to a neighbour, bouncing off the ends."""
        n = len(self.values)
        if n == 1:
            return self.values[0]
        i = self.index(value)
        if self.sigma is not None:
            return self.values[int(round(max(0.0, min(n - 1.0, i + rng.gauss(0.0, float(self.sigma))))))]
        j = i + rng.choice((-1, 1))
        if not 0 <= j < n:
            j = 2 * i - j
        return self.values[j]


@dataclass(frozen=True)
class Constant(DimensionType):
    """A fixed value passed to every evaluation."""

    value: Value

    kind: ClassVar[str] = "constant"
    free: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _require_finite(self.value, "value")

    def sample(self, rng: random.Random) -> Value:
        return self.value

    def contains(self, value: Any) -> bool:
        return value == self.value

    def holds_as_is(self, value: Any) -> bool:
        return type(value) is type(self.value) and value == self.value

    def to_unit(self, value: Any) -> float:
        return 0.5

    def from_unit(self, u: float) -> Value:
        return self.value

    def grid(self, n: int) -> list[Value]:
        return [self.value]

    def to_spec(self) -> dict[str, Any]:
        return {"type": self.kind, "value": self.value}

    @property
    def is_single(self) -> bool:
        return True

    @property
    def first(self) -> Value:
        return self.value

    def encode(self, value: Any) -> Any:
        return value

    def decode(self, x: Any) -> Value:
        return self.value

    def mutate(self, value: Any, rng: random.Random) -> Value:
        return self.value


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: the most values (list items, counted nested) and characters of text a space may hold, so that the
#: workflow.yaml written for it stays well under the size limit of files read back
MAX_VALUES = 100_000
MAX_TEXT = 1_000_000


def _extent(value: Any) -> tuple[int, int]:
    """(values, characters of text) in ``value``, lists and dicts counted through."""
    items = chars = 0
    stack = [value]
    while stack:
        item = stack.pop()
        items += 1
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
    return items, chars


#: integers a space may hold: 64-bit, as SQLite, R, numpy and the store's JSON codec hold them
INT_RANGE = (-(2**63), 2**63 - 1)


def _require_int_range(value: int, what: str) -> None:
    if not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise ValueError(
            f"{what} must not hold {value!r}: integers must fit in 64 bits ({INT_RANGE[0]} to {INT_RANGE[1]})"
        )


def _require_finite(value: Any, what: str) -> None:
    """Refuse NaN and infinities anywhere in ``value`` (they cannot be compared or stored as JSON),
    and integers beyond 64 bits."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{what} must not hold {item!r} (NaN and infinities cannot be compared or stored as JSON)")
        if type(item) is int:
            _require_int_range(item, what)
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())


def _lookup_key(value: Any) -> Any:
    """A dict key that matches exactly when :func:`_same` does (``None`` for unhashable values):
    booleans apart from numbers, ``2`` equal to ``2.0``."""
    try:
        hash(value)
    except TypeError:
        return None
    return (type(value) is bool, value)


def _same(a: Any, b: Any) -> bool:
    """Equality that keeps ``True`` apart from ``1`` but lets ``2`` match ``2.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


Dimension = Int | Float | Categorical | Ordered | Constant

_Entry = TypeVar("_Entry")


def registered(registry: Mapping[type, _Entry], dim: Any) -> _Entry:
    """The entry of a per-type ``registry`` for ``dim``: its own type's, else its nearest base class's."""
    for cls in type(dim).__mro__:
        if cls in registry:
            return registry[cls]
    raise TypeError(f"unsupported dimension {dim!r}")


@dataclass(frozen=True)
class Space:
    """An ordered mapping of parameter names to dimensions.

    An ``open`` space (a sweep over a CANDLE points file, "UPF") lets a point leave out
    parameters (the model's defaults apply) and carry keys it does not list, passed on as
    they are; the parameters it lists are checked and typed when present. It may list none.
    """

    dimensions: Mapping[str, Dimension] = field(default_factory=dict)
    open: bool = False

    def __post_init__(self) -> None:
        if not self.dimensions and not self.open:
            raise SpaceError("space", "needs at least one parameter")
        object.__setattr__(self, "dimensions", dict(self.dimensions))
        object.__setattr__(self, "_names", list(self.dimensions))
        object.__setattr__(self, "_items", tuple(self.dimensions.items()))
        items, chars = _extent([getattr(d, "values", getattr(d, "value", None)) for d in self.dimensions.values()])
        if items > MAX_VALUES or chars > MAX_TEXT:
            raise SpaceError(
                "space",
                f"holds {items:,} values and {chars:,} characters of text; the limits are "
                f"{MAX_VALUES:,} values and {MAX_TEXT:,} characters",
            )

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
        return {k: d for k, d in self.dimensions.items() if d.free}

    @property
    def constants(self) -> dict[str, Value]:
        """The values of the dimensions optimizers do not search (constants)."""
        return {k: d.first for k, d in self.dimensions.items() if not d.free}

    def sample(self, rng: random.Random) -> dict[str, Value]:
        return {name: dim.sample(rng) for name, dim in self.dimensions.items()}

    def contains(self, point: Mapping[str, Any]) -> bool:
        return set(point) == set(self.dimensions) and all(
            dim.contains(point[name]) for name, dim in self.dimensions.items()
        )

    def opened(self) -> Space:
        """This space, open (see the class docstring)."""
        return Space(self.dimensions, open=True)

    def validate(self, point: Mapping[str, Any]) -> dict[str, Value]:
        """Return ``point`` as plain Python values, or raise ``SpaceError`` naming the bad key."""
        if self.open:
            return self._validate_open(point)
        if type(point) is dict and list(point) == self._names:  # type: ignore[attr-defined]  # set in __post_init__  # the common case, checked quickly
            for name, dim in self._items:  # type: ignore[attr-defined]  # set in __post_init__
                if not dim.holds_as_is(point[name]):
                    break
            else:
                return point.copy()
        return self._validate(point)

    def _validate(self, point: Mapping[str, Any]) -> dict[str, Value]:
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

    def _validate_open(self, point: Mapping[str, Any]) -> dict[str, Any]:
        """Constants first, then the point's keys in its order: listed ones checked, others as given."""
        clean: dict[str, Any] = dict(self.constants)
        for name, value in point.items():
            if not isinstance(name, str):
                raise SpaceError(repr(name), "parameter names must be strings")
            dim = self.dimensions.get(name)
            value = plain_value(value)
            if dim is not None:
                if type(value) is int and type(dim) is Float:
                    value = float(value)
                if not dim.contains(value):
                    raise SpaceError(name, f"value {value!r} is outside {dim}")
            else:
                try:
                    _require_finite(value, "the value")  # what the store's JSON holds exactly
                except ValueError as exc:
                    raise SpaceError(name, str(exc)) from None
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
        return {
            name: dim.from_unit(next(free_coords)) if dim.free else dim.first for name, dim in self.dimensions.items()
        }
