"""How an objective module's functions are called, and whether they can be.

``run`` is called as ``run(params)``, or as ``run(params, context)`` when it takes two positional
arguments; ``setup()`` with none, or as ``setup(ctx)`` (the worker's context) when it takes one;
``teardown()`` with none.
:func:`uncallable` says, at load (so ``emews check`` says it), when a function's signature allows
neither call (``def run():``, ``def run(a, b, c):``), instead of every evaluation failing with a
TypeError raised in emews' own call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def positional_count(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` takes (2 for ``*args``; 1 when it cannot be told)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def uncallable(fn: Callable[..., Any], name: str, arguments: int, calls: str) -> str | None:
    """Why ``fn`` cannot be called with ``arguments`` positional arguments (``calls``: the calls
    emews makes, as the message shows them); ``None`` when it can, or when its signature is unknown."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*range(arguments))
    except TypeError:
        return f"{name}{signature} cannot be called as {calls}"
    return None


def run_problem(fn: Callable[..., Any], name: str) -> str | None:
    """Why the objective function ``name`` cannot be called as emews calls it."""
    arguments = 2 if positional_count(fn) >= 2 else 1
    return uncallable(fn, name, arguments, f"{name}(params) or {name}(params, context)")


def hook_problem(fn: Callable[..., Any], name: str) -> str | None:
    """Why the module's ``setup`` or ``teardown`` cannot be called as emews calls it."""
    if name == "setup":
        return uncallable(fn, name, min(positional_count(fn), 1), "setup() or setup(ctx)")
    return uncallable(fn, name, 0, f"{name}()")
