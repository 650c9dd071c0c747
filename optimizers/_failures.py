"""The loss a failed evaluation (``loss == inf``) is given, so that a model-based or evolutionary
optimizer can go on learning from it. One policy for every built-in optimizer:

``worst``    the worst successful loss of the run so far: the region looks bad without
             distorting the scale (the default);
``mean``     the mean successful loss of a cohort the caller names (the GA's generation or
             steady-state population), ``worst`` without one;
``penalty``  a fixed number (``inf`` makes a failure lose every tournament);
``skip``     not learned from at all.

``worst`` and ``mean`` fall back to the penalty while no evaluation has succeeded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import fmean
from typing import TYPE_CHECKING

from emews.core.errors import OptionError

if TYPE_CHECKING:  # numpy is imported by the models that impute (``emews check`` builds none)
    import numpy as np

POLICIES = ("worst", "mean", "penalty", "skip")


class FailureImputation:
    """One run's failure policy; ``observe`` every successful loss, ``loss`` what a failure gets."""

    def __init__(self, kind: str = "worst", penalty: float = math.inf) -> None:
        if kind not in POLICIES:
            raise ValueError(f"unknown failure policy {kind!r}; allowed: {', '.join(POLICIES)}")
        penalty = float(penalty)
        if math.isnan(penalty):
            raise OptionError("penalty", "must be a number, not NaN")
        self.kind = kind
        self.penalty = penalty
        self.worst_seen: float | None = None

    @classmethod
    def from_option(cls, value: str | float) -> FailureImputation:
        """From a ``failure_penalty``-style option: a policy name or a fixed number."""
        if isinstance(value, str):
            return cls(value)
        return cls("penalty", value)

    def observe(self, losses: Iterable[float]) -> None:
        """Learn the successful (finite) losses among ``losses``."""
        for loss in losses:
            if math.isfinite(loss) and (self.worst_seen is None or loss > self.worst_seen):
                self.worst_seen = float(loss)

    def loss(self, cohort: Iterable[float] = ()) -> float | None:
        """What a failure scores now (``None``: leave it out); ``cohort``: the successful
        losses the ``mean`` policy averages."""
        if self.kind == "skip":
            return None
        if self.kind == "mean":
            ok = [v for v in cohort if math.isfinite(v)]
            if ok:
                return fmean(ok)
        if self.kind in ("worst", "mean") and self.worst_seen is not None:
            return self.worst_seen
        return self.penalty

    def impute(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A training set with the failures (non-finite ``y``) scored, or left out by ``skip``."""
        import numpy as np

        failed = ~np.isfinite(y)
        if not failed.any():
            return X, y
        value = self.loss(y[~failed])
        if value is None:
            return X[~failed], y[~failed]
        return X, np.where(failed, value, y)
