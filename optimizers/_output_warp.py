"""Output warping: the losses a surrogate is fitted on, made closer to Gaussian when the data say so.

A Gaussian process assumes Gaussian targets; losses are rarely that. A few large values (a
diverged training run, the walls of a Rosenbrock valley) stretch the scale so that every good
point looks alike, and a rugged landscape (Rastrigin) makes the fitted kernel short-sighted.
HEBO (Cowen-Rivers et al., the NeurIPS 2020 black-box optimization challenge) fits its models on
power-transformed targets. Always warping cost as much as it gained here: on smooth problems the
transform's curvature near the optimum slows the final convergence (Branin, 40 evaluations:
median precision 3e-4 raw, 3e-2 warped; ten runs each on 14 problems, ``bench/quality.py``).

So the warp is a model choice, made as a warped GP is (Snelson, Rasmussen and Ghahramani,
NIPS 2003): each time the kernel's hyperparameters are fitted, a GP on the raw losses and one on
their Yeo-Johnson transform compete by the likelihood of the *losses*, the warped one's marginal
likelihood plus the log-Jacobian of the transform (:attr:`Warp.log_jacobian`); the likelier
is used until the next hyperparameter fit. The transform is increasing, so the order of the
points, the best point and the training windows are those of the losses.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.preprocessing import PowerTransformer

#: fewer observations than this are fitted as they are (a transform fitted on three points is noise)
MIN_POINTS = 5


@dataclass(frozen=True)
class Warp:
    """Targets ``values`` made from losses, and ``log_jacobian``: the sum over the points of
    ``log dvalue/dloss``, which turns a density of the values into one of the losses;
    ``applied`` is false when the values are the losses themselves."""

    values: np.ndarray
    log_jacobian: float = 0.0
    applied: bool = False


def power_warp(y: np.ndarray) -> Warp:
    """``y`` standardized, Yeo-Johnson transformed and standardized again (order kept); ``y``
    itself (log-Jacobian 0) when it is too short, constant, or the transform is not finite."""
    y = np.asarray(y, dtype=float)
    spread = float(np.std(y)) if len(y) else 0.0
    if len(y) < MIN_POINTS or not spread > 0.0 or not np.all(np.isfinite(y)):
        return Warp(y)
    z = (y - float(np.mean(y))) / spread
    transformer = PowerTransformer(method="yeo-johnson")
    with warnings.catch_warnings():  # lambda at its search bounds: still an increasing map
        warnings.simplefilter("ignore")
        try:
            out = transformer.fit_transform(z[:, None]).ravel()
        except (ValueError, FloatingPointError):
            return Warp(y)
    lam = float(transformer.lambdas_[0])
    scale = float(transformer._scaler.scale_[0]) if transformer._scaler is not None else 1.0
    # d yeo-johnson / dz: (1 + z)^(lam - 1) for z >= 0, (1 - z)^(1 - lam) below
    slope = np.where(z >= 0, (lam - 1.0) * np.log1p(np.abs(z)), (1.0 - lam) * np.log1p(np.abs(z)))
    log_jacobian = float(slope.sum()) - len(y) * (math.log(scale) + math.log(spread))
    if not (np.all(np.isfinite(out)) and math.isfinite(log_jacobian)):
        return Warp(y)
    return Warp(out, log_jacobian, applied=True)
