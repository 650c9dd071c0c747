"""CANDLE model defaults: a ``*_default_model.txt`` file (INI, ``[Global_Params]``) as a dict.

CANDLE benchmarks keep every hyperparameter of a model in such a file; a sweep over three of
them still needs the others. Values are Python literals (``[128, 64]``, ``'relu'``, ``True``),
read with :func:`ast.literal_eval` (never ``eval``); a value that is not a literal stays a string,
but one that is no Python at all (``[1,``) or names what Python does not know (``relu``, unquoted)
is refused, as CANDLE's ``eval`` stops there (SyntaxError, NameError).
Every section is read (``[Global_Params]`` first, as CANDLE's own parser merges them).
"""

from __future__ import annotations

import ast
import builtins
import configparser
from pathlib import Path
from typing import Any

from emews.core.errors import EmewsError


class ModelDefaultsError(EmewsError, ValueError):
    """The defaults file cannot be read; the message names the file and the line or key."""


def read_model_defaults(path: str | Path) -> dict[str, Any]:
    """The parameters of a CANDLE default model file, in file order."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keep the keys' case
    try:
        with open(path, encoding="utf-8") as fh:
            parser.read_file(fh)
    except OSError as exc:
        raise ModelDefaultsError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except configparser.Error as exc:
        raise ModelDefaultsError(
            f"{path}: not an INI file with [Global_Params]: {exc.message.splitlines()[0]}"
        ) from None
    sections = sorted(parser.sections(), key=lambda name: name != "Global_Params")
    if not sections:
        raise ModelDefaultsError(f"{path}: no section; expected [Global_Params] followed by name = value lines")
    return {key: _value(path, name, key, value) for name in sections for key, value in parser.items(name)}


def _value(path: str | Path, section: str, key: str, text: str) -> Any:
    """``text`` as :func:`literal` reads it; text that is not a Python expression, or one naming
    what is no Python builtin (a bare word), is a :class:`ModelDefaultsError` naming the file,
    section and key (CANDLE's own parser evaluates every value and stops there with a SyntaxError
    or a NameError)."""
    where = f"{path}: [{section}] {key} = {text.strip()}"
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ModelDefaultsError(
            f"{where}: not a Python value ({exc.msg}), which CANDLE "
            "reads each value as; a list as [1, 2], a string quoted ('relu')"
        ) from None
    unknown = [node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and not hasattr(builtins, node.id)]
    if unknown:
        raise ModelDefaultsError(
            f"{where}: {unknown[0]} is no Python value (CANDLE evaluates each value and stops here "
            f"with a NameError); quote a string ('{unknown[0]}')"
        )
    return literal(text)


def literal(text: str) -> Any:
    """A Python literal if ``text`` is one (numbers, lists, quoted strings, booleans, None), else the text."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text.strip()
