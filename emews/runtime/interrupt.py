"""SIGTERM / SIGINT as a clean stop: every rank notes the first signal and winds down.

A batch system's walltime kill (Slurm: SIGTERM to every task, SIGKILL after
KillWait), ``scancel`` and Ctrl-C all arrive here. The first signal sets a flag
that the loops check. Without a ``grace`` it is also an abort: inside
:meth:`Interrupt.raising` it raises :class:`Interrupted`, which gets a blocked
optimizer (or an inline objective) out of its call. With a ``grace`` (worker ranks,
whose training trials pause at their next report) the abort comes ``grace`` seconds
later, or at a second signal of another kind (SIGINT after SIGTERM); the same signal again is
the first one delivered twice (the batch system signals every process of the job, and the launcher,
``mpiexec`` or ``srun``, passes on the one it got), not a second stop. Any further signal is
ignored: shutdown is under way.
The optimizer rank also stops itself this way at the walltime margin
(:meth:`Interrupt.stop_at_walltime`): the same path, told apart as :class:`WalltimeReached`.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from emews.core.errors import EXIT_WALLTIME

SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: the batch system's early warning that the allocation ends soon (Slurm ``--signal=USR1@SECONDS``;
#: the job script passes on ``B:USR1``): not a stop, the walltime margin reached now (:attr:`Interrupt.warning`)
WARNING = signal.SIGUSR1


class Interrupted(BaseException):
    """A stop signal arrived (a BaseException, so user code rarely swallows it)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")

    @property
    def exit_status(self) -> int:
        """The shell's convention: 128 + the signal number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


class LauncherEnded(Interrupted):
    """The stop signal came because the process that started the job ended: ``kill -9`` of ``emews
    launch`` (or ``emews resume``) made ``mpiexec``'s parent-death signal stop the job. Said as that,
    not as a signal someone sent; the exit status stays 128 + the signal. A BaseException, as the
    :class:`Interrupted` it is: it takes the optimizer out of its call."""

    def __init__(self, signum: int, launcher: str, pid: int) -> None:
        BaseException.__init__(self, f"stopped: its {launcher} (pid {pid}) ended ({signal.Signals(signum).name})")
        self.signum = signum


class WalltimeReached(Interrupted):
    """The run stopped itself at the walltime margin (no signal came): nothing runs any more,
    the running trials paused; ``emews resume`` continues. Exit status :data:`EXIT_WALLTIME`. A
    BaseException, as the :class:`Interrupted` it is: it takes the optimizer out of its call."""

    def __init__(self) -> None:
        BaseException.__init__(self, "stopped at the walltime margin")
        self.signum = signal.SIGTERM  # delivered to the main thread as the stop signal it stands for

    @property
    def exit_status(self) -> int:
        return EXIT_WALLTIME


class Interrupt:
    """The process's stop flag, set by the first SIGTERM or SIGINT; ``aborting`` once the
    ``grace`` seconds after it have passed (at once without a grace) or a signal of another kind came."""

    def __init__(self, grace: float = 0.0) -> None:
        self.signum: int | None = None
        self.grace = grace
        self._aborting = False
        self._raising = 0
        self._guard = _Raising(self)
        self._deferring = False  # the first signal's grace runs: the same signal again is that one repeated
        self._installed = False
        #: the stop is the walltime margin's (:meth:`stop_at_walltime`), not a signal from outside
        self.walltime = False
        #: whether the running work may use the grace (a worker: its task is a training trial)
        self.defer: Callable[[], bool] = lambda: True
        self._warning: Callable[[], None] | None = None

    def install(self) -> Interrupt:
        """Handle the stop signals in this process (call on the main thread); ignore the early
        warning until :attr:`warning` says what it does."""
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                signal.signal(sig, self._handle)
            self._installed = True
            self._heed_warning()
        return self

    @property
    def warning(self) -> Callable[[], None] | None:
        """What the early warning (:data:`WARNING`) does: the optimizer rank pauses its trials and
        stops (:meth:`~emews.runtime.walltime_pause.WalltimeStop.warn`). Elsewhere (``None``) it is
        ignored, SIG_IGN, which every program the process starts inherits through ``exec``: Slurm's
        ``--signal=USR1@SECONDS`` reaches every process of the job steps, and ``srun`` hands the
        batch shell's ``B:USR1`` to all of them too, where its default action, to die, crashed the
        running command objectives (and the programs a Python objective runs)."""
        return self._warning

    @warning.setter
    def warning(self, action: Callable[[], None] | None) -> None:
        self._warning = action
        self._heed_warning()

    def _heed_warning(self) -> None:
        if self._installed and threading.current_thread() is threading.main_thread():
            action = self._warning
            signal.signal(WARNING, signal.SIG_IGN if action is None else lambda signum, frame: action())

    def stop_at_walltime(self) -> None:
        """Stop as a first SIGTERM would, reported as :class:`WalltimeReached` (from any thread:
        the walltime watcher's). Nothing when a stop signal came first: that one is the stop."""
        if self.signum is not None:
            return
        self.walltime = True
        if self._installed:  # the abort reaches the main thread, wherever the optimizer is
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGTERM)
        else:  # no handler (workers as threads, in tests): the flag alone, which the loops read
            self.signum, self._aborting = signal.SIGTERM, True

    def __call__(self) -> bool:
        return self.signum is not None

    def ignore_from_now(self) -> None:
        """This process's work is done: ignore further stop signals (main thread only).

        CPython resets a Python-level handler to the default while the interpreter shuts
        down, so a late SIGTERM (the batch system's, after the launcher's) would kill a rank
        that already finished; mpiexec reports that rank as failed and kills the ranks still
        writing their outputs. An ignored signal stays ignored through the shutdown.
        """
        if threading.current_thread() is threading.main_thread():
            for sig in (*SIGNALS, WARNING):
                signal.signal(sig, signal.SIG_IGN)

    def aborting(self) -> bool:
        """Whether running work must be abandoned now (not only wound down)."""
        return self._aborting

    @property
    def error(self) -> Interrupted | None:
        if self.signum is None:
            return None
        return WalltimeReached() if self.walltime else Interrupted(self.signum)

    def raising(self) -> _Raising:
        """While inside, the abort raises :class:`Interrupted` on the main thread
        (a plain context manager: it wraps every inline task)."""
        return self._guard

    def _handle(self, signum: int, frame: object) -> None:
        if self._aborting:
            return
        if self.signum is None:
            deferring = self.grace > 0 and self.defer()
            if self.signum is None:  # else a repeat, handled inside this handler (during defer), took its part
                # noted before signum: a repeat that Python runs inside this handler from here on sees both
                self._deferring = deferring
                self.signum = signum
                if deferring:
                    timer = threading.Timer(self.grace, self._expire)
                    timer.daemon = True
                    timer.start()
                    return
        if signum == self.signum and self._deferring:
            return  # the first stop delivered again (by the batch system and by the launcher): the grace goes on
        self._aborting = True
        if self._raising:
            raise WalltimeReached() if self.walltime else Interrupted(self.signum)

    def _expire(self) -> None:
        """The grace is over: the abort arrives on the main thread as a second signal."""
        if not self._aborting and self.signum is not None:
            self._deferring = False  # no longer a grace that a repeat of the signal would belong to
            signal.pthread_kill(threading.main_thread().ident or 0, self.signum)


class _Raising:
    __slots__ = ("_interrupt",)

    def __init__(self, interrupt: Interrupt) -> None:
        self._interrupt = interrupt

    def __enter__(self) -> None:
        interrupt = self._interrupt
        if interrupt._aborting:
            error = interrupt.error
            assert error is not None
            raise error
        interrupt._raising += 1

    def __exit__(self, *exc: object) -> None:
        self._interrupt._raising -= 1
