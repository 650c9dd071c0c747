"""The trial-scheduler contract: reports in, decisions out."""

from __future__ import annotations

import math
from typing import Any, Iterable, Literal, Mapping

from emews.core.space import Space
from emews.training.messages import CONTINUE, Decision
from emews.core.results import StoredReport

Mode = Literal["min", "max"]


class TrialScheduler:
    """Decides from a trial's reports whether it continues, stops, pauses or exploits.

    ``metric`` (default: the objective's metric) is read from each report; ``mode`` (default:
    the objective's direction) says whether smaller or larger is better. Subclasses implement
    :meth:`on_report`; their ``__init__`` keywords are their workflow options.
    """

    def __init__(self, metric: str | None = None, mode: Mode | None = None) -> None:
        self.metric = metric
        self.mode = mode
        self.space: Space | None = None
        self.seed = 0

    def bind(self, *, metric: str, direction: str, space: Space | None = None, seed: int = 0) -> "TrialScheduler":
        """Fill the defaults from the workflow: metric, mode, the parameter space, the seed."""
        self.metric = self.metric or metric
        self.mode = self.mode or ("max" if direction == "maximize" else "min")
        self.space = space
        self.seed = seed
        return self

    def loss(self, metrics: Mapping[str, Any]) -> float | None:
        """The report's metric signed so that smaller is better; ``None`` when missing or not finite."""
        value = metrics.get(self.metric or "value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return -float(value) if self.mode == "max" else float(value)

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        """The decision for ``trial`` after it reported ``metrics`` at ``step`` (with ``params``)."""
        raise NotImplementedError

    def ended(self, trial: int) -> None:
        """``trial``'s task ended with its result: it reports no more (nothing to do by default)."""

    def rebuild(self, reports: Iterable[StoredReport], params: Mapping[int, Mapping[str, Any]],
                promoted: Iterable[tuple[int, int]] = (), ended: Iterable[int] = ()) -> None:
        """Restore the state of an earlier run: replay its reports in arrival order, then its
        promotions (``(trial, step it paused at)``, in order), then the trials that ended."""
        for report in reports:
            self.on_report(report.trial, report.step, report.metrics, params.get(report.trial, {}))
        for trial, step in promoted:
            self.was_promoted(trial, step)
        for trial in ended:
            self.ended(trial)

    # -- promotions (ASHA's promotion variant): trials that paused and wait on the optimizer rank --
    #: the parameter a promoted task's resource is written to (``None``: its parameters stay)
    resource: str | None = None

    def promotable(self) -> list[int]:
        """Paused trials that may now continue, the first to run first (none by default)."""
        return []

    def waiting(self) -> list[int]:
        """Paused trials that wait for a promotion (none by default): after a rebuild, those an
        earlier run left waiting (``emews resume`` holds them again instead of running them)."""
        return []

    def promote(self, trial: int) -> int | None:
        """``trial`` runs again from its checkpoint; returns the resource it gets (``None``: unchanged)."""
        return None

    def was_promoted(self, trial: int, step: int) -> None:
        """Rebuilding: ``trial``, paused at ``step``, was promoted in the earlier run."""

    def release(self, trial: int) -> None:
        """``trial`` ends where it paused (its result so far is final): it is never promoted."""

    def least_promising(self, trials: Iterable[int]) -> int:
        """Of the paused ``trials``, the one to end first when nothing else can run (default: the oldest)."""
        return min(trials)

    def check(self) -> None:
        """Raise ValueError when the options cannot work together (called before a launch)."""


def quantile(values: Iterable[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` with linear interpolation (numpy's default); ``None`` if empty."""
    ordered = sorted(values)
    if not ordered:
        return None
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


__all__ = ["CONTINUE", "Mode", "TrialScheduler", "quantile"]
