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
