"""CANDLE Supervisor's GA parameter files (``workflows/GA/data/*.json``: a JSON list of parameter
objects with ``name``, ``type``, bounds or values, ``sigma``, ``element_type``) read as a
:class:`~emews.core.space.Space`, anything odd refused with what is allowed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from emews.core.errors import brief
from emews.core.space import Categorical, Constant, Dimension, Float, Int, Ordered, Space, SpaceError, Value, is_number
from emews.core.textfiles import read_text


def load_candle_json(path: str | Path) -> Space:
    """Load a CANDLE Supervisor GA parameter file (a JSON list of parameter objects)."""
    path = Path(path)
    if path.suffix.lower() == ".r":  # mlrMBO's makeParamSet (Supervisor's workflows/mlrMBO/data/*.R)
        raise SpaceError(
            "space.file",
            f"{path} is an R parameter set, which emews does not read: write its parameters as the "
            "workflow's space: (YAML, docs/coming-from-candle.md) or give a GA JSON file",
        )
    try:
        entries = json.loads(read_text(path), object_pairs_hook=_unique_keys)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a repeated key, deep nesting
        raise SpaceError("space.file", f"{path} is not valid JSON: {exc or 'nested too deeply'}") from None
    if not isinstance(entries, list):
        raise SpaceError("space.file", f"{path} must hold a JSON list of parameter objects")
    dims: dict[str, Dimension] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SpaceError(f"[{i}]", f"expected a parameter object, got {brief(entry)}")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise SpaceError(f"[{i}]", f"'name' must be a non-empty string, got {brief(name)}")
        if name in dims:
            raise SpaceError(name, f"parameter {name!r} is defined twice (entries {list(dims).index(name)} and {i})")
        try:
            dims[name] = candle_dimension(entry)
        except (ValueError, TypeError) as exc:
            raise SpaceError(name, str(exc)) from exc
    return Space(dims)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(f"key {repeated[0]!r} is given twice in one object")
    return dict(pairs)


CANDLE_TYPES = ("int", "float", "categorical", "ordered", "logical", "constant")
_COMMON_KEYS = ("name", "type", "comment", "description")
CANDLE_KEYS = {
    "int": ("lower", "upper", "sigma", "log"),
    "float": ("lower", "upper", "sigma", "log"),
    "categorical": ("values", "element_type", "sigma"),
    "ordered": ("values", "element_type", "sigma"),
    "logical": (),
    "constant": ("value",),
}
_REQUIRED = {
    "int": ("lower", "upper"),
    "float": ("lower", "upper"),
    "categorical": ("values",),
    "ordered": ("values",),
    "logical": (),
    "constant": ("value",),
}


def candle_dimension(entry: Mapping[str, Any]) -> Dimension:
    """Build one dimension from a CANDLE GA JSON entry; anything odd is a ValueError saying what is allowed."""
    kind = entry.get("type")
    if not isinstance(kind, str) or kind not in CANDLE_KEYS:
        raise ValueError(f"unknown type {brief(kind)}; allowed: {', '.join(CANDLE_TYPES)}")
    allowed = (*_COMMON_KEYS, *CANDLE_KEYS[kind])
    unknown = [k for k in entry if k not in allowed]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} for type {kind}; allowed: {', '.join(allowed)}")
    missing = [k for k in _REQUIRED[kind] if k not in entry]
    if missing:
        raise ValueError(f"missing key {missing[0]!r}")
    log = entry.get("log", False)
    if not isinstance(log, bool):
        raise ValueError(f"log must be true or false, got {log!r}")
    if kind == "int":
        return Int(
            _integral(entry["lower"], "lower"), _integral(entry["upper"], "upper"), log, _sigma(entry.get("sigma"))
        )
    if kind == "float":
        return Float(_real(entry["lower"]), _real(entry["upper"]), log, _sigma(entry.get("sigma")))
    if kind in ("categorical", "ordered"):
        if not isinstance(entry["values"], list):
            raise ValueError(f"values must be a list, got {brief(entry['values'])}")
        values = tuple(_cast_element(v, entry.get("element_type")) for v in entry["values"])
        return Categorical(values) if kind == "categorical" else Ordered(values, _sigma(entry.get("sigma")))
    if kind == "logical":
        return Categorical((True, False))
    return Constant(entry["value"])


def _integral(value: Any, what: str) -> int:
    """An int bound: ``3`` or ``3.0``; ``0.7`` is refused rather than truncated."""
    if is_number(value) and float(value).is_integer():
        return int(value)
    raise ValueError(f"{what} must be an integer, got {value!r}")


def _real(value: Any) -> Any:
    return float(value) if is_number(value) else value  # anything else is refused by Float


def _sigma(value: Any) -> float | None:
    """``sigma`` as a number; a numeric string such as ``"0.000495"`` (seen in real files) is converted."""
    if value is None or is_number(value):
        return value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                return number
    raise ValueError(f"sigma must be a number, got {value!r}")


def _logical(value: Any) -> bool:
    """Supervisor's ``element_type: logical``: ``true``/``false`` (any case, or 1/0) as a bool."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "t", "yes"):
        return True
    if text in ("false", "0", "f", "no"):
        return False
    raise ValueError(value)


def _cast_element(value: Any, element_type: str | None) -> Value:
    casts: dict[str | None, Callable[[Any], Any]] = {
        "int": lambda v: _integral(int(v) if isinstance(v, str) else v, "each value"),
        "float": float,
        "string": str,
        "str": str,
        "logical": _logical,
        None: lambda v: v,
    }
    if not isinstance(element_type, (str, type(None))) or element_type not in casts:
        raise ValueError(f"unknown element_type {brief(element_type)}; allowed: int, float, string, logical")
    try:
        return casts[element_type](value)
    except (TypeError, ValueError):
        raise ValueError(f"value {value!r} is not of element_type {element_type}") from None
