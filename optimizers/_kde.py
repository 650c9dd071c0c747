"""BOHB's density model: product-kernel KDEs over a space's free parameters, and ``l(x) / g(x)``.

A point is encoded as one number per free parameter: its unit coordinate (``to_unit``) for a
range or an ordered list, its index for a categorical. A :class:`KDE` is a mixture of one kernel
per observation plus a uniform prior component (weight ``1 / (n + 1)``, as Optuna's TPE, so that
a density of a few points is never zero anywhere):

continuous   a Gaussian truncated to ``[0, 1]``, bandwidth BOHB's normal reference
             ``1.06 * std * n ** (-1 / (d + 4))``, floored at ``min_bandwidth * n ** (-1 / (d + 4))``
categorical  Optuna's kernel: the observed value weighs ``1 + 1/n``, every value ``1/n``, normalized

:func:`propose` draws candidates around the good set's points (BOHB: a random good point, each
continuous coordinate from a truncated normal ``bandwidth_factor`` times wider) and returns the
one that maximizes ``log l(x) - log g(x)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtr

from emews.core.space import Categorical, Dimension, Ordered, Space

#: BOHB's normal-reference factor (statsmodels' ``normal_reference``)
NORMAL_REFERENCE = 1.06


@dataclass(frozen=True)
class Encoding:
    """How a space's free parameters become a vector: ``choices[j]`` is 0 for a continuous
    coordinate, else the number of values of a categorical."""

    space: Space
    names: tuple[str, ...]
    dims: tuple[Dimension, ...]
    choices: np.ndarray

    @classmethod
    def of(cls, space: Space) -> Encoding:
        free = space.free
        dims = tuple(free.values())
        choices = np.array([_choices(d) for d in dims], dtype=int)
        return cls(space, tuple(free), dims, choices)

    @property
    def size(self) -> int:
        return len(self.names)

    def encode(self, point: Mapping[str, Any]) -> np.ndarray:
        """``point`` as a vector (unit coordinates, categorical indices)."""
        return np.array(
            [
                float(dim.encode(point[name])) if n else dim.to_unit(point[name])
                for name, dim, n in zip(self.names, self.dims, self.choices, strict=True)
            ],
            dtype=float,
        )

    def decode(self, x: np.ndarray) -> dict[str, Any]:
        """The point of vector ``x``, constants filled in."""
        free = {
            name: dim.decode(int(v)) if n else dim.from_unit(float(v))
            for name, dim, n, v in zip(self.names, self.dims, self.choices, x, strict=True)
        }
        return {name: free[name] if name in free else dim.first for name, dim in self.space.dimensions.items()}


def _choices(dim: Dimension) -> int:
    """Values of an unordered categorical (its kernel is discrete), else 0 (continuous)."""
    return len(dim.values) if isinstance(dim, Categorical) and not isinstance(dim, Ordered) else 0


class KDE:
    """A product-kernel density of ``data`` (rows of encoded points) with a uniform prior component."""

    def __init__(self, data: np.ndarray, choices: np.ndarray, min_bandwidth: float) -> None:
        self.data = np.asarray(data, dtype=float)
        self.choices = choices
        n, d = self.data.shape
        self.continuous = choices == 0
        shrink = n ** (-1.0 / (d + 4))
        std = self.data.std(axis=0) if n > 1 else np.zeros(d)
        self.bandwidth = np.clip(np.maximum(NORMAL_REFERENCE * std * shrink, min_bandwidth * shrink), 1e-3, 1.0)
        self.weight = 1.0 / n  # categorical smoothing: every value weighs 1/n besides the observed one

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """Log density at each row of ``x``."""
        x = np.atleast_2d(x)
        n = len(self.data)
        log_kernels = np.zeros((len(x), n))
        for j in range(self.data.shape[1]):
            if self.continuous[j]:
                log_kernels += _log_truncnorm(x[:, j][:, None], self.data[:, j][None, :], self.bandwidth[j])
            else:
                c = int(self.choices[j])
                same = x[:, j][:, None] == self.data[:, j][None, :]
                log_kernels += np.log(np.where(same, 1.0 + self.weight, self.weight) / (1.0 + c * self.weight))
        # the prior component: uniform over the unit cube and the categorical values
        log_prior = -float(np.sum(np.log(self.choices[~self.continuous]))) if (~self.continuous).any() else 0.0
        stacked = np.concatenate([log_kernels, np.full((len(x), 1), log_prior)], axis=1)
        return _logsumexp(stacked) - math.log(n + 1)

    def sample(self, rng: np.random.Generator, count: int, widen: float) -> np.ndarray:
        """``count`` points around the data: a random observation each, continuous coordinates from a
        normal ``widen`` times the bandwidth truncated to [0, 1], categoricals from their kernel."""
        n, d = self.data.shape
        centres = self.data[rng.integers(0, n, size=count)]
        out = centres.copy()
        for j in range(d):
            if self.continuous[j]:
                out[:, j] = _truncnorm_draw(rng, centres[:, j], min(widen * self.bandwidth[j], 1.0))
            else:
                c = int(self.choices[j])
                keep = rng.random(count) < 1.0 / (1.0 + c * self.weight)  # then uniform: the kernel's odds
                out[:, j] = np.where(keep, centres[:, j], rng.integers(0, c, size=count))
        return out


def propose(
    good: KDE,
    bad: KDE,
    encoding: Encoding,
    rng: np.random.Generator,
    *,
    samples: int,
    widen: float,
) -> tuple[dict[str, Any], float]:
    """The candidate (of ``samples`` drawn around the good points) with the highest ``l(x)/g(x)``,
    scored where it lands in the space (an integer or an ordered value rounds); and its log ratio."""
    candidates = good.sample(rng, samples, widen)
    points = [encoding.decode(x) for x in candidates]
    snapped = np.array([encoding.encode(p) for p in points])
    score = good.logpdf(snapped) - bad.logpdf(snapped)
    best = int(np.argmax(score))
    return points[best], float(score[best])


def split(losses: Sequence[float], dims: int, quantile: float) -> int:
    """How many of ``losses`` (sorted, best first) form the good set: BOHB's
    ``max(d + 1, quantile * n)``, at most half of the finite ones, at least one."""
    finite = sum(1 for loss in losses if math.isfinite(loss))
    return max(1, min(max(dims + 1, math.ceil(quantile * finite)), finite // 2))


def _log_truncnorm(x: np.ndarray, mean: np.ndarray, sd: float) -> np.ndarray:
    """Log density at ``x`` of normals around ``mean`` with deviation ``sd``, truncated to [0, 1]."""
    mass = ndtr((1.0 - mean) / sd) - ndtr(-mean / sd)
    return -0.5 * ((x - mean) / sd) ** 2 - math.log(sd * math.sqrt(2 * math.pi)) - np.log(np.maximum(mass, 1e-300))


def _truncnorm_draw(rng: np.random.Generator, mean: np.ndarray, sd: float) -> np.ndarray:
    """One draw per ``mean`` from a normal of deviation ``sd`` truncated to [0, 1] (inverse CDF)."""
    from scipy.special import ndtri

    low, high = ndtr(-mean / sd), ndtr((1.0 - mean) / sd)
    u = low + rng.random(len(mean)) * np.maximum(high - low, 0.0)
    return np.clip(mean + sd * ndtri(np.clip(u, 1e-300, 1 - 1e-16)), 0.0, 1.0)


def _logsumexp(a: np.ndarray) -> np.ndarray:
    top = a.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(a - top).sum(axis=1, keepdims=True)))[:, 0]
