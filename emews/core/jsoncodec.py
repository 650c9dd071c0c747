"""JSON of the points of a space on the hot path (the store, the CSV export): orjson, with the
standard library where orjson declines (a string with lone surrogates).

A point holds plain values that :class:`~emews.core.space.Space` has validated: no NaN or infinity
(orjson would write ``null``) and no integer beyond 64 bits (orjson would read it back as a float).
Anything else (metrics, which may hold NaN) goes through the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson

from emews.core.results import utf8_text

_std_encode = json.JSONEncoder(separators=(",", ":")).encode


def dumps_point(point: Mapping[str, Any]) -> str:
    """Compact JSON of a validated point."""
    try:
        return orjson.dumps(point).decode()
    except TypeError:
        return _std_encode(point)


def loads_point(text: str | bytes) -> Any:
    """Parse what :func:`dumps_point` wrote."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


_std_decode = json.JSONDecoder().decode


def loads_metrics(text: str) -> Any:
    """Parse a stored metrics object (the standard library's JSON, NaN allowed), its strings and keys
    UTF-8-safe: a store written before metrics were escaped holds a non-UTF-8 file name's lone
    surrogates as ``\\udcXX`` JSON escapes, which would fail the CSV, the terminal and the report."""
    value = _std_decode(text)
    return _utf8_safe(value) if "\\u" in text else value


def _utf8_safe(value: Any) -> Any:
    """``value`` with the lone surrogates of its strings (dict keys too) as their ``\\udcXX`` escape."""
    if isinstance(value, str):
        return utf8_text(value)
    if isinstance(value, list):
        return [_utf8_safe(v) for v in value]
    if isinstance(value, dict):
        return {utf8_text(k): _utf8_safe(v) for k, v in value.items()}
    return value
