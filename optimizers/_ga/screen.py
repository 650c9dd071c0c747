"""Surrogate pre-screening: breed ``screen`` times the children needed, evaluate the most promising.

With ``screen: k`` (k > 1) every generation (in ``async``: every batch of children) is bred ``k``
times over by the GA's own operators; a Gaussian process fitted on the evaluations so far
(Matern 5/2 with one length scale per parameter, in the space's unit coordinates) ranks the
children by their lower confidence bound, mean minus ``KAPPA`` standard deviations, and the best
ranked are the ones evaluated. Children that repeat an evaluated or submitted point come last
(they are evaluated only when too few children are new). Breeding, selection and replacement stay the GA's; the screen only chooses among
children the GA would have produced. ``screen: 1`` evaluates every child as bred (CANDLE's GA).

Failed evaluations are learned too, as the loss the GA's failure policy gave them; where that is
not finite (``failure: penalty``, ``inf``: the default) as the worst loss learned so far, as
``bayes`` scores them (``failure_penalty: worst``): the region looks bad without distorting the
model's scale. Leaving them out (as the screen did before) let the lower confidence bound favour
a failing region, unexplored in the model's eyes: x > 0 failing on [-1, 1]^2, population 8, 40
children after the first generation, seeds 1-7, 2 workers, 138 of 280 failed with ``screen: 10``
and 37 with ``screen: 1``; learning the failures, 11 (``async``, one worker:
121 and 37; 15).

Cost: the kernel's hyperparameters are re-optimized when the evaluations grew by a tenth since
the last time (once there are more than ``MAX_POINTS``: doubled), on at most ``MAX_POINTS`` of them (the best half plus the most recent); in
between the model is refitted with the kernel fixed (one Cholesky factorization). BLAS runs
on one thread meanwhile (``optimizers._blas``).

On BBOB (``bench/quality.py``, f1, 3, 8, 10, 15, 17, 20, 21 in 2, 5, 10-D, budget 20 x D, 4
workers, 2 seeds) the GA was within 3x of the best of Optuna's TPE, TPE multivariate and CMA-ES
on 19 of 24 problems without screening, 22 with ``screen: 5`` and 24 with ``screen: 10``
(instances 1-5; instances 6-10: 18, 23, 23).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from emews.core.space import Space

from .._blas import one_blas_thread
from .._training_set import window
from .individual import Individual

if TYPE_CHECKING:  # scikit-learn is imported by a screen that fits (``emews check`` never does)
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import Kernel

#: evaluations the model needs before it screens (fewer: the first children bred are taken)
MIN_OBSERVATIONS = 5
#: the most evaluations the model is fitted on (the best half plus the most recent)
MAX_POINTS = 200
#: the lower confidence bound's weight on the standard deviation
KAPPA = 1.0
#: growth of the evaluations since the last hyperparameter fit that triggers the next one
HYPERFIT_GROWTH = 0.1
#: the same once the last fit already had ``MAX_POINTS``: the fit's size stays the same from
#: then on, and a tenth more of 200,000 results (``bench/scale.py`` at 100,000 workers) was a
#: 1-2 s hyperparameter fit in the optimizer's thread every few seconds
WINDOW_HYPERFIT_GROWTH = 1.0


class SurrogateScreen:
    """Remembers the evaluations (:meth:`observe`) and picks the most promising children (:meth:`pick`)."""

    def __init__(self, factor: int, space: Space, hyperfit_growth: float = HYPERFIT_GROWTH) -> None:
        """``hyperfit_growth``: the growth of the evaluations below ``MAX_POINTS`` that triggers
        a hyperparameter fit (the wide breeder's: ``WINDOW_HYPERFIT_GROWTH``, see ``_ga.breeding``)."""
        if factor > 1:  # the filters go in now, before any worker runs (see ``optimizers._quiet``)
            from .._quiet import quiet_model_fits

            quiet_model_fits()
        self.factor = factor
        self.space = space
        self.hyperfit_growth = hyperfit_growth
        self._X: list[list[float]] = []
        self._y: list[float] = []  # inf: a failure, fitted as ``_worst``
        #: the worst finite loss learned (``None``: none yet, the model cannot be fitted)
        self._worst: float | None = None
        self._taken: set[tuple[float, ...]] = set()
        self._kernel: Kernel | None = None
        self._hyperfit_at = 0
        #: how many times the model was fitted, and with its hyperparameters re-optimized
        self.fits = 0
        self.hyperfits = 0

    @property
    def active(self) -> bool:
        """Whether children are screened at all (``screen`` above 1)."""
        return self.factor > 1

    def observe(self, individuals: Sequence[Individual]) -> None:
        """Learn the scored individuals by the loss the GA selects on (a failure's: its policy's)."""
        if not self.active:
            return  # nothing is ever picked
        for ind in individuals:
            self.learn(ind, ind.loss)

    def learn(self, point: dict, loss: float | None) -> None:
        """Learn one evaluation; ``loss`` ``None`` or not finite: a failure, learned as the worst
        finite loss learned by the time the model is fitted."""
        coords = self.space.to_unit(point)
        self._taken.add(tuple(coords))
        self._X.append(coords)
        if loss is None or not np.isfinite(loss):
            self._y.append(math.inf)
            return
        self._y.append(float(loss))
        if self._worst is None or loss > self._worst:
            self._worst = float(loss)

    def pick(self, candidates: Sequence[Individual], n: int) -> list[Individual]:
        """``n`` of the ``candidates``: the new ones best predicted first (before the model has
        ``MIN_OBSERVATIONS`` evaluations, in their order), then, when fewer than ``n`` are new,
        repeats in their order. The picks count as taken: they are about to be evaluated."""
        fresh: dict[tuple[float, ...], Individual] = {}
        repeats: list[Individual] = []
        for child in candidates:
            key = tuple(self.space.to_unit(child))
            if key in self._taken or key in fresh:
                repeats.append(child)
            else:
                fresh[key] = child
        keys = list(fresh)
        if len(keys) > n and len(self._y) >= MIN_OBSERVATIONS and self._worst is not None:
            with one_blas_thread():
                mean, std = self._model().predict(np.array(keys), return_std=True)
            keys = [keys[i] for i in np.argsort(mean - KAPPA * std, kind="stable")]
        keys = keys[:n]
        self._taken.update(keys)
        return [fresh[key] for key in keys] + repeats[: n - len(keys)]

    def _model(self) -> GaussianProcessRegressor:
        from sklearn.gaussian_process import GaussianProcessRegressor

        X, y = np.array(self._X), np.array(self._y)
        y[~np.isfinite(y)] = self._worst
        if len(y) > MAX_POINTS:
            X, y = window(X, y, MAX_POINTS)
        growth = self.hyperfit_growth if self._hyperfit_at < MAX_POINTS else WINDOW_HYPERFIT_GROWTH
        hyperfit = self._kernel is None or len(self._y) >= self._hyperfit_at * (1 + growth)
        model = GaussianProcessRegressor(
            self._new_kernel(X.shape[1]) if hyperfit else self._kernel,
            normalize_y=True,
            optimizer="fmin_l_bfgs_b" if hyperfit else None,
        )
        model.fit(X, y)  # hyperparameters at their bounds: a valid model still (warning silenced)
        self.fits += 1
        if hyperfit:
            self.hyperfits += 1
            self._kernel = model.kernel_
            self._hyperfit_at = len(self._y)
        return model

    def _new_kernel(self, dims: int) -> Kernel:
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        start = self._kernel  # warm start from the last fit
        if start is not None:
            return start
        return ConstantKernel(1.0, (1e-3, 1e3)) * Matern(np.ones(dims), (1e-2, 1e2), nu=2.5) + WhiteKernel(
            1e-4, (1e-8, 1e-1)
        )
