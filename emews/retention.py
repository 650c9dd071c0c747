"""Which checkpoints to keep: last k per trial, best k per trial, best K of the experiment.

A pure function over the durable checkpoints: the optimizer rank applies it as checkpoints
become durable and deletes the rest. Always kept: each trial's newest checkpoint (a retry, a
resume or a promotion continues from it) and the checkpoints a PBT clone was made from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Protocol


class Ranked(Protocol):
    id: int
    trial: int
    step: int
    loss: float | None


@dataclass(frozen=True)
class Retention:
    """``None`` everywhere keeps every checkpoint (the default)."""

    keep_last: int | None = None
    keep_best: int | None = None
    keep_best_experiment: int | None = None

    @property
    def keeps_all(self) -> bool:
        return self.keep_last is None and self.keep_best is None and self.keep_best_experiment is None

    def to_delete(self, durable: Iterable[Ranked], pinned: set[int]) -> list[int]:
        """Ids of the checkpoints no rule keeps."""
        if self.keeps_all:
            return []
        rows = list(durable)
        keep = set(pinned)
        by_trial: dict[int, list[Ranked]] = {}
        for row in rows:
            by_trial.setdefault(row.trial, []).append(row)
        for own in by_trial.values():
            newest = sorted(own, key=lambda r: (r.step, r.id), reverse=True)
            keep.update(r.id for r in newest[:max(1, self.keep_last or 0)])
            keep.update(r.id for r in sorted(own, key=_rank)[:self.keep_best or 0])
        keep.update(r.id for r in sorted(rows, key=_rank)[:self.keep_best_experiment or 0])
        return [r.id for r in rows if r.id not in keep]


def _rank(row: Ranked) -> tuple[float, int]:
    """Best first: smallest loss (a checkpoint without the metric last), older first on ties."""
    return (math.inf if row.loss is None else row.loss, row.id)
