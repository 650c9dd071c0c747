"""Polling that does not burn a core: spin briefly, then sleep with exponential back-off."""

from __future__ import annotations

import time
from typing import Callable


class Backoff:
    """Call :meth:`idle` after each fruitless poll and :meth:`reset` after useful work.

    For the first ``spin`` seconds of idleness ``idle`` returns at once (the
    caller keeps polling, which keeps latency low); after that it sleeps,
    doubling the sleep from ``min_delay`` up to ``max_delay``.
    """

    def __init__(self, spin: float = 200e-6, min_delay: float = 50e-6, max_delay: float = 1e-3,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        self.spin = spin
        self.min_delay = min_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._idle_since: float | None = None
        self._delay = min_delay

    def reset(self) -> None:
        self._idle_since = None
        self._delay = self.min_delay

    def idle(self) -> None:
        now = time.perf_counter()
        if self._idle_since is None:
            self._idle_since = now
        if now - self._idle_since < self.spin:
            return
        self._sleep(self._delay)
        self._delay = min(self._delay * 2, self.max_delay)
