"""Asynchronous successive halving (ASHA; Li et al., MLSys 2020), stopping and promotion variants.

Rungs sit at ``grace_period * reduction_factor**k`` steps below ``max_t``. The first time a
trial reaches a rung its metric is recorded there, highest rung first:

``stopping``   (``rule: rank``, the default) a trial arriving at a rung goes on if it ranks among
               the best ``ceil(n / reduction_factor)`` of the ``n`` trials recorded there, itself
               counted (ties go on). The first trial at a rung passes it alone (the free pass):
               its rank is checked again at each of its later reports until its next rung, so it
               stops as soon as trials that reached the rung after it outrank it. With
               ``free_pass: improving`` it also stops as soon as its loss is worse than its own
               loss at that rung: alone there, its only peer is itself, and a loss that rose since
               the rung (boosting that overfits, a diverging run) says it is past its best. No
               trial waits.
               ``rule: quantile`` is Ray Tune's ASHAScheduler: the trial stops when its loss is
               worse than the ``1/reduction_factor`` quantile of the losses recorded *earlier* at
               that rung, once (a trial alone at a rung passes it for good).
``promotion``  (the paper's rule) the trial continues only if it is among the best
               ``n // reduction_factor`` of the ``n`` trials recorded at that rung, else it
               pauses: its task ends, it waits on the optimizer rank with its checkpoint, and
               the distributor runs it again as soon as :meth:`ASHA.promotable` names it (it has
               since become good enough; the highest rung is promoted first, as the paper's
               ``get_job``). The promoted trial resumes from its checkpoint (``ctx.restore()``)
               and its reports go on at the step it reached. With ``resource`` (the name of the
               parameter that says how many steps a task trains, e.g. ``epochs``) every rung ends
               the task, and a promoted task is dispatched with that parameter raised to the next
               rung (or ``max_t``): each run of a trial trains from one rung to the next.

A trial that reaches ``max_t`` steps is told to complete (``complete``, not ``stop``): it has had
its full budget, and is counted ``completed``, not stopped early.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from emews.core.errors import OptionError
from emews.training.messages import CONTINUE, Action, Decision
from emews.training.schedulers.trial_scheduler import Mode, TrialScheduler, quantile

STOP = Decision(Action.STOP)
COMPLETE = Decision(Action.COMPLETE)
PAUSE = Decision(Action.PAUSE)
#: ``free_pass`` values: how long the first trial at a rung keeps passing it alone
FREE_PASSES = ("ranked", "improving")


def check_steps(grace_period: int, max_t: int, reduction_factor: int) -> None:
    """``1 <= grace_period <= max_t`` and ``reduction_factor >= 2``, or a ``ValueError`` naming the option."""
    if grace_period < 1:
        raise OptionError("grace_period", f"must be at least 1, got {grace_period}")
    if max_t < grace_period:
        raise OptionError("max_t", f"must be at least grace_period ({grace_period}), got {max_t}")
    if reduction_factor < 2:
        raise OptionError("reduction_factor", f"must be at least 2, got {reduction_factor}")


class ASHA(TrialScheduler):
    """Asynchronous successive halving.

    Options (workflow ``trial_scheduler.options``):

    max_t             the steps a trial trains at most: at ``max_t`` it completes (81)
    grace_period      the first rung, in steps (1)
    reduction_factor  rungs ``grace_period * reduction_factor**k`` apart; the share of a rung
                      that goes on is ``1/reduction_factor`` (3)
    variant           stopping | promotion (stopping)
    rule              stopping only: rank (the best ``ceil(n / reduction_factor)`` of the
                      rung go on; the first at a rung is checked again at each report until
                      its next rung) | quantile (Ray Tune's rule) (rank)
    free_pass         rule rank only: how long the first trial at a rung keeps passing it alone:
                      ranked (while it ranks among the best of the rung, checked at each report
                      until its next rung) | improving (that, and while its loss is no worse than
                      its own loss at the rung) (ranked)
    resource          promotion only: the parameter that says how many steps a task trains; each
                      rung ends the task and a promotion raises it to the next rung (None)
    metric            the reported metric the rungs compare (default: the objective's metric)
    mode              min | max (default: the objective's direction)
    """

    def __init__(
        self,
        max_t: int = 81,
        grace_period: int = 1,
        reduction_factor: int = 3,
        variant: Literal["stopping", "promotion"] = "stopping",
        metric: str | None = None,
        mode: Mode | None = None,
        resource: str | None = None,
        rule: Literal["rank", "quantile"] = "rank",
        free_pass: Literal["ranked", "improving"] = "ranked",
    ) -> None:
        super().__init__(metric, mode)
        check_steps(grace_period, max_t, reduction_factor)
        if resource is not None and variant != "promotion":
            raise OptionError("resource", "needs variant: promotion (only promoted trials get more resource)")
        if rule not in ("rank", "quantile"):
            raise OptionError("rule", f"must be rank or quantile, got {rule!r}")
        if free_pass not in FREE_PASSES:
            raise OptionError("free_pass", f"must be {' or '.join(FREE_PASSES)}, got {free_pass!r}")
        self.max_t = max_t
        self.reduction_factor = reduction_factor
        self.variant = variant
        self.resource = resource
        self.rule = rule
        self.free_pass = free_pass
        self.rungs: list[int] = []
        milestone = grace_period
        while milestone < max_t:
            self.rungs.append(milestone)
            milestone *= reduction_factor
        #: rung milestone -> trial -> loss recorded there, in arrival order
        self.recorded: dict[int, dict[int, float]] = {m: {} for m in self.rungs}
        #: promotion variant: paused trial -> the rung it waits at
        self.paused: dict[int, int] = {}
        #: paused trial -> the step of the report that paused it (what a stored promotion names: a
        #: trial that reports every few steps pauses at a rung below that step)
        self.paused_at: dict[int, int] = {}

    @property
    def full_course(self) -> int | None:
        return self.max_t

    @property
    def spans_pools(self) -> bool:
        """The stopping variant decides from the rungs' reports alone; promotions wait in one place."""
        return self.variant == "stopping"

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        loss = self.loss(metrics)
        if loss is None:
            return CONTINUE
        if step >= self.max_t:
            return COMPLETE
        if self.variant == "stopping" and self.rule == "rank":
            return self._rank(trial, step, loss)
        for milestone in reversed(self.rungs):
            rung = self.recorded[milestone]
            if step < milestone or trial in rung:
                continue
            earlier = list(rung.values())
            rung[trial] = loss
            if self.variant == "stopping":
                cutoff = quantile(earlier, 1 / self.reduction_factor)
                return STOP if cutoff is not None and loss > cutoff else CONTINUE
            if self.resource is None and self._in_top(milestone, trial):
                self._unpause(trial)
                return CONTINUE
            self.paused[trial] = milestone  # with ``resource`` a trial in the top is promotable at once
            self.paused_at[trial] = step
            return PAUSE
        return CONTINUE

    def _rank(self, trial: int, step: int, loss: float) -> Decision:
        """The rank rule: recorded at the highest rung ``step`` reached (once), ``trial`` goes on
        if it ranks among the best ``ceil(n / reduction_factor)`` recorded there; checked on
        arrival, and at every report for the trial recorded first (it arrived alone), which with
        ``free_pass: improving`` also stops once its loss is worse than its own there."""
        reached = [m for m in self.rungs if m <= step]
        if not reached:
            return CONTINUE
        rung = self.recorded[reached[-1]]
        if trial in rung:
            if trial != next(iter(rung)):
                return CONTINUE  # judged on arrival, with others there
            if self.free_pass == "improving" and loss > rung[trial]:
                return STOP  # the free pass lasts while it improves on its loss at the rung
        mine = rung.setdefault(trial, loss)
        better = sum(1 for other in rung.values() if other < mine)  # ties go on, as Optuna's
        return CONTINUE if better < -(-len(rung) // self.reduction_factor) else STOP

    def _in_top(self, milestone: int, trial: int) -> bool:
        """Whether ``trial`` is among the best ``n // reduction_factor`` recorded at ``milestone``
        (ties go to the trial recorded first)."""
        rung = self.recorded[milestone]
        ranked = sorted(rung, key=lambda t: rung[t])  # stable: arrival order breaks ties
        return trial in ranked[: len(ranked) // self.reduction_factor]

    def promotable(self) -> list[int]:
        """Paused trials now among the best of their rung (promotion variant), highest rung first."""
        return [t for t, m in sorted(self.paused.items(), key=lambda item: -item[1]) if self._in_top(m, t)]

    def waiting(self) -> list[int]:
        return list(self.paused)

    def promote(self, trial: int) -> int | None:
        """``trial`` continues from its checkpoint: it no longer waits. Returns the step it now
        trains to (the next rung, or ``max_t``)."""
        milestone = self._unpause(trial)
        if milestone is None:
            return None
        higher = [m for m in self.rungs if m > milestone]
        return higher[0] if higher else self.max_t

    def was_promoted(self, trial: int, step: int) -> None:
        """Rebuilding: ``trial``, paused by its report of ``step``, was promoted."""
        if trial in self.paused and self.paused_at.get(trial) == step:
            self._unpause(trial)

    def release(self, trial: int) -> None:
        """``trial`` ends where it paused: it is no longer a candidate for promotion."""
        self._unpause(trial)

    def _unpause(self, trial: int) -> int | None:
        """``trial`` no longer waits; the rung it waited at (``None``: it did not)."""
        self.paused_at.pop(trial, None)
        return self.paused.pop(trial, None)

    def promise(self, trial: int) -> tuple[int, float]:
        """How far ``trial`` got, to order paused trials: its rung, then minus its loss there."""
        milestone = self.paused.get(trial)
        return (-1, 0.0) if milestone is None else (milestone, -self.recorded[milestone][trial])

    def least_promising(self, trials: Iterable[int]) -> int:
        """Of ``trials`` (paused here), the one to end first: lowest rung, then worst loss there."""
        return min(trials, key=self.promise)
