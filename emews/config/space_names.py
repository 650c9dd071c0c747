"""What Ray Tune and Optuna call the parts of a ``space`` entry, and what to write here instead:
their sampling functions written as a ``type`` (``loguniform``, ``choice``, ``randint``) and a
step (Optuna's ``step``, hyperopt's and Ray Tune's ``q``), each said in one line by ``emews check``.
Their key names (``low``, ``high``, ``choices``) are the parameter models' ``other_names``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: the types a space entry may have (the workflow's parameter models)
TYPES = ("int", "float", "categorical", "ordered", "constant")
#: a type written as another tool's sampling function -> the entry that does its work here
OTHER_TYPES = {
    "uniform": "Ray Tune's: {type: float}",
    "loguniform": "Ray Tune's: {type: float, log: true}",
    "randint": "Ray Tune's: {type: int} (whose upper is included: randint(16, 513) is lower: 16, upper: 512)",
    "lograndint": "Ray Tune's: {type: int, log: true} (whose upper is included)",
    "choice": "Ray Tune's: {type: categorical}",
    "grid_search": "Ray Tune's: {type: categorical} (or ordered) and optimizer: {name: sweep}",
    **{
        q: "Ray Tune's: a stepped range is its values listed, {type: ordered, values: [...]}"
        for q in ("quniform", "qloguniform", "qrandint", "qlograndint", "qrandn")
    },
}
#: a step of a numeric range, by the key other tools give it
STEP_KEYS = ("step", "q")
#: a stepped range with more values than this is listed by its first three and its last
LISTED = 8


def other_tool_problems(entry: Mapping[str, Any]) -> list[tuple[str, str, str | None]]:
    """``(key, message, allowed)`` for each name of another tool in the space entry ``entry``:
    a type that is another tool's function (then nothing more), and a step of an int or float."""
    kind = entry.get("type")
    if isinstance(kind, str) and kind in OTHER_TYPES:
        return [("type", f"{kind!r} is {OTHER_TYPES[kind]}", ", ".join(TYPES))]
    if kind not in ("int", "float"):
        return []
    return [
        (
            key,
            "int and float have no step (Optuna's step, hyperopt's q): list the values, "
            f"{{type: ordered, values: {stepped_values(entry.get('lower'), entry.get('upper'), entry[key])}}}",
            None,
        )
        for key in STEP_KEYS
        if key in entry
    ]


def stepped_values(lower: Any, upper: Any, step: Any) -> str:
    """``[16, 32, 48, 64]`` from 16 to 64 by 16 (``[0, 10, 20, ..., 1000]`` when long), as YAML;
    ``[...]`` unless all three are finite numbers with ``step`` > 0 and ``lower`` <= ``upper``."""
    numbers = [v for v in (lower, upper, step) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(numbers) < 3 or not all(math.isfinite(v) for v in numbers) or step <= 0 or lower > upper:
        return "[...]"
    count = math.floor((upper - lower) / step + 1e-9) + 1
    whole = all(isinstance(v, int) for v in numbers)

    def value(i: int) -> str:
        return str(lower + i * step) if whole else repr(round(lower + i * step, 12))

    shown = [value(i) for i in range(count)] if count <= LISTED else [*map(value, range(3)), "...", value(count - 1)]
    return f"[{', '.join(shown)}]"
