"""The ``resumed: ...`` line of ``emews resume`` and ``emews serve``: what the run took over."""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("emews")


def say_resumed(resumed: int, requeued: int, *, pooled: bool) -> None:
    """Log and print :func:`resumed_line` when the run takes over earlier work, as it does so
    (before its first progress line)."""
    if resumed or requeued:
        line = resumed_line(resumed, requeued, pooled=pooled)
        log.info(line)
        print(line, file=sys.stderr, flush=True)


def resumed_line(resumed: int, requeued: int, *, pooled: bool) -> str:
    """What a resumed run took over: the earlier evaluations, and the tasks still unfinished (run
    again here; in a pooled experiment left in the shared queue, where a pool still owns them)."""
    given = f"resumed: {resumed} earlier evaluations given to the optimizer, "
    if not pooled:
        return given + f"{requeued} interrupted tasks run again"
    return given + (
        f"{requeued} unfinished tasks waited for in the shared queue, not queued again "
        "(a live pool finishes the ones it holds, a lost pool's run again once their lease ends)"
    )
