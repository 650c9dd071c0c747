"""The trial-scheduler contract: reports in, decisions out.

A trial scheduler is a subclass of :class:`TrialScheduler` that implements :meth:`~TrialScheduler.on_report`;
the other methods have defaults that fit a rule that only stops early (median stopping). A rule
that pauses trials for later promotion (ASHA's promotion variant) overrides the promotion methods;
one that changes a trial's parameters (PBT) answers ``exploit`` and overrides
:meth:`~TrialScheduler.replay` and :meth:`~TrialScheduler.exploit_dropped`. Its ``__init__`` keywords are its workflow options, listed in its class
docstring. ``emews.testing.SchedulerConformance`` checks a scheduler against this contract.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from emews.core.direction import Direction
from emews.core.results import StoredReport
from emews.core.space import Space
from emews.training.messages import CONTINUE, Decision

Mode = Literal["min", "max"]


class TrialScheduler(abc.ABC):
    """Decides from a trial's reports whether it continues, stops, pauses or exploits.

    Pure decision logic: no I/O, no clock, no randomness but what ``seed`` gives, so that the
    reports of an earlier run rebuild its state (:meth:`rebuild`). ``metric`` (default: the
    objective's metric) is read from each report; ``mode`` (default: the objective's direction)
    says whether smaller or larger is better (:meth:`loss` turns a report into a loss).
    Subclasses implement :meth:`on_report`; their ``__init__`` keywords are their workflow options.
    """

    def __init__(self, metric: str | None = None, mode: Mode | None = None) -> None:
        self.metric = metric
        self.mode = mode
        self.space: Space | None = None
        self.seed = 0

    def bind(
        self, *, metric: str, direction: str | Direction, space: Space | None = None, seed: int = 0
    ) -> TrialScheduler:
        """Fill the defaults from the workflow: metric, mode, the parameter space, the seed."""
        self.metric = self.metric or metric
        self.mode = self.mode or Direction.of(direction).mode
        self.space = space
        self.seed = seed
        return self

    @property
    def spans_pools(self) -> bool:
        """Whether its decisions follow from the reports alone, in order, so that each worker pool
        may run one that replays the others' reports (docs/postgres.md, "Pools"); not by default
        (promotions, exploits and waits happen in one place)."""
        return False

    @property
    def full_course(self) -> int | None:
        """The steps a trial trains at most (ASHA's ``max_t``): a trial it ended there completed its
        course, whatever the answer an older emews stored (ASHA answered ``stop`` at ``max_t`` before
        f3134cc); ``None``: no such bound."""
        return None

    #: whether its decisions may exploit: a trial takes another trial's parameters (PBT), so the
    #: replicates of one point (``replicates: N``) would no longer share that point
    exploits: bool = False

    def loss(self, metrics: Mapping[str, Any]) -> float | None:
        """The report's metric signed so that smaller is better; ``None`` when missing or not finite."""
        value = metrics.get(self.metric or "value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        return Direction.of(self.mode).loss(float(value))

    def diverged(self, metrics: Mapping[str, Any]) -> bool:
        """Whether the report's metric is a number that is not finite (NaN, an infinity): a diverged
        model, worse than any number; the trial service stops such a trial without asking
        :meth:`on_report` (as Optuna's pruners prune a NaN intermediate value)."""
        value = metrics.get(self.metric or "value")
        return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isfinite(value)

    @abc.abstractmethod
    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        """The decision for ``trial`` after it reported ``metrics`` at ``step`` (with ``params``, the
        parameters it runs with). A report without a usable metric (:meth:`loss` is ``None``) continues
        (one whose metric is NaN or infinite never reaches it: :meth:`diverged`)."""

    def ended(self, trial: int) -> None:
        """``trial``'s task ended with its result: it reports no more and waits for nothing
        (default: :meth:`release`)."""
        self.release(trial)

    def rebuild(
        self,
        reports: Iterable[StoredReport],
        params: Mapping[int, Mapping[str, Any]],
        promoted: Iterable[tuple[int, int]] = (),
        ended: Iterable[int] = (),
        exploits: Mapping[int, Decision] | None = None,
    ) -> None:
        """Restore the state of an earlier run: :meth:`replay` its reports in arrival order (each
        trial with the parameters it started with; ``exploits``: the exploits the run made, by the
        seq of the report they answered), then its promotions (``(trial, step it paused at)``, in
        order), then the trials that ended."""
        for report in reports:
            self.take_in(report, params.get(report.trial, {}), (exploits or {}).get(report.seq))
        for trial, step in promoted:
            self.was_promoted(trial, step)
        for trial in ended:
            self.ended(trial)

    def take_in(self, report: StoredReport, params: Mapping[str, Any], exploit: Decision | None) -> None:
        """Rebuilding: :meth:`replay` ``report`` unless it :meth:`diverged`: the run stopped that trial
        without asking the scheduler (PBT, which seeds each draw with the reports it saw, would draw
        otherwise than the run did)."""
        if not self.diverged(report.metrics):
            self.replay(report, params, exploit)

    def replay(self, report: StoredReport, params: Mapping[str, Any], exploit: Decision | None) -> None:
        """Rebuilding: take in one report of an earlier run (``exploit``: the exploit that answered
        it). Default: :meth:`on_report`, its decision dropped; a scheduler that exploits applies the
        recorded exploit instead of drawing a new one."""
        self.on_report(report.trial, report.step, report.metrics, params)

    def exploit_dropped(self, trial: int) -> None:  # noqa: B027 - a hook, nothing by default
        """The ``exploit`` just answered to ``trial`` was not made: the donor has no durable checkpoint
        of its own (none yet, or none since its own last clone), or the run's budget or walltime
        overruled it. The trial goes on with its parameters from where it is, and no lineage row is
        stored, so a rebuild replays that report with no exploit: undo what the exploit changed."""

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

    def was_promoted(self, trial: int, step: int) -> None:  # noqa: B027 - a hook, nothing by default
        """Rebuilding: ``trial``, paused at ``step``, was promoted in the earlier run."""

    def release(self, trial: int) -> None:  # noqa: B027 - a hook, nothing by default
        """``trial`` ends where it paused (its result so far is final): it is never promoted."""

    def least_promising(self, trials: Iterable[int]) -> int:
        """Of the paused ``trials``, the one to end first when nothing else can run (default: the oldest)."""
        return min(trials)

    def check(self) -> None:  # noqa: B027 - a hook, nothing by default
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
