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
(``gc.unfreeze``). An explicit ``gc.collect()`` during the run freezes too. A process that
froze objects itself before the run (``gc.get_freeze_count() > 0``, e.g. before forking) is left
alone. (A freeze every second from the distributor's loop was not enough: a pass of the loop
that waited seconds for the interpreter lock let a second of objects and more reach a full
collection, 1.3 s of it.)
"""

from __future__ import annotations

import gc
import threading

#: from this many workers on the policy engages
WIDTH = 1000

_lock = threading.Lock()
_holders: list[WideCollector] = []  # engaged collectors in this process (a test may run two distributors)


class WideCollector:
    """While serving ``workers`` >= ``width``: full collections become freezes (see the module)."""

    def __init__(self, workers: int, *, width: int | None = None) -> None:
        self.engaged = False
        #: full collections turned into freezes
        self.freezes = 0
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
    """``gc.callbacks``: a full collection about to start finds every generation frozen."""
    if phase == "start" and info.get("generation") == 2:
        gc.freeze()
        holders = _holders
        if holders:
            holders[0].freezes += 1
