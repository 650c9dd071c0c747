"""Which checkpoints to keep: last k per trial, best k per trial, best K of the experiment.

A pure function over the durable checkpoints (:meth:`Retention.to_delete`), applied
incrementally by :class:`Retainer` on the optimizer rank as checkpoints become durable: it
deletes the rest. Always kept: each trial's newest checkpoint (a retry, a
resume or a promotion continues from it) and the checkpoints a PBT clone was made from.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class Ranked(Protocol):
    """A checkpoint as retention sees it (read-only: a frozen row such as ``CheckpointRow`` fits)."""

    @property
    def id(self) -> int: ...
    @property
    def trial(self) -> int: ...
    @property
    def step(self) -> int: ...
    @property
    def loss(self) -> float | None: ...


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
            keep.update(r.id for r in newest[: max(1, self.keep_last or 0)])
            keep.update(r.id for r in sorted(own, key=_rank)[: self.keep_best or 0])
        keep.update(r.id for r in sorted(rows, key=_rank)[: self.keep_best_experiment or 0])
        return [r.id for r in rows if r.id not in keep]


def _rank(row: Ranked) -> tuple[float, int]:
    """Best first: smallest loss (a checkpoint without the metric last), older first on ties."""
    return (math.inf if row.loss is None else row.loss, row.id)


class Retainer:
    """Applies a :class:`Retention` as checkpoints become durable, looking only at the new ones,
    the trials they belong to and the experiment's best K so far (never a rescan of every
    checkpoint: a checkpoint no rule keeps now is kept by none later, so the survivors suffice)."""

    def __init__(self, policy: Retention) -> None:
        self.policy = policy
        self._by_trial: dict[int, list[Ranked]] = {}
        self._best: list[tuple[tuple[float, int], int]] = []  # (rank, trial) of the best K, best first

    def add(self, rows: Iterable[Ranked], pinned: set[int]) -> list[int]:
        """Take newly durable ``rows``; return the ids of the checkpoints no rule keeps any more."""
        if self.policy.keeps_all:
            return []
        touched: set[int] = set()
        top = self.policy.keep_best_experiment or 0
        for row in rows:
            self._by_trial.setdefault(row.trial, []).append(row)
            touched.add(row.trial)
            if top:
                bisect.insort(self._best, (_rank(row), row.trial))
                if len(self._best) > top:
                    touched.add(self._best.pop()[1])  # pushed out of the best K: its trial is looked at again
        best = {rank[1] for rank, _ in self._best}
        doomed: list[int] = []
        for trial in touched:
            own = self._by_trial.get(trial, [])
            newest = sorted(own, key=lambda r: (r.step, r.id), reverse=True)
            keep = (
                best
                | pinned
                | {r.id for r in newest[: max(1, self.policy.keep_last or 0)]}
                | {r.id for r in sorted(own, key=_rank)[: self.policy.keep_best or 0]}
            )
            self._by_trial[trial] = [r for r in own if r.id in keep]
            doomed.extend(r.id for r in own if r.id not in keep)
        return doomed
