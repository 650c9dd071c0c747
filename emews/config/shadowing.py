"""Files of the user's that would hide a module emews' processes import (``random.py``, ``emews.py``).

A local run's ranks start as ``python -m emews`` in the folder it was launched from, and the
objective's folder goes first on ``sys.path`` where the objective is imported: a ``random.py`` or
``yaml.py`` there replaces Python's own module for every later import (``tempfile`` imports
``random``), and an ``emews.py`` replaces emews itself, so the ranks run the user's file and the
job ends at once. :func:`shadowing_file` finds such a file before anything starts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

#: modules every rank imports that ``emews check`` may not have imported yet
RANK_MODULES = frozenset({"emews", "mpi4py", "cloudpickle", "multiprocessing", "tempfile", "random"})


#: modules Python imports while it starts, before any folder of the user's is on ``sys.path``: a
#: user's ``site.py`` or ``os.py`` hides nothing (later imports find the module already loaded)
STARTUP_MODULES = frozenset(
    {"abc", "builtins", "codecs", "encodings", "genericpath", "io", "marshal", "os", "posix", "posixpath", "site"}
    | {"sitecustomize", "stat", "sys", "usercustomize", "zipimport"}
)


def imported_names() -> frozenset[str]:
    """The top-level modules this process has imported, and those every rank imports (less the
    ones Python itself loads at its start)."""
    names = RANK_MODULES | {name.partition(".")[0] for name in sys.modules if not name.startswith("_")}
    return names - STARTUP_MODULES


def shadowing_file(folders: Iterable[Path], names: frozenset[str] | None = None) -> tuple[Path, str] | None:
    """The first ``NAME.py`` (or package folder ``NAME/``) in ``folders`` whose ``NAME`` is one of
    ``names`` (default :func:`imported_names`), with that name; ``None`` when there is none."""
    names = imported_names() if names is None else names
    for folder in dict.fromkeys(folder.resolve() for folder in folders):
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            name = entry.stem if entry.suffix == ".py" else entry.name
            package = entry.is_dir() and (entry / "__init__.py").is_file()
            if (
                name in names
                and (package or (entry.suffix == ".py" and entry.is_file()))
                and not _is_loaded(entry, name)
            ):
                return entry, name
    return None


def _is_loaded(entry: Path, name: str) -> bool:
    """Whether ``entry`` is the very module this process imported as ``name`` (a clone's ``emews/``)."""
    origin = getattr(sys.modules.get(name), "__file__", None)
    if origin is None:
        return False
    loaded = Path(origin).resolve()
    return loaded == entry.resolve() or loaded.parent == entry.resolve()


def shadowing_problem(folders: Iterable[Path]) -> str | None:
    """One line saying which file hides which module, and what to do; ``None`` when none does."""
    found = shadowing_file(folders)
    if found is None:
        return None
    path, name = found
    what = "emews itself" if name == "emews" else f"Python's module {name!r}"
    also = " (`python -m emews` run in its folder runs it too: use `emews`)" if name == "emews" else ""
    return (
        f"{path} hides {what} from emews' processes (they import from its folder first, "
        f"and would load it instead){also}: rename it"
    )
