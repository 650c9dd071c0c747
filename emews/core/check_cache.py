"""Good answers of a plug-in's check kept on disk, so that the next command need not ask again.

A check that must import a heavy library (a gest-api generator from Xopt imports PyTorch: seconds and
~700 MB per ``emews check``, ``launch`` and ``resume``) is answered once: a passed check leaves an
empty file named by the SHA-256 of everything its answer depends on (the plug-in's code by its text or
its installed files' size and time, its options, the space), and a command that finds the file skips
the check. A refusal is never kept: it is asked again, and said again, every time.

The folder is ``EMEWS_CHECK_CACHE`` (empty: nothing kept), else ``$XDG_CACHE_HOME/emews/checks`` or
``~/.cache/emews/checks``. A folder that cannot be written keeps nothing, silently.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from emews.core.imports import is_file_ref

#: the folder of the kept answers ("": none are kept)
CACHE_VARIABLE = "EMEWS_CHECK_CACHE"


def cache_folder(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where good answers are kept, or ``None`` (``EMEWS_CHECK_CACHE`` set empty)."""
    if CACHE_VARIABLE in environ:
        return Path(environ[CACHE_VARIABLE]) if environ[CACHE_VARIABLE] else None
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "emews" / "checks"


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


def _entry(key: Mapping[str, Any]) -> Path | None:
    folder = cache_folder()
    if folder is None:
        return None
    text = json.dumps({**key, "python": sys.executable}, sort_keys=True, default=repr)
    return folder / hashlib.sha256(text.encode()).hexdigest()


def passed_before(key: Mapping[str, Any]) -> bool:
    """Whether a check with this ``key`` (JSON-able: what its answer depends on) passed before."""
    entry = _entry(key)
    return entry is not None and entry.is_file()


def remember_pass(key: Mapping[str, Any]) -> None:
    """Keep that a check with this ``key`` passed (nothing when the folder cannot be written)."""
    entry = _entry(key)
    if entry is None:
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.touch()
    except OSError:
        pass
