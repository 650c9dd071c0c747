"""The median stopping rule (Golovin et al., Google Vizier, KDD 2017).

At step ``s`` (from ``grace_period`` on), a trial stops when its best loss so far is worse
than the median, over the other trials that reported by step ``s``, of their mean loss over
their reports up to ``s``; it needs ``min_samples`` such trials to judge.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from emews.core.errors import OptionError
from emews.training.messages import CONTINUE, Action, Decision
from emews.training.schedulers.trial_scheduler import Mode, TrialScheduler

STOP = Decision(Action.STOP)


class MedianStopping(TrialScheduler):
    """The median stopping rule.

    Options (workflow ``trial_scheduler.options``): ``grace_period`` (1: the first step a trial
    may be stopped at), ``min_samples`` (3: the other trials needed to judge), ``metric``
    (default: the objective's metric) and ``mode`` (min | max; default: the objective's direction).
    """

    def __init__(
        self, grace_period: int = 1, min_samples: int = 3, metric: str | None = None, mode: Mode | None = None
    ) -> None:
        super().__init__(metric, mode)
        if min_samples < 1:
            raise OptionError("min_samples", f"must be at least 1, got {min_samples}")
        if grace_period < 1:
            raise OptionError(
                "grace_period", f"must be at least 1 (the first step a trial may be stopped at), got {grace_period}"
            )
        self.grace_period = grace_period
        self.min_samples = min_samples
        #: trial -> [(step, loss)] in arrival order
        self.history: dict[int, list[tuple[int, float]]] = {}

    @property
    def spans_pools(self) -> bool:
        """It decides from the reports alone."""
        return True

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        loss = self.loss(metrics)
        if loss is None:
            return CONTINUE
        own = self.history.setdefault(trial, [])
        own.append((step, loss))
        if step < self.grace_period:
            return CONTINUE
        means = []
        for other, reports in self.history.items():
            upto = [value for at, value in reports if at <= step]
            if other != trial and upto:
                means.append(sum(upto) / len(upto))
        if len(means) < self.min_samples:
            return CONTINUE
        best = min(value for _, value in own)
        return STOP if best > statistics.median(means) else CONTINUE
