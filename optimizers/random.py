"""Random search: independent uniform samples (log-uniform where ``log: true``)."""

from __future__ import annotations

import random
from typing import Any, Sequence

from emews.optimizer import AskTellOptimizer
from emews.results import Result


class RandomSearch(AskTellOptimizer):
    """Samples the space at random, keeping ``backlog`` points per worker queued ahead."""

    def __init__(self, seed: int | None = None, backlog: int = 4) -> None:
        if backlog < 1:
            raise ValueError("backlog must be at least 1")
        self.rng = random.Random(seed)
        self.backlog = backlog

    def start(self, space: Any, workers: int) -> None:
        super().start(space, workers)
        self.in_flight = workers * self.backlog

    def suggest(self, n: int) -> list[dict[str, Any]]:
        return [self.space.sample(self.rng) for _ in range(n)]

    def ingest(self, results: Sequence[Result]) -> None:
        """Random search learns nothing."""
