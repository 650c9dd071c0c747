"""The GA's options (the workflow's ``optimizer.options``), checked once with clear messages.

Defaults that depend on the run (``population``, ``strategy``) are left ``None`` here and
resolved by :meth:`GAOptions.resolved` once the budget and the workers are known.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from emews.core.errors import OptionError

from .failure_policy import FAILURE_POLICIES

STRATEGIES = ("simple", "mu_plus_lambda", "async")
#: from this many workers on, the default strategy is ``async`` (steady state): a generation
#: of a synchronous GA would leave most of them idle at its end
STEADY_STATE_WORKERS = 8
#: the default population: about this many generations fit the budget (within 8..100). At 10
#: (populations of 8, 12 and 20 for BBOB's budgets of 20 x D in 2, 5 and 10-D) the GA was within
#: 3x of the best of TPE, TPE multivariate and CMA-ES on 14 of 24 problems; at 25 (8 for all
#: three) on 17, and on 19 with the step adapting (bench/quality.py, instances 1-5)
GENERATIONS_IN_BUDGET = 25
REPLACEMENTS = ("worst", "tournament")


@dataclass(frozen=True)
class GAOptions:
    population: int | None = None
    generations: int | None = None
    cxpb: float = 0.5
    mutpb: float = 0.5
    indpb: float | None = None
    cx_indpb: float = 0.5
    tournament: int = 3
    seed: int | None = None
    strategy: str | None = None
    mu: int | None = None
    lambda_: int | None = None
    failure: str = "penalty"
    penalty: float = math.inf
    hall_of_fame: int = 10
    replacement: str = "worst"
    in_flight: int | None = None
    elitism: int = 1
    sigma_decay: float = 1.0
    sigma_adapt: bool = True
    screen: int = 10

    def resolved(self, budget: int, workers: int) -> GAOptions:
        """The options with the run-dependent defaults filled in: ``population`` about a 25th
        of the budget (8..100, a multiple of the workers when that fits), ``strategy`` ``async``
        from ``STEADY_STATE_WORKERS`` workers on, else ``simple`` (CANDLE's eaSimple)."""
        population = self.population
        if population is None:
            population = min(max(8, budget // GENERATIONS_IN_BUDGET), 100)
            if workers > 1 and population >= workers:
                population = -(-population // workers) * workers
        strategy = self.strategy or ("async" if workers >= STEADY_STATE_WORKERS else "simple")
        return dataclasses.replace(
            self, population=population, strategy=strategy, elitism=min(self.elitism, population - 1)
        )

    def __post_init__(self) -> None:
        for name in ("cxpb", "mutpb", "indpb", "cx_indpb", "penalty"):
            object.__setattr__(self, name, _number(name, getattr(self, name)))
        if self.population is not None:
            _int_at_least("population", self.population, 2)
        _int_at_least("elitism", self.elitism, 0)
        _int_at_least("screen", self.screen, 1)
        object.__setattr__(self, "sigma_decay", _number("sigma_decay", self.sigma_decay))
        if (
            isinstance(self.sigma_decay, bool)
            or not isinstance(self.sigma_decay, (int, float))
            or not 0.0 < self.sigma_decay <= 1.0
        ):
            raise OptionError("sigma_decay", f"must be a number in (0, 1], got {self.sigma_decay!r}")
        if not isinstance(self.sigma_adapt, bool):
            raise OptionError("sigma_adapt", f"must be true or false, got {self.sigma_adapt!r}")
        if self.generations is not None:
            _int_at_least("generations", self.generations, 0)
        for name in ("cxpb", "mutpb", "cx_indpb") + (("indpb",) if self.indpb is not None else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must be a probability in [0, 1], got {value!r}")
        _int_at_least("tournament", self.tournament, 1)
        _int_at_least("hall_of_fame", self.hall_of_fame, 1)
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise OptionError("strategy", f"unknown strategy {self.strategy!r}", ", ".join(STRATEGIES))
        if self.failure not in FAILURE_POLICIES:
            raise OptionError("failure", f"unknown policy {self.failure!r}", ", ".join(FAILURE_POLICIES))
        if self.replacement not in REPLACEMENTS:
            raise OptionError("replacement", f"unknown {self.replacement!r}", ", ".join(REPLACEMENTS))
        if self.strategy == "mu_plus_lambda" and self.cxpb + self.mutpb > 1.0:
            raise OptionError(
                "mutpb", f"cxpb + mutpb must be at most 1 for mu_plus_lambda (got {self.cxpb} + {self.mutpb})"
            )
        for name in ("mu", "lambda_", "in_flight", "seed"):
            value = getattr(self, name)
            if value is not None:
                _int_at_least(name, value, 0 if name == "seed" else 1)
        if self.population is not None:
            object.__setattr__(self, "mu", self.mu or self.population)
            object.__setattr__(self, "lambda_", self.lambda_ or self.population)


def _number(name: str, value: object) -> object:
    """Accept numbers written as strings (PyYAML reads ``1e-5`` as one); reject NaN."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"{name}: must be a number, got {value!r}") from None
    if isinstance(value, float) and math.isnan(value):
        raise ValueError(f"{name}: must be a number, not NaN")
    return value


def _int_at_least(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: must be an integer >= {low}, got {value!r}")
