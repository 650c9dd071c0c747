"""Good answers of a plug-in's expensive check kept on disk, so that the next command need not ask
again: one policy for every such check (a gest-api generator built on the space, an R optimizer's
script and packages asked of R).

A check that passed leaves a file named by the SHA-256 of its key (what the answer depends on that
the caller knows: the plug-in, its options, the space; the interpreter and emews' version are added)
holding its answer and the fingerprints of the files it depended on: the user's modules loaded when it
passed (:func:`~emews.core.code_files.user_module_files`: an edited helper module counts) or the
files the caller names (the R scripts sourced, R's library folders). A command finds the answer only
while every one of those files is unchanged. A refusal is never kept: it is asked again, and said
again, every time.

The folder is ``EMEWS_CHECK_CACHE`` (empty: nothing kept), else ``$XDG_CACHE_HOME/emews/checks`` or
``~/.cache/emews/checks``. A kept answer that cannot be read is asked again; a folder that cannot be
written keeps nothing and says so once (``emews: warning:``), and the check goes on.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emews.core.build import current_build
from emews.core.code_files import fingerprints
from emews.core.textfiles import write_atomic

#: the folder of the kept answers ("": none are kept)
CACHE_VARIABLE = "EMEWS_CHECK_CACHE"

_warned: set[str] = set()  # folders already said to keep nothing


@dataclass(frozen=True)
class Kept:
    """An answer a check gave before (JSON: what :func:`keep` was given)."""

    value: Any


def cache_folder(environ: Mapping[str, str] = os.environ) -> Path | None:
    """Where good answers are kept, or ``None`` (``EMEWS_CHECK_CACHE`` set empty)."""
    if CACHE_VARIABLE in environ:
        return Path(environ[CACHE_VARIABLE]) if environ[CACHE_VARIABLE] else None
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "emews" / "checks"


def _entry(key: Mapping[str, Any]) -> Path | None:
    folder = cache_folder()
    if folder is None:
        return None
    full = {**key, "python": sys.executable, "emews": current_build().record()}
    text = json.dumps(full, sort_keys=True, default=repr)
    return folder / hashlib.sha256(text.encode()).hexdigest()


def kept(key: Mapping[str, Any]) -> Kept | None:
    """The answer a check with this ``key`` (JSON-able) gave when it passed, while every file it
    depended on is unchanged; ``None``: ask (never asked, a file changed, nothing kept or readable)."""
    entry = _entry(key)
    if entry is None:
        return None
    try:
        record = json.loads(entry.read_text())
        files = record["files"]
        unchanged = isinstance(files, dict) and fingerprints(Path(p) for p in files) == files
    except (OSError, ValueError, KeyError, TypeError):  # never kept, or unreadable: asked again
        return None
    return Kept(record.get("value")) if unchanged else None


def keep(key: Mapping[str, Any], value: Any, depends_on: Iterable[Path]) -> None:
    """Keep that a check with this ``key`` passed with ``value`` (JSON), while the files and folders
    ``depends_on`` are unchanged. A folder that cannot be written keeps nothing (said once)."""
    entry = _entry(key)
    if entry is None:
        return
    record = {"key": key, "value": value, "files": fingerprints(depends_on)}
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(entry, [json.dumps(record, default=repr).encode()], durable=False)
    except OSError as exc:
        if str(entry.parent) not in _warned:
            _warned.add(str(entry.parent))
            print(
                f"emews: warning: cannot keep checks in {entry.parent} ({exc.strerror or exc}): each command "
                f"checks afresh (set {CACHE_VARIABLE} to a folder you can write, or empty to keep none)",
                file=sys.stderr,
            )
