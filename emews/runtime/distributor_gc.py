"""The distributor's garbage-collector policy at width: no full collections over the tasks in flight.

CPython's cyclic collector runs a full collection whenever the objects that survived into its
oldest generation grew by a quarter since the last one. On an optimizer rank serving 100,000
workers the tasks in flight, their results and the optimizer's own records for them are a
million objects or more that live for a task's length and die by reference counting (the full
collections of a 100,000-worker GA run collected nothing): each full collection walked all of them,
0.4 s to 5 s during which no thread ran (``bench/scale.py --trace``, docs/benchmarks.md "Rank 0
at width"), and every worker that freed meanwhile waited.

From :data:`WIDTH` workers on, while the distributor serves, :class:`WideCollector` turns each
full collection into a freeze (``gc.freeze``, an O(1) splice of every generation into the
collector's permanent one, from a ``gc.callbacks`` hook as the collection starts): what
survived that long is out of the collector's reach from then on, and the collection finds
nothing to walk. Collections of the younger generations run as usual, so short-lived cycles (a
traceback, a frame) are freed as before; a cycle that becomes garbage after it was frozen waits
for the end of the run, when :meth:`WideCollector.close` hands everything back
(``gc.unfreeze``). So that a run of hours does not keep every cycle that died in its old
generation (a model refitted every few seconds), one full collection in :data:`FULL_EVERY`
seconds is let through, over everything frozen so far: at 100,000 workers on 60 s tasks, one
pause of a second or so every ten minutes delays 0.2% of the workers' next tasks, not the 1-2%
that set the p99. An explicit ``gc.collect()`` during the run freezes too, unless one is due. A process that
froze objects itself before the run (``gc.get_freeze_count() > 0``, e.g. before forking) is left
alone. (A freeze every second from the distributor's loop was not enough: a pass of the loop
that waited seconds for the interpreter lock let a second of objects and more reach a full
collection, 1.3 s of it.)
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

#: from this many workers on the policy engages
WIDTH = 1000
#: seconds between two full collections let through
FULL_EVERY = 600.0

_lock = threading.Lock()
_holders: list[WideCollector] = []  # engaged collectors in this process (a test may run two distributors)


class WideCollector:
    """While serving ``workers`` >= ``width``: full collections become freezes (see the module)."""

    def __init__(self, workers: int, *, width: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.engaged = False
        #: full collections turned into freezes, and those let through (one in ``FULL_EVERY`` s)
        self.freezes = 0
        self.full = 0
        self.clock = clock
        self.last_full = clock()
        if workers < (WIDTH if width is None else width):
            return
        with _lock:
            if not _holders:
                if gc.get_freeze_count() > 0:
                    return  # frozen by the application: its choice, not ours to undo
                gc.callbacks.append(_on_collection)
            _holders.append(self)
        self.engaged = True

    def close(self) -> None:
        """The run is over: the frozen objects go back to the collector (the last holder's close)."""
        if not self.engaged:
            return
        self.engaged = False
        with _lock:
            _holders.remove(self)
            if not _holders:
                gc.callbacks.remove(_on_collection)
                gc.unfreeze()


def _on_collection(phase: str, info: dict[str, int]) -> None:
    """``gc.callbacks``: a full collection about to start finds every generation frozen, or,
    once in ``FULL_EVERY`` seconds, everything frozen so far handed back to it."""
    if phase != "start" or info.get("generation") != 2:
        return
    holders = _holders
    first = holders[0] if holders else None
    if first is not None and first.clock() - first.last_full >= FULL_EVERY:
        gc.unfreeze()
        first.last_full = first.clock()
        first.full += 1
        return
    gc.freeze()
    if first is not None:
        first.freezes += 1
