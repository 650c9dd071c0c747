"""One exception root (issue 29): every error emews defines derives from ``EmewsError``.

    python -m pytest -q tests/core/test_error_root.py

Every module of ``emews`` (and of the optimizers and objectives shipped inside it, as
``tests/test_layers.py`` lists them) is imported and each exception class it defines is checked;
the ``BaseException`` ones are the few that must get past an objective's ``except Exception``,
listed below with the reason. A second, syntactic check covers classes a module defines where
importing cannot see them (inside a function) and modules whose optional packages are missing.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import inspect

from test_layers import modules

from emews.core.errors import EmewsError

#: the ``BaseException`` subclasses emews defines on purpose, and why
SIGNALS = {
    "emews.runtime.interrupt.Interrupted": "a stop signal arrived (SIGINT, SIGTERM)",
    "emews.runtime.interrupt.WalltimeReached": "the run stops itself at the walltime margin (an Interrupted)",
    "emews.runtime.interrupt.LauncherEnded": "the job's launching process died: its parent-death signal (an Interrupted)",
    "emews.runtime.inline._TaskTimedOut": "the task timer fired inside the objective",
    "emews.training.messages.LinkClosed": "the task is abandoned while it waits for the optimizer rank",
}
#: builtin exception names: a class whose bases are only these is outside the root
BUILTIN_ERRORS = {
    name for name, value in vars(builtins).items() if inspect.isclass(value) and issubclass(value, BaseException)
}


@functools.cache
def defined_exceptions() -> tuple[dict[str, type[BaseException]], list[str]]:
    """Every exception class defined by an emews module, by qualified name; and the modules that
    cannot be imported here because a package they need is missing."""
    found: dict[str, type[BaseException]] = {}
    missing = []
    for name in sorted(modules()):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] == "emews":
                raise
            missing.append(f"{name} (needs {exc.name})")
            continue
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return found, missing


def test_every_error_derives_from_emews_error() -> None:
    found, _ = defined_exceptions()
    outside = sorted(
        name for name, cls in found.items() if issubclass(cls, Exception) and not issubclass(cls, EmewsError)
    )
    assert not outside, f"not an EmewsError: {', '.join(outside)}"
    assert len(found) > 30  # the walk saw the package, not an empty list


def test_the_base_exceptions_are_the_documented_signals() -> None:
    found, missing = defined_exceptions()
    signals = {name for name, cls in found.items() if not issubclass(cls, Exception)}
    assert signals <= set(SIGNALS), f"BaseException, not listed in SIGNALS: {', '.join(sorted(signals - set(SIGNALS)))}"
    for name in signals:
        doc = inspect.getdoc(found[name]) or ""
        assert "BaseException" in doc, f"{name}'s docstring does not say why it is a BaseException"
    if not missing:
        assert signals == set(SIGNALS)  # the list holds no class that is gone


def test_no_class_derives_from_builtin_errors_alone() -> None:
    """Also inside functions and in modules not importable here: bases that are all builtin
    exceptions (``class X(ValueError)``) leave the root."""
    allowed = {name.rpartition(".")[2] for name in SIGNALS} | {"EmewsError"}
    wrong = []
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or node.name in allowed or not node.bases:
                continue
            names = [base.id if isinstance(base, ast.Name) else None for base in node.bases]
            if all(name in BUILTIN_ERRORS for name in names):
                wrong.append(f"{module}.{node.name}({', '.join(names)})")
    assert not wrong, f"not an EmewsError: {', '.join(wrong)}"
