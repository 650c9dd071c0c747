"""What bayes hands the workers when they have room: the model's proposals first; while a refit
keeps workers waiting and the model holds them up (``Proposer.speculating``), the last fit's
runners-up (random initial points before the first fit, one wave at most); after ``max_idle``
seconds of waiting, random points."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from emews.core.space import Space

from ._proposer import Proposer

if TYPE_CHECKING:  # the skopt space is imported where a model is built
    from ._space import SpaceMap


class Refill:
    """The refill policy of one run; counts what it handed out in ``stats``."""

    def __init__(
        self,
        space: Space,
        space_map: SpaceMap,
        proposer: Proposer,
        *,
        workers: int,
        speculate: bool,
        max_idle: float | None,
        seed: Any,
        stats: dict[str, Any],
    ) -> None:
        self._space, self._map, self._proposer = space, space_map, proposer
        self._workers, self._speculate, self._max_idle = workers, speculate, max_idle
        self._rng = random.Random(f"{seed}-fill")
        self._stats = stats
        self._waiting_since: float | None = None

    def points(self, room: int, pending: int) -> list[dict[str, Any]]:
        """Up to ``room`` points to submit now, with ``pending`` evaluations outstanding."""
        points = [self._map.from_skopt(x) for x in self._proposer.take(room)]
        idle = min(room, self._workers - pending) - len(points)
        if idle > 0 and self._speculate and self._proposer.busy and self._proposer.speculating:
            # workers would wait on a refit that takes longer than their tasks
            backup = self._runners_up(idle)
            points += backup
            idle -= len(backup)
        if idle > 0 and self._max_idle is not None:
            self._waiting_since = self._waiting_since or time.monotonic()
            if time.monotonic() - self._waiting_since >= self._max_idle:
                points += self._random(idle)
                self._waiting_since = None
        else:
            self._waiting_since = None
        return points

    def _runners_up(self, idle: int) -> list[dict[str, Any]]:
        backup = [self._map.from_skopt(x) for x in self._proposer.take_fallback(idle)]
        self._stats["runners_up"] += len(backup)
        if not self._proposer.fitted:  # no model yet: more initial points, one wave at most
            extra = max(min(idle - len(backup), self._workers - self._stats["random_fillers"]), 0)
            backup += self._random(extra)
        return backup

    def _random(self, n: int) -> list[dict[str, Any]]:
        self._stats["random_fillers"] += n
        return [self._space.sample(self._rng) for _ in range(n)]
