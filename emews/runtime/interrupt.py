"""SIGTERM / SIGINT as a clean stop: every rank notes the first signal and winds down.

A batch system's walltime kill (Slurm: SIGTERM to every task, SIGKILL after
KillWait), ``scancel`` and Ctrl-C all arrive here. The first signal sets a flag
that the loops check; inside :meth:`Interrupt.raising` it also raises
:class:`Interrupted`, which gets a blocked optimizer (or an inline objective) out
of its call. A second signal is ignored: shutdown is already under way.
"""

from __future__ import annotations

import signal
import threading

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(BaseException):
    """A stop signal arrived (a BaseException, so user code rarely swallows it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")

    @property
    def exit_status(self) -> int:
        """The shell's convention: 128 + the signal number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


class Interrupt:
    """The process's stop flag, set by the first SIGTERM or SIGINT."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._raising = 0
        self._guard = _Raising(self)

    def install(self) -> "Interrupt":
        """Handle the stop signals in this process (call on the main thread)."""
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                signal.signal(sig, self._handle)
        return self

    def __call__(self) -> bool:
        return self.signum is not None

    @property
    def error(self) -> Interrupted | None:
        return None if self.signum is None else Interrupted(self.signum)

    def raising(self) -> "_Raising":
        """While inside, the first signal raises :class:`Interrupted` on the main thread
        (a plain context manager: it wraps every inline task)."""
        return self._guard

    def _handle(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            return
        self.signum = signum
        if self._raising:
            raise Interrupted(signum)


class _Raising:
    __slots__ = ("_interrupt",)

    def __init__(self, interrupt: Interrupt) -> None:
        self._interrupt = interrupt

    def __enter__(self) -> None:
        interrupt = self._interrupt
        if interrupt.signum is not None:
            raise Interrupted(interrupt.signum)
        interrupt._raising += 1

    def __exit__(self, *exc: object) -> None:
        self._interrupt._raising -= 1
