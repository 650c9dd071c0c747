"""Linux's parent-death signal (``PR_SET_PDEATHSIG``): a process told to die with the one that
started it, even when that one is killed with ``kill -9`` and can clean up nothing."""

from __future__ import annotations

import ctypes
import functools
import os
import signal
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


def prctl(option: int, value: int) -> None:
    """``prctl(option, value)``; nothing where there is no glibc."""
    libc = _libc()
    if libc is not None:
        libc.prctl(option, value, 0, 0, 0)


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``signum`` to this process when its parent dies."""
    prctl(_PR_SET_PDEATHSIG, signum)


def die_with(parent_pid: int, signum: int = signal.SIGKILL) -> None:
    """:func:`die_with_parent`, and exit at once when ``parent_pid`` died before the signal was
    armed (this process then already has another parent)."""
    die_with_parent(signum)
    if os.getppid() != parent_pid:
        os._exit(1)


def killed_with(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn`` for a program started in a session of its own (a command objective's
    model): SIGKILL when ``parent_pid`` (the thread that starts it, which waits for it) dies, so
    no model trains on after a ``kill -9`` of its worker. libc is loaded here, in the parent: the
    forked child only calls it."""
    _libc()
    return functools.partial(die_with, parent_pid, signal.SIGKILL)
