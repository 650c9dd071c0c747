"""CANDLE's own conventions for a command objective (``params: candle``), so that a CANDLE
Benchmarks model runs unchanged.

CANDLE's ``finalize_parameters`` reads one ``[Global_Params]`` file (``--config_file``, else the
benchmark's default model file), then its command line with ``parse_args`` (an unknown flag is an
error); the command line wins. So each task gets a file holding the model's defaults and the point
(:func:`write_config`: keys the model does not define are tolerated there, CANDLE only warns): the
model reads the point as it reads its own defaults, a single number as a number even where its
option takes ``nargs`` (P3B3's ``filter_sets``). Only the options of CANDLE's own that have a
default of their own, which hides the file's value on CANDLE before 2022, follow as flags
(:func:`model_flags`). A string of numbers (``"500 100 50"``, the lists
of Supervisor's GA files) is a list (:func:`candle_value`). An EQ/Py ME's point whose parameter
string is a JSON object (Supervisor's ``deap_ga.py``) is that object (:func:`supervisor_point`).
A UPF line's ``id`` is never a flag
(``{id}`` in the command passes it on). A string holding a Python expression (``'2**10'``), which
CANDLE evaluates in its default model file only, is refused (:func:`expression_problem`).
"""

from __future__ import annotations

import ast
import json
import math
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from emews.core.textfiles import write_atomic
from emews.objective.model_defaults import python_value

#: the per-task file CANDLE reads through ``--config_file``: the model's defaults and the point
CONFIG_FILE = "candle_params.txt"
#: the option that names it, as CANDLE's ``common/default_utils.py`` defines it
CONFIG_OPTION = "--config_file"
#: the ``output_dir`` a CANDLE model gets for ``result: output_dir``: CANDLE reads "." as its working
#: directory (the task's run dir) and makes any other path OUTPUT_DIR/EXPERIMENT_ID/RUN_ID
OUTPUT_DIR = "."
#: CANDLE's common options with a default of their own, the same flag in its ``default_utils.py``
#: (before 2022, where that default hides the file's value) and ``parsing_utils.py`` (since)
CANDLE_DEFAULTED = frozenset(
    {
        "shuffle",
        "train_bool",
        "experiment_id",
        "run_id",
        "profiling",
        "verbose",
        "ckpt_checksum",
        "ckpt_keep_mode",
        "ckpt_save_best",
        "ckpt_save_best_metric",
        "ckpt_save_interval",
        "ckpt_skip_epochs",
    }
)


def candle_value(value: Any, default: Any = None) -> Any:
    """``value`` as a CANDLE model takes it: a string of numbers is a list of them when it holds
    more than one or the model's default is a list (Supervisor's ``format_params`` rule); any other
    single value is a one-item list where the default is a list (Combo's ``cell_features: mirna``,
    as Supervisor's ``model_runner`` makes it); a string for a boolean or numeric default is read as
    that type, as CANDLE's ``str2bool`` and ``type=int`` read a flag (cp1's ``"residual": "0"``)."""
    if isinstance(value, str):
        tokens = value.split()
        numbers = [_number(token) for token in tokens]
        if tokens and None not in numbers and (len(tokens) > 1 or isinstance(default, list)):
            return numbers
        typed = _as_type_of(value, default)
        if typed is not None:
            return typed
    if isinstance(default, list) and value is not None and not isinstance(value, (list, tuple)):
        return [value]
    return value


def expression_problem(value: Any, syntax: Literal["YAML", "JSON"] = "YAML") -> str | None:
    """Why ``value``, a string holding a Python expression (``'2**10'``, ``'[64, 32]'``), cannot go
    to a CANDLE model: the model would get that text, where the same text in its default model file
    is evaluated (CANDLE ``eval``s the file's values). ``None`` for any other value: a word, a number
    as text, Supervisor's list as a string of numbers (``'500 100 50'``). ``syntax``: the file's
    (a workflow's YAML, a UPF line's JSON), in which the value to write instead is spelt."""
    if not isinstance(value, str) or _number(value.strip()) is not None:
        return None
    try:
        if isinstance(ast.parse(value.strip(), mode="eval").body, ast.Constant):
            return None
        evaluated = python_value(value)
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # NotAValue is a ValueError
        return None
    spell = _as_json if syntax == "JSON" else repr
    write = (
        f"a {syntax} list ({spell(list(evaluated))}) or Supervisor's string of numbers "
        f"({spell(' '.join(map(str, evaluated)))})"
        if isinstance(evaluated, (list, tuple))
        else spell(evaluated)
    )
    return (
        f"{value!r} is a Python expression as text, which the model would get as that text (CANDLE "
        f"evaluates expressions in its default model file only); write its value: {write}"
    )


