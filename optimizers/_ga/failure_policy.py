"""The GA's failure option: the shared :class:`~emews.optimizers._failures.FailureImputation`
(``penalty``, ``worst`` over the run, ``mean`` of the cohort: the generation, or in steady-state
mode the current population), applied to individuals. ``skip`` is not offered: a GA ranks every
individual it evaluated."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from emews.core.errors import OptionError
from emews.core.results import Result

from .._failures import FailureImputation
from .individual import Individual

FAILURE_POLICIES = ("penalty", "worst", "mean")


class FailurePolicy(FailureImputation):
    """The GA's failure policy (default ``penalty`` = ``inf``: a failure loses every tournament)."""

    def __init__(self, kind: str = "penalty", penalty: float = math.inf) -> None:
        if kind not in FAILURE_POLICIES:
            raise OptionError("failure", f"unknown policy {kind!r}", ", ".join(FAILURE_POLICIES))
        super().__init__(kind, penalty)

    def assign(
        self, individuals: Sequence[Individual], results: Sequence[Result], cohort: Iterable[Individual] = ()
    ) -> None:
        """Score ``individuals`` with their ``results``; failures get the policy's loss.

        ``cohort`` adds already-scored successful members to the ``mean`` policy's pool.
        """
        for ind, result in zip(individuals, results, strict=False):
            ind.result = result
            if result.ok:
                ind.fitness.values = (result.loss,)
        self.observe(r.loss for r in results if r.ok)
        failed = [ind for ind in individuals if not ind.ok]
        if not failed:
            return  # the cohort is read only to score failures (once per result: O(population))
        ok_losses = [loss for ind in cohort if ind.ok and (loss := ind.loss) is not None]
        ok_losses += [r.loss for r in results if r.ok]
        for ind in failed:
            ind.fitness.values = (self.loss(ok_losses),)
