"""A directory followed across a rename (``mv EXP EXP2`` while a run uses it).

A process keeps the paths it was started with; a directory renamed meanwhile is still the same
directory, but every path under its old name fails, or, made again with ``mkdir -p``, lands in a
new folder under the old name. :class:`FollowedDir` holds the directory open from its creation on
and asks the kernel (``/proc/self/fd``) where it is now.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path


class FollowedDir:
    """A directory held open from now on, to tell where it is after a rename (closed with
    :meth:`close`, or when the object goes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            self._fd = None
        self._closer = None if self._fd is None else weakref.finalize(self, os.close, self._fd)

    def now(self) -> Path | None:
        """Where the directory is now: :attr:`path` while it was not moved, its new path, or ``None``
        once it was deleted (or its new place cannot be known)."""
        if self._fd is None:
            return self.path
        try:
            if os.path.samestat(os.stat(self.path), os.fstat(self._fd)):
                return self.path
        except OSError:
            pass
        try:
            target = os.readlink(f"/proc/self/fd/{self._fd}")
        except OSError:
            return None
        return None if target.endswith(" (deleted)") or not os.path.isdir(target) else Path(target)

    def current(self) -> Path:
        """Where to write under the directory: where it is now, else the path it was opened at
        (a write there then fails rather than land elsewhere)."""
        return self.now() or self.path

    def __reduce__(self) -> tuple[type[FollowedDir], tuple[Path]]:
        """Sent to another process (a task's context to its objective's child) as where the
        directory is now, followed there from then on."""
        return type(self), (self.current(),)

    def close(self) -> None:
        if self._closer is not None:
            self._closer()
        self._fd = None