def _as_json(value: Any) -> str:
    """``value`` as JSON writes it (``true``, ``"text"``); ``repr`` for what JSON cannot hold."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


#: the one key of an EQ/Py ME's point: its parameter string (``emews.optimizers.eqpy``)
PARAMETER_STRING = "params"


def supervisor_point(point: Mapping[str, Any]) -> Mapping[str, Any]:
    """``point`` as Supervisor's ``model_runner`` takes its parameters: an EQ/Py ME's parameter
    string that is a JSON object (Supervisor's ``deap_ga.py`` puts each individual as ``json.dumps``)
    is that object, as ``runner_utils.init`` reads it (``json.loads``); any other point as it is."""
    text = point.get(PARAMETER_STRING) if len(point) == 1 else None
    if not isinstance(text, str) or not text.lstrip().startswith("{"):
        return point
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        return point
    return found if isinstance(found, dict) else point


def candle_point(point: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Each value of ``point`` (:func:`supervisor_point`) as :func:`candle_value` reads it, the
    model's defaults as the hint."""
    return {name: candle_value(value, defaults.get(name)) for name, value in supervisor_point(point).items()}


def model_flags(point: Mapping[str, Any], skip: Collection[str] = ()) -> dict[str, Any]:
    """The point's values that go as flags: those of :data:`CANDLE_DEFAULTED` (not ``skip``); the
    others reach the model through the file alone, as its defaults do."""
    return {name: value for name, value in point.items() if name in CANDLE_DEFAULTED and name not in skip}


#: the ids CANDLE's parser puts below an ``output_dir`` other than ``.`` (``--experiment_id``, ``--run_id``)
CANDLE_IDS = (("--experiment_id", "EXP000"), ("--run_id", "RUN000"))


def _last_flag(argv: Sequence[str], option: str) -> str | None:
    """The value of the last ``option VALUE`` or ``option=VALUE`` on ``argv`` (argparse's: the last wins)."""
    found = None
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith(option + "="):
            found = arg[len(option) + 1 :]
    return found


def flagged_output_dir(argv: Sequence[str], cwd: Path) -> Path | None:
    """Where a CANDLE model run as ``argv`` in ``cwd`` writes: the ``--output_dir`` it is given,
    as CANDLE's ``directory_from_parameters`` makes it (``.`` or ``./``: ``cwd``; any other path:
    ``PATH/EXPERIMENT_ID/RUN_ID``, the ids of the last ``--experiment_id`` and ``--run_id`` on
    ``argv``, ``EXP000`` and ``RUN000`` without them). ``None``: no ``--output_dir`` on ``argv``."""
    given = _last_flag(argv, "--output_dir")
    if given is None:
        return None
    if given in (".", "./"):
        return cwd
    ids = [_last_flag(argv, option) or default for option, default in CANDLE_IDS]
    return cwd.joinpath(given, *ids)


#: where CANDLE's library (``candle``: candle_lib, which Benchmarks' models import since 2022) roots a
#: model's output: ``$CANDLE_OUTPUT_DIR/MODEL_NAME/OUTPUT_DIR/EXPERIMENT_ID/RUN_ID`` (else
#: ``$CANDLE_DATA_DIR/...``, one folder for every run of the model), its checkpoints (``ckpt_directory``,
#: default ``OUTPUT_DIR/ckpts``) and ``ckpt_restart_mode`` restarts included. Set to each task's run dir,
#: as Supervisor's ``model.sh`` does: every task writes and restarts inside its own.
OUTPUT_ROOT_VARIABLE = "CANDLE_OUTPUT_DIR"
#: candle_lib's ``output_dir`` part when a model has none (``directory_tree_from_parameters``)
LIB_OUTPUT_DIR = "Output"


def library_output_dir(argv: Sequence[str], params: Mapping[str, Any], run_dir: Path) -> Path | None:
    """Where a model on CANDLE's library writes, run as ``argv`` with ``params`` and
    :data:`OUTPUT_ROOT_VARIABLE` set to ``run_dir``: ``RUN_DIR/MODEL_NAME/OUTPUT_DIR/EXPERIMENT_ID/RUN_ID``
    (the ids: the last ``--experiment_id`` / ``--run_id`` on ``argv``, else ``params``', else
    ``EXP000`` / ``RUN000``). ``None``: no ``model_name``, or a path that leaves the run dir."""
    model = params.get("model_name")
    if not isinstance(model, str) or not model:
        return None
    ids = [_last_flag(argv, option) or str(params.get(option[2:]) or default) for option, default in CANDLE_IDS]
    found = Path(os.path.normpath(run_dir.joinpath(model, str(params.get("output_dir") or LIB_OUTPUT_DIR), *ids)))
    return found if found != run_dir and found.is_relative_to(run_dir) else None


def write_config(path: Path, params: Mapping[str, Any]) -> Path:
    """``params`` as a ``[Global_Params]`` file of Python literals, which CANDLE ``eval``s."""
    lines = ["[Global_Params]", *(f"{name} = {_literal(value)}" for name, value in params.items())]
    write_atomic(path, [("\n".join(lines) + "\n").encode()], durable=False)  # members read it as others write
    return path


def _literal(value: Any) -> str:
    return repr(value).replace("%", "%%")  # configparser's interpolation reads "%" as "%%"


def _as_type_of(text: str, default: Any) -> bool | int | float | None:
    """``text`` as the type of a boolean or numeric ``default`` (``None`` when it is not one)."""
    if isinstance(default, bool):
        return _BOOLEANS.get(text.strip().lower())
    if isinstance(default, (int, float)):
        return _number(text.strip())
    return None


#: what CANDLE's ``str2bool`` reads (common/helper_utils.py)
_BOOLEANS = {
    "yes": True,
    "true": True,
    "t": True,
    "y": True,
    "1": True,
    "no": False,
    "false": False,
    "f": False,
    "n": False,
    "0": False,
}


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
