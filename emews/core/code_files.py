"""What code an answer depended on, without importing anything: the files of the user's modules this
process loaded, an installed package's identity, and a fingerprint of files and folders that says
when one of them changed (:mod:`emews.core.check_cache` keeps a check's answer while none did)."""

from __future__ import annotations

import hashlib
import importlib.util
import site
import sys
import sysconfig
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from emews.core.imports import is_file_ref

#: a file or folder that is not there (or cannot be read): its fingerprint
ABSENT = "absent"


@cache
def _installed_roots() -> tuple[str, ...]:
    """The folders of the Python installation: its standard library and site-packages (the user's
    too). A module there is a package's, known by its version, not the user's code. Not the prefixes:
    a project in /usr/src/app is the user's under a Python whose prefix is /usr."""
    roots = {sysconfig.get_paths().get(name, "") for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(getattr(site, "getsitepackages", list)())
    roots.add(site.getusersitepackages() or "")
    return tuple(sorted({str(Path(root).resolve()) for root in roots if root}))


def is_installed(path: Path) -> bool:
    """Whether ``path`` lies in the Python installation (stdlib, site-packages) rather than the user's files."""
    text = str(path.resolve())
    return any(text == root or text.startswith(root.rstrip("/") + "/") for root in _installed_roots())


def user_module_files() -> list[Path]:
    """The files of the modules loaded in this process that are the user's: not emews' own, not the
    standard library's or an installed package's (an objective's or generator's file and the helper
    modules they import, wherever they are)."""
    files: set[Path] = set()
    for name, module in list(sys.modules.items()):
        if name in ("__main__", "__mp_main__", "emews") or name.startswith("emews."):  # the program, emews
            continue
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file:
            continue
        path = Path(file)
        if path.is_file() and not is_installed(path):
            files.add(path.resolve())
    return sorted(files)


def code_fingerprint(ref: str) -> str | None:
    """What identifies the code of module ``ref`` without importing it: a ``.py`` file's path and text
    (its hash), an installed package's top-level file with its size and modification time (a new
    version writes it again); ``None`` when it is not found (the check then says why)."""
    try:
        if is_file_ref(ref):
            path = Path(ref).resolve()
            return f"{path}:{hashlib.sha256(path.read_bytes()).hexdigest()}"
        spec = importlib.util.find_spec(ref.split(".", 1)[0])  # the top-level package only: nothing imported
        if spec is None or spec.origin is None:
            return None
        stat = Path(spec.origin).stat()
        return f"{spec.origin}:{stat.st_size}:{stat.st_mtime_ns}"
    except (OSError, ImportError, ValueError):
        return None


def fingerprint(path: Path) -> str:
    """A file's content hash, a folder's modification time (a file added or removed in it changes
    it: an R package installed into a library folder), or :data:`ABSENT`."""
    try:
        if path.is_dir():
            return f"folder:{path.stat().st_mtime_ns}"
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ABSENT


def fingerprints(paths: Iterable[Path]) -> dict[str, str]:
    """:func:`fingerprint` of each of ``paths``, by path."""
    return {str(path): fingerprint(path) for path in paths}
