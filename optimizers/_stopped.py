"""What a model of final results (``bayes``, ``hyperspace``) is told about a trial stopped early.

The rule: a training trial counts with the loss of its **last report** (the objective's metric
at the step it reached, signed so that smaller is better), told as an observation like any other,
neither penalized further nor treated as a lower bound. A trial stops early because its trial
scheduler (ASHA, Hyperband, median) found it behind its peers at that step; on a falling learning
curve its last loss is an *upper* bound of what it would have reached, so the model sees its
region as the scheduler judged it: worse than the trials that went on, and the less trained the
more so. A lower bound would claim it could not have done better, the opposite of a falling
curve; a further penalty would only push stopped trials (two thirds of ASHA's at the first rung)
far outside the completed trials' scale, which the surrogate then spends its fit on.

In practice: a result with a finite loss is told as it is (a trial stopped early whose objective
returns its last metrics, as the examples do, *is* its last report's loss). A result without one
of a trial that reported a finite value of the metric is told its last report's loss instead of a
failure's penalty when the trial did not fail on its own: its trial scheduler ended it (answered a
report with stop or complete) and the objective then returned a dict without the metric (one that
returns nothing has its last report as its result already: ``LoadedObjective.call``); or it ran
past the task timeout after some reports. A trial that raised or returned no
number without its scheduler ending it stays a failure (its last loss may hide what went wrong),
as do crashed trials, trials that never reported, and trials whose last report has no finite value
(a diverged trial).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from emews.core.results import Result, Status


class StoppedTrials:
    """Reads the last report of a trial whose result carries no loss (through ``evaluator.reports``);
    ``told`` keeps the loss the model was told for each result (by trial), ``from_reports`` counts
    the results replaced by their last report."""

    def __init__(self, evaluator: Any) -> None:
        self._read = getattr(evaluator, "reports", None)  # a replicating evaluator keeps no reports
        self._ended_by_scheduler = getattr(evaluator, "ended_by_scheduler", None)
        self._metric = getattr(evaluator, "metric", None)
        direction = getattr(evaluator, "direction", None)
        self._sign = float(direction.sign) if direction is not None else 1.0
        self.told: dict[int, float] = {}
        self.from_reports = 0

    def results(self, results: Sequence[Result]) -> list[Result]:
        """``results`` as the model learns them: one without a loss whose trial reported carries its last loss."""
        return [self._told(r) for r in results]

    def losses(self, results: Sequence[Result]) -> list[float]:
        return [r.loss for r in self.results(results)]

    def _told(self, result: Result) -> Result:
        last = None
        if not math.isfinite(result.loss) and self._stands_in(result):
            last = self.last_loss(result.id)
        if last is not None:
            self.from_reports += 1
            result = dataclasses.replace(result, loss=last)
        self.told[result.id] = result.loss
        return result

    def _stands_in(self, result: Result) -> bool:
        """Whether the last report stands in for ``result``'s missing loss (the module docstring)."""
        if result.status == Status.TIMEOUT:
            return True
        ended = self._ended_by_scheduler
        return result.status == Status.FAILED and ended is not None and ended(result.id)

    def last_loss(self, trial: int) -> float | None:
        """The signed metric of ``trial``'s last report, if that is a finite number (``None``: no report,
        or a last one without it: a diverged trial stays a failure)."""
        reports = self._read(trial) if self._read is not None and self._metric is not None else []
        if not reports:
            return None
        value = reports[-1].metrics.get(self._metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return self._sign * float(value)
