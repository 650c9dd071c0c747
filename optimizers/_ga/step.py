"""The mutation step that adapts: Rechenberg's 1/5th success rule, per generation, capped at ``sigma``.

A child *succeeds* when it is fitter than the parent it was cloned from. After each generation
(in ``async``: each ``population`` results) the Gaussian step of every numeric gene is
multiplied by ``exp((rate - 1/5) / (4/5))``: it shrinks while fewer than a fifth of the children
improve on their parents (the search is near an optimum and must refine) and grows back when
more do. ``sigma`` (or 10% of the range) is where it starts and the most it becomes: letting it
grow beyond that (a factor up to 2) made the GA >= 3x worse than the best of Optuna's TPE, TPE
multivariate and CMA-ES on 8 of the 24 BBOB problems of ``bench/quality.py`` instead of 5 (f20,
Schwefel, strode into its bounds: 178 against 3.8 in 10-D). CANDLE's GA keeps ``sigma`` fixed:
``sigma_adapt: false``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .individual import Individual

#: the success rate at which the step stays as it is
TARGET_RATE = 0.2
#: bounds of the step's factor: a thousandth of ``sigma`` at least, ``sigma`` at most
MIN_SCALE, MAX_SCALE = 1e-3, 1.0


class StepAdaptation:
    """The step's factor (:attr:`scale`), from the children's successes since the last :meth:`adapt`."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.scale = 1.0
        #: the factor after each :meth:`adapt` (generation), for reports and tests
        self.history: list[float] = []
        self._children = 0
        self._successes = 0

    def observe(self, children: Iterable[Individual]) -> None:
        """Count the scored children that had a parent, and those fitter than it."""
        for child in children:
            parent = child.parent_fitness
            if parent is None or not child.fitness.valid:
                continue
            self._children += 1
            self._successes += child.fitness.wvalues > parent

    def adapt(self) -> None:
        """Apply the rule to the children observed since the last call (none: no change)."""
        if self.enabled and self._children:
            rate = self._successes / self._children
            factor = math.exp((rate - TARGET_RATE) / (1.0 - TARGET_RATE))
            self.scale = min(max(self.scale * factor, MIN_SCALE), MAX_SCALE)
        self._children = self._successes = 0
        self.history.append(self.scale)
