"""CANDLE's own conventions for a command objective (``params: candle``), so that a CANDLE
Benchmarks model runs unchanged.

CANDLE's ``finalize_parameters`` reads one ``[Global_Params]`` file (``--config_file``, else the
benchmark's default model file), then its command line with ``parse_args`` (an unknown flag is an
error); the command line wins. So each task gets a file holding the model's defaults and the point
(:func:`write_config`: keys the model does not define are tolerated there, CANDLE only warns),
and, as flags, the point's values for the keys the defaults define (:func:`model_flags`), so that
none of CANDLE's own option defaults hides them. A string of numbers (``"500 100 50"``, the lists
of Supervisor's GA files) is a list (:func:`candle_value`). Bookkeeping keys (a UPF line's ``id``)
are never flags.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

#: the per-task file CANDLE reads through ``--config_file``: the model's defaults and the point
CONFIG_FILE = "candle_params.txt"
#: the option that names it, as CANDLE's ``common/default_utils.py`` defines it
CONFIG_OPTION = "--config_file"
#: the ``output_dir`` a CANDLE model gets for ``result: output_dir``: CANDLE reads "." as its working
#: directory (the task's run dir) and makes any other path OUTPUT_DIR/EXPERIMENT_ID/RUN_ID
OUTPUT_DIR = "."
#: keys of a point that are bookkeeping, never a model's flag (``{id}`` in the command still works)
BOOKKEEPING = frozenset({"id"})


def candle_value(value: Any, default: Any = None) -> Any:
    """``value`` as a CANDLE model takes it: a string of numbers is a list of them when it holds
    more than one or the model's default is a list (Supervisor's ``format_params`` rule)."""
    if isinstance(value, str):
        tokens = value.split()
        numbers = [_number(token) for token in tokens]
        if tokens and None not in numbers and (len(tokens) > 1 or isinstance(default, list)):
            return numbers
    return value


def candle_point(point: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Each value of ``point`` as :func:`candle_value` reads it, the model's defaults as the hint."""
    return {name: candle_value(value, defaults.get(name)) for name, value in point.items()}


def model_flags(point: Mapping[str, Any], defaults: Mapping[str, Any], skip: Collection[str] = ()) -> dict[str, Any]:
    """The point's values that go as flags: keys the model's defaults define, not bookkeeping, not ``skip``."""
    return {
        name: value
        for name, value in point.items()
        if name in defaults and name not in BOOKKEEPING and name not in skip
    }


def write_config(path: Path, params: Mapping[str, Any]) -> Path:
    """``params`` as a ``[Global_Params]`` file of Python literals, which CANDLE ``eval``s."""
    lines = ["[Global_Params]", *(f"{name} = {_literal(value)}" for name, value in params.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _literal(value: Any) -> str:
    return repr(value).replace("%", "%%")  # configparser's interpolation reads "%" as "%%"


def _number(token: str) -> int | float | None:
    try:
        return int(token)
    except ValueError:
        pass
    try:
        number = float(token)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
