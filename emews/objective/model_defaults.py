"""CANDLE model defaults: a ``*_default_model.txt`` file (INI, ``[Global_Params]``) as a dict.

CANDLE benchmarks keep every hyperparameter of a model in such a file; a sweep over three of
them still needs the others. Values are Python (``[128, 64]``, ``'relu'``, ``True``, ``2**10``),
which CANDLE's parser ``eval``s: :func:`python_value` gives literals and arithmetic on them the
value ``eval`` gives (``2**10`` is ``1024``) without running code; a value that needs more (a
call, a name) is refused, as is one that is no Python at all (``[1,``) or names what Python does
not know (``relu``, unquoted), where CANDLE's ``eval`` stops (SyntaxError, NameError).
Every section is read (``[Global_Params]`` first, as CANDLE's own parser merges them).
"""

from __future__ import annotations

import ast
import builtins
import configparser
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

from emews.core.errors import EmewsError


class ModelDefaultsError(EmewsError, ValueError):
    """The defaults file cannot be read; the message names the file and the line or key."""


class NotAValue(EmewsError, ValueError):
    """Python that is more than literals and arithmetic on them; ``part`` is the first such part."""

    def __init__(self, part: str, why: str = "") -> None:
        self.part = part
        super().__init__(f"{part}: {why}" if why else part)


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
    """``text`` as CANDLE's ``eval`` reads it (:func:`python_value`); text that is not a Python
    expression, one naming what is no Python builtin (a bare word) or one that needs running code
    is a :class:`ModelDefaultsError` naming the file, section and key (CANDLE's own parser
    evaluates every value and stops at the first two with a SyntaxError or a NameError)."""
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
    try:
        return _evaluate(tree.body)
    except NotAValue as exc:
        raise ModelDefaultsError(
            f"{where}: {exc} (CANDLE runs each value as Python code; emews reads literals and "
            "arithmetic on them, such as 2**10 or [2**8, 64]); write the value itself"
        ) from None


def python_value(text: str) -> Any:
    """The value Python's ``eval`` gives ``text`` when it is literals and arithmetic on them
    (``2**10`` is 1024, ``[2**8, 64]``, ``-1e-3``, ``'a' * 2``), computed without running code;
    a SyntaxError for text that is no Python, :class:`NotAValue` for any other expression."""
    return _evaluate(ast.parse(text.strip(), mode="eval").body)


#: the arithmetic :func:`python_value` computes, as Python does
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
#: the largest power (in bits) and repeated sequence (in items) computed: ``10**10**10`` would not end
_LARGEST_BITS = 1_000_000
_LARGEST_ITEMS = 1_000_000


def _evaluate(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_evaluate(item) for item in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_evaluate(k): _evaluate(v) for k, v in zip(node.keys, node.values, strict=True)}  # type: ignore[arg-type]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _computed(node, _UNARY[type(node.op)], _evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if _too_large(node.op, left, right):
            raise NotAValue(ast.unparse(node), "too large to compute")
        return _computed(node, _BINARY[type(node.op)], left, right)
    raise NotAValue(ast.unparse(node), "not a value")


def _computed(node: ast.expr, op: Callable[..., Any], *args: Any) -> Any:
    try:
        return op(*args)
    except (TypeError, ArithmeticError, ValueError) as exc:
        raise NotAValue(ast.unparse(node), f"{type(exc).__name__}: {exc}") from None


def _too_large(op: ast.operator, left: Any, right: Any) -> bool:
    """An integer power or a repeated string or list beyond :data:`_LARGEST_BITS` or :data:`_LARGEST_ITEMS`."""
    if isinstance(op, ast.Pow):
        return isinstance(left, int) and isinstance(right, int) and right * left.bit_length() > _LARGEST_BITS
    if isinstance(op, ast.Mult):
        sizes = [len(v) for v in (left, right) if isinstance(v, (str, list, tuple))]
        counts = [v for v in (left, right) if isinstance(v, int)]
        return bool(sizes and counts) and sizes[0] * counts[0] > _LARGEST_ITEMS
    return False
