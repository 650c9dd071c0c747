"""Random search: independent uniform samples (log-uniform where ``log: true``)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from emews.core.errors import OptionError
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Result


class RandomSearch(AskTellOptimizer):
    """Samples the space at random, keeping ``backlog`` times the workers' capacity queued ahead.

    Options (workflow ``optimizer.options``): ``seed`` (None: an unseeded sequence, different in
    each run) and ``backlog`` (2).

    A resumed run continues the seeded sequence: the draws of every id the earlier runs
    issued are skipped (finished, requeued, and lost at a kill), so no point of the sequence
    is proposed twice.
    """

    def __init__(self, seed: int | None = None, backlog: int = 2) -> None:
        if backlog < 1:
            raise OptionError("backlog", f"must be at least 1, not {backlog!r}")
        self.rng = random.Random(seed)
        self.backlog = backlog

    def target_in_flight(self, evaluator: Any) -> int:
        """Keep ``backlog`` times what the workers can hold queued: points are cheap."""
        return self.backlog * evaluator.capacity

    def run(self, evaluator: Any) -> None:
        for _ in range(evaluator.earlier_points):
            evaluator.space.sample(self.rng)
        super().run(evaluator)

    def suggest(self, n: int) -> list[dict[str, Any]]:
        return [self.space.sample(self.rng) for _ in range(n)]

    def ingest(self, results: Sequence[Result]) -> None:
        """Random search learns nothing."""
