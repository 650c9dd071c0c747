"""Which emews this is: the version of the imported package, the commit of the git checkout it was
imported from (if it was), and a digest of its source files. Recorded in ``experiment.json`` and in
a PostgreSQL store's meta; named when an experiment or a store of a newer emews is refused.

Honest and cheap: the version is the imported code's own (:mod:`emews.core.version`), not the metadata
of whatever distribution is installed (under ``PYTHONPATH`` those differ); the commit is read from
``.git/HEAD`` and its ref (no ``git`` process), and since a checkout may have changes the commit does
not hold, the digest of the package's ``.py`` files (about 10 ms, once per process) says which code ran.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from emews.core.version import VERSION

#: the imported package's folder (``emews/``)
PACKAGE = Path(__file__).resolve().parent.parent
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
#: hex digits of a commit and of the source digest a person is shown
SHORT = 12


@dataclass(frozen=True)
class Build:
    """An emews: its version, the commit it came from (``None``: not a git checkout) and the
    digest of its source files (``None``: unknown, as in a record of an older emews)."""

    version: str
    commit: str | None = None
    source: str | None = None

    def record(self) -> dict[str, str]:
        """As ``experiment.json`` and the store's meta keep it (JSON)."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_record(cls, data: Any) -> Build | None:
        """The build a record names; ``None`` when it names none (an older emews wrote it) or is not
        one (a hand-edited file: a refusal then says "that version", as before)."""
        if not isinstance(data, dict) or not isinstance(data.get("version"), str):
            return None
        extra = {key: data.get(key) for key in ("commit", "source")}
        if not all(value is None or isinstance(value, str) for value in extra.values()):
            return None
        return cls(data["version"], **extra)

    @property
    def described(self) -> str:
        """``0.1.0 (commit c44d45225308, source 0315b6261649)``: the version and what else is known."""
        parts = [f"commit {self.commit[:SHORT]}"] if self.commit else []
        parts += [f"source {self.source[:SHORT]}"] if self.source else []
        return self.version + (f" ({', '.join(parts)})" if parts else "")

    def __str__(self) -> str:
        return f"emews {self.described}"


@cache
def current_build() -> Build:
    """This emews (computed once per process)."""
    return Build(VERSION, checkout_commit(PACKAGE.parent), source_digest(PACKAGE))


def checkout_commit(root: Path) -> str | None:
    """The commit ``root``'s git checkout has checked out (``root/.git`` a folder, or a worktree's
    ``gitdir:`` file), or ``None``: not a checkout, or one this cannot read (a packed or odd ref)."""
    try:
        git = root / ".git"
        if git.is_file():  # a worktree or a submodule: "gitdir: PATH"
            git = root / git.read_text(encoding="utf-8").removeprefix("gitdir:").strip()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head if _SHA.fullmatch(head) else None  # detached
        ref = head.removeprefix("ref:").strip()
        common = git / (git / "commondir").read_text(encoding="utf-8").strip() if (git / "commondir").is_file() else git
        for folder in (git, common):
            if (folder / ref).is_file():
                commit = (folder / ref).read_text(encoding="utf-8").strip()
                return commit if _SHA.fullmatch(commit) else None
        return _packed(common / "packed-refs", ref)
    except (OSError, UnicodeDecodeError):
        return None


def _packed(path: Path, ref: str) -> str | None:
    """``ref``'s commit in a ``packed-refs`` file (``None``: not there)."""
    if not path.is_file():
        return None
    for line in path.read_text(encoding="utf-8").splitlines():
        commit, _, name = line.partition(" ")
        if name == ref and _SHA.fullmatch(commit):
            return commit
    return None


def source_digest(package: Path) -> str:
    """SHA-256 of the ``.py`` files under ``package`` (their paths and contents, in order; folders
    that are symbolic links are not followed), hex."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(name for name in dirs if name != "__pycache__")
        for name in sorted(name for name in files if name.endswith(".py")):
            path = Path(folder, name)
            digest.update(path.relative_to(package).as_posix().encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()


def use_it(build: Build | None) -> str:
    """What a refusal of a newer experiment or store tells to do: use the emews that made it."""
    return f"use {build}" if build is not None else "use that version"
