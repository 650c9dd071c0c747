"""Walltime awareness on the optimizer rank: pause running trials before the allocation ends.

From ``margin`` seconds before the allocation's end (or from a stop signal), no new task starts
and every report is answered with ``pause`` (the trial's checkpoint is kept and its task stays
unfinished); once no task runs any more, the run stops as a batch system's SIGTERM would stop it,
reported as the walltime's stop ("stopped at the walltime margin", exit status 3), and ``emews
resume`` continues the paused trials from their checkpoints at the step they reached.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("emews")


class PauseClock:
    """When trials must pause: ``margin`` seconds before ``end`` (a UNIX time; ``None``: never),
    or as soon as ``stopping()`` (a stop signal arrived: SIGTERM from the batch system)."""

    def __init__(self, end: float | None, margin: float = 300.0, stopping: Callable[[], bool] = lambda: False) -> None:
        self.end = end
        self.margin = margin
        self.stopping = stopping

    def warn(self) -> None:
        """The batch system warned that the allocation ends soon: the pause time is now."""
        now = time.time()
        if self.end is None or self.end - self.margin > now:
            self.end = now + self.margin

    @property
    def pause_at(self) -> float | None:
        return None if self.end is None else self.end - self.margin

    def due(self) -> bool:
        return (self.end is not None and time.time() >= self.end - self.margin) or self.stopping()


class WalltimeStop:
    """A thread that, at the pause time, logs it (from then the distributor starts no task: it reads
    the clock) and, once ``idle()`` said twice in a row that no task runs (once could catch a task
    between the queue and a worker), stops the run with ``stop`` (the optimizer rank's
    :meth:`~emews.runtime.interrupt.Interrupt.stop_at_walltime`: the path a stop signal takes,
    reported as the walltime's)."""

    def __init__(
        self, clock: PauseClock, idle: Callable[[], bool], stop: Callable[[], None], poll: float = 0.05
    ) -> None:
        self._clock = clock
        self._idle = idle
        self._stop = stop
        self._poll = poll
        self._done = threading.Event()
        # reentrant: :meth:`warn` runs in a signal handler, maybe on the thread that is inside :meth:`close`
        self._wake = threading.Condition(threading.RLock())
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="emews-walltime", daemon=True)

    def start(self) -> WalltimeStop:
        self._thread.start()  # without an end it waits for an early warning (:meth:`warn`)
        return self

    def warn(self) -> None:
        """The batch system's early warning (a signal handler's call): pause now, then stop."""
        self._clock.warn()
        with self._wake:
            self._wake.notify_all()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self._done.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5.0)  # it ends at once now: no thread outlives the run

    def _run(self) -> None:
        with self._wake:  # until the pause time, or an early warning moves it to now
            while not self._closed:
                pause_at = self._clock.pause_at
                if pause_at is not None and time.time() >= pause_at:
                    break
                self._wake.wait(None if pause_at is None else pause_at - time.time())
            if self._closed:
                return
        log.info(
            "walltime margin reached (pause time %.6f, %g s before the end): no new task starts; "
            "running trials pause at their next report",
            pause_at,
            self._clock.margin,
        )
        idle_before = False
        while not self._done.wait(self._poll):
            idle = self._idle()
            if idle and idle_before:
                self._stop()
                return
            idle_before = idle
