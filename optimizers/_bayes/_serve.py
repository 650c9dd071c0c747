"""The asynchronous loop of a model that proposes on its own thread (``bayes``; ``hyperspace`` at width).

This thread keeps up to ``target`` tasks in flight (with pools, at least what they can hold:
``evaluator.room``, read before each proposal, so a pool that joins gets work at once): it
submits the proposals the :class:`Proposer`
has ready (topped up with fillers by :class:`Refill` when the model is behind), asks the model for
what is still missing, and hands every result to ``learn``. A resumed run's first proposals come
from a model of the earlier results (``learn`` has seen them), not from fillers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from emews.core.results import Result

from ._proposer import Proposer
from ._refill import Refill

#: the first wait for a result while the model works on points that could be submitted (seconds);
#: it grows by half up to ``MAX_POLL`` and starts again at each result
FIRST_POLL, MAX_POLL = 0.002, 0.02


def serve(
    evaluator: Any,
    proposer: Proposer,
    refill: Refill,
    *,
    target: int,
    to_x: Callable[[Mapping[str, Any]], list[Any]],
    learn: Callable[[Sequence[Result]], None],
    stats: MutableMapping[str, Any],
    max_idle: float | None = None,
) -> None:
    """Run until the budget is spent and every result is learned (see the module docstring);
    ``to_x`` maps a point to the model's coordinates, ``max_idle`` bounds a wait for the model
    while nothing is in flight."""
    if evaluator.history and evaluator.remaining > 0:
        proposer.request(max(evaluator.room(target).propose, 1), evaluator.remaining)
        proposer.wait_ready(1)
    poll = FIRST_POLL
    while True:
        room = evaluator.room(target)  # its capacity: a pool that joins after it wakes the get below
        want = room.propose
        if want > 0:
            points = refill.points(want, evaluator.pending)
            if points:
                ids = evaluator.put(points)
                proposer.submitted(ids, [to_x(p) for p in points])
                stats["proposed"] += len(points)
                want -= len(points)
        proposer.request(max(want, 0), evaluator.remaining)
        if evaluator.pending == 0:
            if evaluator.remaining == 0:
                return
            proposer.wait_ready(1, timeout=max_idle)
            continue
        if want > 0:  # the model is working on points we could submit: look back soon
            results = evaluator.get(1, timeout=poll)
            poll = min(poll * 1.5, MAX_POLL)
        else:  # or none, when a pool joined: propose for it
            results = evaluator.get(1, more_room=room.capacity)
        if results:
            poll = FIRST_POLL
            learn(results)
