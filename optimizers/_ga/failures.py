"""Failure policies: the fitness a failed evaluation gets so the GA can go on.

``penalty``: a fixed loss (default ``inf``: loses every tournament);
``worst``: the worst successful loss seen so far; ``mean``: the mean
successful loss of the cohort (the generation, or in steady-state mode the
current population). ``worst`` and ``mean`` fall back to the penalty while
no evaluation has succeeded.
"""

from __future__ import annotations

import math
from statistics import fmean
from typing import Iterable, Sequence

from emews.results import Result

from .individual import Individual

FAILURE_POLICIES = ("penalty", "worst", "mean")


class FailurePolicy:
    def __init__(self, kind: str = "penalty", penalty: float = math.inf) -> None:
        if kind not in FAILURE_POLICIES:
            raise ValueError(f"failure: unknown policy {kind!r}; allowed: {', '.join(FAILURE_POLICIES)}")
        penalty = float(penalty)
        if math.isnan(penalty):
            raise ValueError("penalty: must be a number, not NaN")
        self.kind = kind
        self.penalty = penalty
        self.worst_seen: float | None = None

    def assign(self, individuals: Sequence[Individual], results: Sequence[Result],
               cohort: Iterable[Individual] = ()) -> None:
        """Score ``individuals`` with their ``results``; failures get the policy's loss.

        ``cohort`` adds already-scored successful members to the ``mean`` policy's pool.
        """
        ok_losses = [ind.loss for ind in cohort if ind.ok]
        for ind, result in zip(individuals, results):
            ind.result = result
            if result.ok:
                ind.fitness.values = (result.loss,)
                ok_losses.append(result.loss)
                if self.worst_seen is None or result.loss > self.worst_seen:
                    self.worst_seen = result.loss
        for ind in individuals:
            if not ind.ok:
                ind.fitness.values = (self._failed_loss(ok_losses),)

    def _failed_loss(self, ok_losses: list[float]) -> float:
        if self.kind == "mean" and ok_losses:
            return fmean(ok_losses)
        if self.kind in ("worst", "mean") and self.worst_seen is not None:
            return self.worst_seen
        return self.penalty
