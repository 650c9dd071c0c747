"""The GA's options (the workflow's ``optimizer.options``), checked once with clear messages."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .failures import FAILURE_POLICIES

STRATEGIES = ("simple", "mu_plus_lambda", "async")
REPLACEMENTS = ("worst", "tournament")


@dataclass(frozen=True)
class GAOptions:
    population: int = 16
    generations: int | None = None
    cxpb: float = 0.5
    mutpb: float = 0.5
    indpb: float | None = None
    cx_indpb: float = 0.5
    tournament: int = 3
    seed: int | None = None
    strategy: str = "simple"
    mu: int | None = None
    lambda_: int | None = None
    failure: str = "penalty"
    penalty: float = math.inf
    hall_of_fame: int = 10
    replacement: str = "worst"
    in_flight: int | None = None

    def __post_init__(self) -> None:
        for name in ("cxpb", "mutpb", "indpb", "cx_indpb", "penalty"):
            object.__setattr__(self, name, _number(name, getattr(self, name)))
        _int_at_least("population", self.population, 2)
        if self.generations is not None:
            _int_at_least("generations", self.generations, 0)
        for name in ("cxpb", "mutpb", "cx_indpb") + (("indpb",) if self.indpb is not None else ()):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must be a probability in [0, 1], got {value!r}")
        _int_at_least("tournament", self.tournament, 1)
        _int_at_least("hall_of_fame", self.hall_of_fame, 1)
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy: unknown strategy {self.strategy!r}; allowed: {', '.join(STRATEGIES)}")
        if self.failure not in FAILURE_POLICIES:
            raise ValueError(f"failure: unknown policy {self.failure!r}; allowed: {', '.join(FAILURE_POLICIES)}")
        if self.replacement not in REPLACEMENTS:
            raise ValueError(f"replacement: unknown {self.replacement!r}; allowed: {', '.join(REPLACEMENTS)}")
        if self.strategy == "mu_plus_lambda" and self.cxpb + self.mutpb > 1.0:
            raise ValueError(f"cxpb + mutpb must be at most 1 for mu_plus_lambda (got {self.cxpb} + {self.mutpb})")
        for name in ("mu", "lambda_", "in_flight", "seed"):
            value = getattr(self, name)
            if value is not None:
                _int_at_least(name, value, 0 if name == "seed" else 1)
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
