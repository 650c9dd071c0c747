"""How much room a folder's file system has left: enough to tell a full disk from an I/O error."""

from __future__ import annotations

import os
from pathlib import Path

#: fewer bytes than this left on a file system: it is full (a write that failed leaves what it wrote,
#: so the failed file took the rest)
FULL_BELOW = 1 << 20


def free_bytes(folder: Path) -> int | None:
    """Bytes this process may still write on ``folder``'s file system (root may write into ext4's
    reserve); ``None`` if it cannot be asked."""
    try:
        room = os.statvfs(folder)
    except OSError:
        return None
    return (room.f_bfree if os.geteuid() == 0 else room.f_bavail) * room.f_frsize


def full(folder: Path) -> bool:
    """Whether ``folder``'s file system has less than :data:`FULL_BELOW` bytes left."""
    free = free_bytes(folder)
    return free is not None and free < FULL_BELOW
