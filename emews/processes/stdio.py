"""A process's standard output and error, put back after a task that closed or redirected them.

An objective that closes fd 1 or 2 (``os.close(1)``, a daemon's clean-up), points them elsewhere
(``os.dup2(f, 1)``) or closes ``sys.stdout`` did so for every later task of its process too: their
prints failed (``Bad file descriptor``) or went into a file the first task had opened, and a
worker's own lines were lost. :class:`StandardStreams` remembers what they are and puts them back.
"""

from __future__ import annotations

import os
import sys

_FDS = (1, 2)  # stdout, stderr


def _identity(fd: int) -> tuple[int, int] | None:
    """What ``fd`` refers to (device, inode), or ``None`` when it is closed."""
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_dev, info.st_ino


class StandardStreams:
    """fd 1 and 2 as they are now (kept as private duplicates) and ``sys.stdout``/``sys.stderr``."""

    def __init__(self) -> None:
        self._saved = [os.dup(fd) for fd in _FDS]  # not inherited by the processes a task starts
        self._identities = [_identity(fd) for fd in self._saved]

    def restore(self) -> None:
        """Put back fd 1 and 2 where a task changed them (a few ``fstat`` calls when it did not), and
        a closed ``sys.stdout`` or ``sys.stderr`` (a new stream on the same descriptor)."""
        for fd, saved, identity in zip(_FDS, self._saved, self._identities, strict=True):
            if _identity(fd) != identity:
                os.dup2(saved, fd)
        for name, fd in (("stdout", 1), ("stderr", 2)):
            stream = getattr(sys, name)
            if stream is None or stream.closed:
                setattr(sys, name, open(fd, "w", buffering=1, errors="backslashreplace", closefd=False))  # noqa: SIM115

    def say(self, line: str) -> None:
        """Write ``line`` to the standard error kept here (whatever fd 2 is now)."""
        try:
            os.write(self._saved[1], (line.rstrip("\n") + "\n").encode("utf-8", "backslashreplace"))
        except OSError:
            pass  # nowhere left to say it
