"""Polling that does not burn a core: spin briefly, then sleep with exponential back-off."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from emews.core.errors import ConfigError
from emews.runtime.env_seconds import seconds_from_environment

#: the environment variable that sets the polling window of every rank (seconds)
SPIN_VARIABLE = "EMEWS_SPIN_SECONDS"
#: seconds an idle rank keeps polling (yielding its core) before it starts to sleep, when its node
#: has a core for each rank; long enough to span a round trip
DEFAULT_SPIN = 1e-3


def spin_for(ranks_on_node: int, cores: int, environ: Mapping[str, str] = os.environ) -> float:
    """The polling window of this node's ranks: ``DEFAULT_SPIN`` with a core for each rank, none
    on an oversubscribed node (a polling rank would take the core of one with work);
    ``EMEWS_SPIN_SECONDS`` overrides both. A value that is no number of seconds counts as unset
    here: rank 0 refuses the run naming it (:func:`spin_seconds`), once, not on every rank."""
    default = DEFAULT_SPIN if ranks_on_node <= cores else 0.0
    try:
        return seconds_from_environment(SPIN_VARIABLE, default, environ)
    except ConfigError:
        return default


def spin_seconds(environ: Mapping[str, str] = os.environ) -> float:
    """``EMEWS_SPIN_SECONDS`` as rank 0 checks it before a run: a :class:`ConfigError` naming the
    variable unless it is unset or a number of seconds >= 0."""
    return seconds_from_environment(SPIN_VARIABLE, DEFAULT_SPIN, environ)


class Backoff:
    """Call :meth:`idle` after each fruitless poll and :meth:`reset` after useful work.

    For the first ``spin`` seconds of idleness ``idle`` only yields the core
    (the caller keeps polling, which keeps latency low, while another process
    on an oversubscribed node can still run); after that it sleeps,
    doubling the sleep from ``min_delay`` up to ``max_delay``.
    """

    #: the polling window of backoffs made without one (set once per process: :func:`spin_for`)
    spin_default: float = DEFAULT_SPIN

    def __init__(
        self,
        spin: float | None = None,
        min_delay: float = 50e-6,
        max_delay: float = 1e-3,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.spin = self.spin_default if spin is None else spin
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
            os.sched_yield()  # keep polling, but let a rank that has work use this core
            return
        delay = min(max(self._delay, self.min_delay), self.max_delay)  # either bound may change meanwhile
        self._sleep(delay)
        self._delay = min(delay * 2, self.max_delay)
