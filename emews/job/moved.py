"""Where an experiment directory is now, for a run that used it while it was moved (``mv EXP EXP2``).

A run keeps the path it was started with; renamed while it ran, the directory is still its own
(the store it holds open lives on there), but every path under the old name fails at the end:
the run said "not an experiment directory" and wrote no summary. The run holds the directory open
from its start, and at its end asks the kernel where that directory is now (``/proc/self/fd``)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path


class DirectoryWatch:
    """An experiment directory held open, to tell where it is at the end of a run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            self._fd = None

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

    def moved_line(self, now: Path | None) -> str:
        """The one line that says where the directory went while the run used it."""
        if now is None:
            return (
                f"emews: the experiment directory {self.path} was deleted (or moved where this run cannot see "
                "it) while it ran: its summary and results.csv could not be written"
            )
        return (
            f"emews: the experiment directory {self.path} was moved to {now} while it ran: its summary and "
            f"results.csv are written there (follow it with: emews status {shlex.quote(str(now))})"
        )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
