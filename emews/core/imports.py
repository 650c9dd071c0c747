"""Importing user code: a ``.py`` file by path, or a module by dotted name — one routine for
objectives and optimizers alike."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

from emews.core.errors import EmewsError


class UserImportError(EmewsError, ImportError):
    """User code named in a workflow cannot be found or fails while importing."""


_importing: list[str] = []  # the user modules being imported now, innermost last


def importing_user_code() -> bool:
    """Whether user code (an objective's or optimizer's module) is being imported right now: its
    top-level statements are running."""
    return bool(_importing)


def is_file_ref(ref: str) -> bool:
    """Whether ``ref`` names a file (``x.py`` or a path) rather than a dotted module."""
    return ref.endswith(".py") or "/" in ref


def import_user_module(ref: str, *, what: str, base_dir: Path | None = None) -> ModuleType:
    """Import ``ref``: a path to a ``.py`` file (relative ones also tried under ``base_dir``)
    or a dotted module name. A file's folder goes on ``sys.path`` so its sibling modules import;
    it is registered as ``emews_<what>_<stem>`` so pickling by reference works. ``what`` names
    the kind of code in messages ("objective", "optimizer", "trial scheduler")."""
    _importing.append(ref)
    try:
        return _import(ref, what, base_dir)
    finally:
        _importing.pop()


def _import(ref: str, what: str, base_dir: Path | None) -> ModuleType:
    if not is_file_ref(ref):
        try:
            return importlib.import_module(ref)
        except ImportError as exc:
            raise UserImportError(f"cannot import {what} module {ref!r}: {exc}") from exc
    path = Path(ref)
    if not path.is_absolute() and base_dir is not None and not path.exists():
        path = base_dir / path
    if not path.is_file():
        raise UserImportError(f"{what} file {ref} does not exist")
    name = registered_name(path, what)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserImportError(f"cannot import {ref}")
    module = importlib.util.module_from_spec(spec)
    parent = str(path.resolve().parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise UserImportError(f"importing {ref} failed: {type(exc).__name__}: {exc}") from exc
    return module


def registered_name(path: Path, what: str) -> str:
    """The name a user file is imported under (``emews_objective_model`` for an objective's
    ``model.py``): what pickle writes for the classes it defines."""
    return f"emews_{_identifier(what)}_{_identifier(path.stem)}"


def _identifier(text: str) -> str:
    """``text`` with every character that cannot be in a module name made ``_``."""
    return "".join(c if c.isalnum() else "_" for c in text)


@contextlib.contextmanager
def modules_installed(modules: Mapping[str, ModuleType]) -> Iterator[None]:
    """``modules`` in ``sys.modules`` under their names (what an ``import`` of them finds, whatever
    else is on ``sys.path``: emews' stand-ins for a protocol's package); the earlier state after."""
    before = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, earlier in before.items():
            if earlier is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = earlier
