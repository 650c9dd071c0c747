"""Asynchronous Hyperband: several ASHA brackets with growing grace periods (Li et al., 2020).

Bracket ``b`` is an ASHA whose first rung is at ``grace_period * reduction_factor**b``; trials
are dealt to brackets in turn, in the order of their first report, so aggressive and
conservative early stopping share the budget (the hedge Hyperband makes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from emews.core.errors import OptionError
from emews.training.messages import Decision
from emews.training.schedulers.asha import ASHA, check_steps
from emews.training.schedulers.trial_scheduler import Mode, TrialScheduler


class Hyperband(TrialScheduler):
    """Asynchronous Hyperband: ASHA brackets with growing grace periods.

    Options (workflow ``trial_scheduler.options``): ``brackets`` (how many; default: every
    bracket whose first rung is below ``max_t``, ``floor(log(max_t / grace_period,
    reduction_factor)) + 1``), and ASHA's ``max_t`` (81), ``grace_period`` (1, bracket 0's
    first rung), ``reduction_factor`` (3), ``variant`` (stopping | promotion), ``rule`` (rank |
    quantile), ``free_pass`` (ranked | improving), ``resource``, ``metric`` and ``mode``, for every
    bracket.
    """

    def __init__(
        self,
        max_t: int = 81,
        grace_period: int = 1,
        reduction_factor: int = 3,
        brackets: int | None = None,
        variant: Literal["stopping", "promotion"] = "stopping",
        metric: str | None = None,
        mode: Mode | None = None,
        resource: str | None = None,
        rule: Literal["rank", "quantile"] = "rank",
        free_pass: Literal["ranked", "improving"] = "ranked",
    ) -> None:
        super().__init__(metric, mode)
        check_steps(grace_period, max_t, reduction_factor)
        most = int(math.floor(math.log(max_t / grace_period, reduction_factor) + 1e-9)) + 1
        count = most if brackets is None else brackets
        if not 1 <= count <= most:
            raise OptionError(
                "brackets",
                f"must be between 1 and {most} for these max_t, grace_period and reduction_factor, got {brackets}",
            )
        self.brackets = [
            ASHA(
                max_t=max_t,
                grace_period=grace_period * reduction_factor**b,
                reduction_factor=reduction_factor,
                variant=variant,
                metric=metric,
                mode=mode,
                resource=resource,
                rule=rule,
                free_pass=free_pass,
            )
            for b in range(count)
        ]
        self.resource = resource
        #: trial -> its bracket's index
        self.bracket_of: dict[int, int] = {}

    def bind(self, **kwargs: Any) -> Hyperband:
        super().bind(**kwargs)
        for bracket in self.brackets:
            bracket.metric, bracket.mode = self.metric, self.mode
        return self

    @property
    def full_course(self) -> int | None:
        return self.brackets[0].max_t

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        index = self.bracket_of.setdefault(trial, len(self.bracket_of) % len(self.brackets))
        return self.brackets[index].on_report(trial, step, metrics, params)

    def _bracket(self, trial: int) -> ASHA:
        return self.brackets[self.bracket_of.get(trial, 0)]

    def promotable(self) -> list[int]:
        """Each bracket's promotable trials, the brackets taken in turn."""
        return [t for bracket in self.brackets for t in bracket.promotable()]

    def waiting(self) -> list[int]:
        return [t for bracket in self.brackets for t in bracket.waiting()]

    def promote(self, trial: int) -> int | None:
        return self._bracket(trial).promote(trial)

    def was_promoted(self, trial: int, step: int) -> None:
        self._bracket(trial).was_promoted(trial, step)

    def release(self, trial: int) -> None:
        self._bracket(trial).release(trial)

    def least_promising(self, trials: Iterable[int]) -> int:
        return min(trials, key=lambda t: self._bracket(t).promise(t))
