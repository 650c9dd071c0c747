"""What BOHB models: each trial's loss at every budget (the step of a training report) it reached.

A trial's reports give its loss at each step it reported (the last report at a step wins, as
after a retry from a checkpoint); a trial stopped early counts at the steps it reached, so its last
report counts at its last step. A result of a trial that never reported counts at the budget
:data:`FINAL` (above every step) when it succeeded; failed ones without reports are bad at every
budget but never make a budget "have enough". Everything is rebuilt from the stored reports and
the results, so a resumed run models what the earlier runs reported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emews.core.results import Result, StoredReport

#: the budget of results of trials that never reported (a plain objective): above every step
FINAL = math.inf


@dataclass
class Fidelities:
    """Trials' parameters, their learning curves and the results of trials without reports."""

    params: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    results: dict[int, float] = field(default_factory=dict)  # trial -> loss (inf: failed)
    curves: dict[int, dict[float, float]] = field(default_factory=dict)  # trial -> step -> loss

    def know(self, trial: int, params: Mapping[str, Any]) -> None:
        """``trial`` evaluates ``params`` (submitted, requeued, or an earlier run's)."""
        self.params[trial] = params

    def add_results(self, results: Iterable[Result]) -> None:
        for result in results:
            self.params.setdefault(result.id, result.params)
            self.results[result.id] = result.loss if math.isfinite(result.loss) else math.inf

    def read_reports(self, reports: Iterable[StoredReport], metric: str | None, sign: float) -> None:
        """The curves, from every stored report (read again whole: reports of any run count)."""
        self.curves = {}
        if metric is None:
            return
        for report in reports:
            value = report.metrics.get(metric)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            loss = sign * float(value)
            self.curves.setdefault(report.trial, {})[float(report.step)] = loss if math.isfinite(loss) else math.inf

    def at(self, budget: float) -> list[tuple[Mapping[str, Any], float]]:
        """The (params, loss) observed at ``budget``, in trial order."""
        seen = []
        for trial, params in sorted(self.params.items()):
            curve = self.curves.get(trial)
            if curve is not None:
                if budget in curve:
                    seen.append((params, curve[budget]))
            elif budget == FINAL and trial in self.results:
                seen.append((params, self.results[trial]))
        return seen

    def failed_unreported(self) -> list[Mapping[str, Any]]:
        """Parameters of trials that failed before any report: bad at every budget."""
        return [self.params[t] for t, loss in sorted(self.results.items()) if math.isinf(loss) and t not in self.curves]

    def ended_below(self, budget: float) -> list[Mapping[str, Any]]:
        """Parameters of trials that ended (stopped early, or failed) before reporting at ``budget``:
        their trial scheduler judged them worse than the trials that went on."""
        return [self.params[t] for t in sorted(self.results) if self.curves.get(t) and max(self.curves[t]) < budget]

    def stopped_at(self, budget: float) -> dict[float, list[Mapping[str, Any]]]:
        """Each step below ``budget`` where trials ended (stopped early, or failed), and their
        parameters, in trial order."""
        groups: dict[float, list[Mapping[str, Any]]] = {}
        for trial in sorted(self.results):
            curve = self.curves.get(trial)
            if curve and max(curve) < budget and trial in self.params:
                groups.setdefault(max(curve), []).append(self.params[trial])
        return dict(sorted(groups.items()))

    def pairs(self, low: float, high: float) -> list[tuple[float, float]]:
        """The (loss at ``low``, loss at ``high``) of every trial that reported finite losses at both."""
        return [
            (curve[low], curve[high])
            for curve in self.curves.values()
            if low in curve and high in curve and math.isfinite(curve[low]) and math.isfinite(curve[high])
        ]

    def budgets(self) -> dict[float, int]:
        """Each budget and how many trials have a finite loss there."""
        counts: dict[float, int] = {}
        for trial in self.params:
            curve = self.curves.get(trial)
            if curve is not None:
                for step, loss in curve.items():
                    counts[step] = counts.get(step, 0) + math.isfinite(loss)
            elif math.isfinite(self.results.get(trial, math.inf)):
                counts[FINAL] = counts.get(FINAL, 0) + 1
        return counts

    def highest(self, enough: int) -> float | None:
        """The highest budget with at least ``enough`` finite observations (``None``: none has)."""
        ready = [budget for budget, count in self.budgets().items() if count >= enough]
        return max(ready) if ready else None
