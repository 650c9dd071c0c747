"""The surrogate engine: fit once per batch of results, propose many points per fit.

scikit-optimize's ``Optimizer.ask(n, strategy="cl_min")`` refits the surrogate, hyperparameters
included, once per lie (plus once for its internal copy): 12 s for 4 points at 200 observations
on this machine. This engine keeps skopt's dimensions, surrogates (``cook_estimator``: GP with
a Matern kernel, RF and ET with ``return_std``) and acquisition formulas, but

* fits once per batch of results, on all results that arrived since the last fit;
* re-optimizes GP hyperparameters only when the history grew by ``hyperfit_growth``
  (warm-started from the last kernel); in between, and for every constant-liar step, the GP
  is refitted with a fixed kernel (one Cholesky factorization);
* bounds the GP's training set (``max_gp_points``: the best half plus the most recent) and the
  set its hyperparameters are optimized on (``max_hyperfit_points``, the same way), and can
  switch to a tree ensemble above ``switch_after`` observations;
* fits a GP on the losses or on their power transform, whichever explains them better
  (``output_warp``, see ``optimizers._output_warp``);
* maximizes the acquisition over random candidates plus perturbations of the best points,
  and picks batches by constant liar (GP) or by spreading the picks apart (trees);
* keeps a proposal's work bounded in the points in flight (thousands of workers): a GP learns
  at most ``MAX_LIES`` pending points as lies (evenly spaced over them when more are out; every
  pending point is still never proposed again), a batch takes at most ``LIAR_PICKS`` points by
  constant liar and the rest by Thompson sampling from the lied posterior over a bounded set of
  the best candidates. With at most that many points pending and asked (a few workers), the
  proposals are the same as without the bounds.

The engine is not thread-safe; one thread at a time owns it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular
from scipy.spatial.distance import cdist
from scipy.stats import norm
from sklearn.base import clone
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, Product, Sum
from skopt.learning.gaussian_process.gpr import _param_for_white_kernel_in_Sum
from skopt.learning.gaussian_process.kernels import WhiteKernel
from skopt.space import Real
from skopt.utils import cook_estimator, cook_initial_point_generator

from emews.core.seeds import fitted_seed

from .._blas import one_blas_thread
from .._failures import FailureImputation
from .._output_warp import power_warp
from .._quiet import quiet_model_fits
from .._training_set import window
from ._settings import LIAR_PICKS, MAX_LIES
from ._space import SpaceMap

#: lies per batch learned by a GP refit; later ones by a rank-one update (see ``_liar_batch``)
REFIT_LIES = 4
#: most candidates a batch is picked from (the best by acquisition)
MAX_BATCH_CANDIDATES = 16 * LIAR_PICKS


class Engine:
    """Holds the observations and turns them into proposals (skopt points)."""

    def __init__(
        self,
        space: SpaceMap,
        *,
        seed: int | None,
        n_initial_points: int = 10,
        initial_point_generator: str = "random",
        base_estimator: str = "GP",
        fallback_estimator: str = "ET",
        switch_after: int | None = None,
        max_gp_points: int = 200,
        max_hyperfit_points: int = 200,
        hyperfit_growth: float = 0.1,
        acq_func: str = "EI",
        xi: float = 0.01,
        kappa: float = 1.96,
        n_candidates: int = 2000,
        output_warp: bool | str = "auto",
        failures: FailureImputation | None = None,
        max_lies: float = MAX_LIES,
        liar_picks: float = LIAR_PICKS,
    ) -> None:
        quiet_model_fits()
        self.map = space
        self.sk = space.skopt
        self.rng = np.random.RandomState(fitted_seed(seed))  # any integer seeds it
        self.n_initial_points = n_initial_points
        self.base_estimator = base_estimator
        self.fallback_estimator = fallback_estimator
        self.switch_after = switch_after
        self.max_gp_points = max_gp_points
        self.max_hyperfit_points = max_hyperfit_points
        self.hyperfit_growth = hyperfit_growth
        #: a run of more than 128 workers (``bayes.WIDE``): a random wave of more than
        #: ``LIAR_PICKS`` points is one draw; otherwise draws stay one by one, as seeded before
        self.wide_wave = False
        self.acq_func = acq_func
        self.xi = xi
        self.kappa = kappa
        self.n_candidates = n_candidates
        self.output_warp = output_warp
        #: the bounds on a proposal's work (see the module's docstring; ``inf``: unbounded)
        self.max_lies = max_lies
        self.liar_picks = liar_picks
        #: the work of the last model proposal: points the GP was fitted on (lies included),
        #: pending points learned as lies, candidates the batch was picked from, Thompson picks
        self.last_work: dict[str, int] = {}  # output_warp auto: the last hyperparameter fit chose the warp
        self._kernels: dict[bool, Any] = {}  # auto: the last kernel of each model (warm starts)
        #: output_warp auto: whether each choice (one per hyperparameter fit) took the warp
        self.warp_choices: list[bool] = []
        self.failures = failures or FailureImputation()
        self.X: list[np.ndarray] = []  # transformed observations
        self.y: list[float] = []  # losses, inf for failures
        self.n_proposed = 0
        self.fits = 0
        self.hyperfits = 0
        #: after each model fit, up to this many runners-up (and at most a quarter of the
        #: observations) are kept in ``reserve`` (skopt points): the best candidates the batch
        #: did not take, spread apart, for workers that would otherwise wait on the next fit
        self.reserve_size = 0
        self.reserve: list[list[Any]] = []
        self._kernel = None  # last optimized GP kernel (white noise included)
        self._kernel_n = 0  # observations at the last hyperparameter fit
        self._initial: list[list[Any]] = []
        #: every dimension a plain range: a uniform point of the unit cube is a point of the space
        self._continuous = self.sk is not None and all(isinstance(d, Real) for d in self.sk.dimensions)
        self._gp_template: Any = None  # cook_estimator("GP") once; each fit clones it
        if self.sk is not None and initial_point_generator != "random" and n_initial_points > 1:
            gen = cook_initial_point_generator(initial_point_generator)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._initial = gen.generate(self.sk.dimensions, n_initial_points, random_state=self.rng)

    def skip_draws(self, points: int) -> None:
        """A resumed run: draw and drop the random points the earlier runs' first ``points`` took
        (those of the initial design), so that the design goes on where they left it instead of
        proposing their points again."""
        if self.sk is None:
            return
        for _ in range(min(points, self.n_initial_points) - len(self._initial)):
            self.sk.rvs(1, random_state=self.rng)

    # -- data ---------------------------------------------------------------------------------
    def tell(self, xs: Sequence[list[Any]], ys: Sequence[float]) -> None:
        """Record observations (skopt points and losses; ``inf`` marks a failure)."""
        if not xs or self.sk is None:
            return
        Xt = self.sk.transform([list(x) for x in xs])
        self.X.extend(np.asarray(Xt, dtype=float))
        self.y.extend(float(v) for v in ys)
        self.failures.observe(self.y[-len(xs) :])

    @property
    def n_told(self) -> int:
        return len(self.y)

    def _training_set(self) -> tuple[np.ndarray, np.ndarray]:
        return self.failures.impute(np.asarray(self.X, dtype=float), np.asarray(self.y, dtype=float))

    # -- proposals ----------------------------------------------------------------------------
    def propose(self, n: int, pending: Sequence[list[Any]] = ()) -> list[list[Any]]:
        """``n`` new skopt points; ``pending`` are points out for evaluation (not yet told).

        BLAS runs single-threaded meanwhile: the matrices are small, and OpenBLAS threads
        spin against the workers on a busy node (a 300-point Cholesky took 0.8 s instead of 20 ms).
        """
        with one_blas_thread():
            return self._propose(n, pending)

    def _propose(self, n: int, pending: Sequence[list[Any]]) -> list[list[Any]]:
        if n <= 0:
            return []
        if self.sk is None:  # nothing free to search
            self.n_proposed += n
            return [[] for _ in range(n)]
        out: list[list[Any]] = []
        n_finite = int(np.isfinite(np.asarray(self.y, dtype=float)).sum()) if self.y else 0
        while len(out) < n and (self.n_proposed < self.n_initial_points or n_finite < 2):
            if self.n_proposed < len(self._initial):
                out.append(list(self._initial[self.n_proposed]))
            elif (
                k := n - len(out) if n_finite < 2 else min(n - len(out), self.n_initial_points - self.n_proposed)
            ) > LIAR_PICKS and self.wide_wave:
                # a random wave of thousands of workers: one draw for all (skopt draws a point
                # at a time in 1 ms); a few workers' draws stay one by one, as seeded before
                out.extend(self.sk.rvs(k, random_state=self.rng))
                self.n_proposed += k - 1
            else:
                out.append(self.sk.rvs(1, random_state=self.rng)[0])
            self.n_proposed += 1
        if len(out) < n:
            out.extend(self._model_proposals(n - len(out), list(pending) + out))
        return [[_plain(v) for v in x] for x in out]

    def estimator_name(self) -> str:
        if self.switch_after is not None and self.n_told > self.switch_after:
            return self.fallback_estimator
        return self.base_estimator

    def _model_proposals(self, n: int, pending: list[list[Any]]) -> list[list[Any]]:
        X, y = self._training_set()
        name = self.estimator_name()
        if name == "GP" and len(y) > self.max_gp_points:
            X, y = window(X, y, self.max_gp_points)
        if name == "GP":  # the acquisition and the lies work in the units the GP is fitted in
            y = self._gp_targets(X, y)
        y_opt = float(np.min(y))
        sk = self.sk
        assert sk is not None, "a model proposes only in a space with something free"
        P_all = np.asarray(sk.transform(pending), dtype=float) if pending else np.empty((0, X.shape[1]))
        Pt = _evenly(P_all, self.max_lies)  # bounded: all of them while few are out
        # pending points: a GP learns them as lies; trees keep the new picks away from them
        model = self._fit(name, X, y, Pt)
        cands = self._candidates(X, y)
        taken = np.vstack([X, Pt]) if len(Pt) else X  # exact duplicates are never proposed
        radius = 0.05 * math.sqrt(X.shape[1])
        raw = self._acquisition(model, cands, y_opt)
        if len(Pt) < len(P_all):  # the pending points not learned: still never proposed again
            raw = np.where(_same_rows(cands, P_all), -np.inf, raw)
        n_reserve = min(self.reserve_size, len(y) // 4)  # runners-up: stale, early points are few
        reserve = self._spread_top(cands, raw, n_reserve + n, taken, radius) if n_reserve else []
        width = int(min(max(256, 16 * n), MAX_BATCH_CANDIDATES if n > self.liar_picks else math.inf))
        if len(cands) > width:  # the batch comes from the best candidates
            keep = np.argsort(-raw)[:width]
            cands, raw = cands[keep], raw[keep]
        if len(Pt) < len(P_all) and np.isfinite(raw).any():
            cands, raw = cands[np.isfinite(raw)], raw[np.isfinite(raw)]
        self.last_work = {"fit_points": len(y) + len(Pt), "lies": len(Pt), "candidates": len(cands), "thompson": 0}
        if name == "GP":
            chosen = self._liar_batch(model, cands, n, y_opt, taken)
        else:
            chosen = self._spread_batch(cands, raw, n, taken, Pt, radius, X, y)
        self.n_proposed += n
        if self.reserve_size > 0:  # the runners-up this fit ranked, away from the batch
            picked = np.asarray(chosen)
            far = [x for x in reserve if _min_dist(x[None, :], picked)[0] >= radius][:n_reserve]
            self.reserve = [[_plain(v) for v in x] for x in sk.inverse_transform(np.asarray(far))] if far else []
        return sk.inverse_transform(np.asarray(chosen))

    def _liar_batch(self, model: Any, cands: np.ndarray, n: int, y_opt: float, taken: np.ndarray) -> list[np.ndarray]:
        """Constant liar: after each pick the GP learns that the pick scored ``y_opt``.

        The first ``REFIT_LIES`` lies of a batch refit the GP with the kernel fixed (one
        Cholesky; the targets are re-normalized with the lie, which pulls the prior mean toward
        ``y_opt`` and explores more: it did better on Ackley-5 than exact conditioning). Later
        lies are a rank-one update of the posterior mean and covariance over the candidates
        (exact conditioning, microseconds), so large batches stay cheap.
        """
        X_lied = np.asarray(model.X_train_)
        y_std, y_mean = _gp_parts(model)
        y_lied = np.ravel(model.y_train_) * y_std + y_mean
        mu, cov, noise = _posterior(model, cands)
        dmin = _min_dist(cands, taken)
        used = np.zeros(len(cands), dtype=bool)
        chosen: list[np.ndarray] = []
        for j in range(n):
            if j >= self.liar_picks:  # the rest of a large batch: Thompson samples
                chosen += self._thompson(mu, cov, cands, n - j, used | (dmin < 1e-9))
                break
            if used.all():
                used[:] = False
            std = np.sqrt(np.maximum(np.diag(cov), 0.0))
            # never re-propose a point already observed, pending or picked (when avoidable)
            score = np.where(used | (dmin < 1e-9), -np.inf, self._acq(mu, std, y_opt))
            best = int(np.argmax(score))
            x = cands[best]
            chosen.append(x)
            used[best] = True
            dmin = np.minimum(dmin, np.sqrt(((cands - x) ** 2).sum(1)))
            if j < n - 1 and j < REFIT_LIES:
                X_lied, y_lied = np.vstack([X_lied, x[None, :]]), np.append(y_lied, y_opt)
                model = self._fixed_gp(model, X_lied, y_lied)
                mu, cov, noise = _posterior(model, cands)
            elif j < n - 1:
                s = cov[:, best].copy()
                denom = s[best] + noise
                mu = mu + s * ((y_opt - mu[best]) / denom)
                cov = cov - np.outer(s, s / denom)
        return chosen

    def _thompson(
        self, mu: np.ndarray, cov: np.ndarray, cands: np.ndarray, n: int, blocked: np.ndarray
    ) -> list[np.ndarray]:
        """``n`` picks, each the best candidate of one joint draw from the posterior (``mu``,
        ``cov`` over ``cands``, conditioned on the batch's lies so far) among those not yet
        taken: a matrix product per block of draws, no update per pick. When every candidate
        is taken, the rest are uniform points of the space (exploration)."""
        jitter = 1e-9 * max(float(np.mean(np.diag(cov))), 1e-12)
        factor = None
        for _ in range(4):
            try:
                factor = np.linalg.cholesky(cov + jitter * np.eye(len(cov)))
                break
            except np.linalg.LinAlgError:
                jitter *= 100.0
        if factor is None:  # independent draws then
            factor = np.diag(np.sqrt(np.maximum(np.diag(cov), 0.0)))
        blocked = blocked.copy()
        # identical candidates (a discrete space) are one: only the first of each can be picked
        first = np.unique(np.round(cands, 9) + 0.0, axis=0, return_index=True)[1]
        blocked[np.setdiff1d(np.arange(len(cands)), first)] = True
        out: list[np.ndarray] = []
        while len(out) < n and not blocked.all():
            draws = mu[:, None] + factor @ self.rng.standard_normal((len(cands), min(n - len(out), 1024)))
            for column in draws.T:
                if blocked.all():
                    break
                best = int(np.argmin(np.where(blocked, np.inf, column)))
                blocked[best] = True
                out.append(cands[best])
        self.last_work["thompson"] = len(out)
        if len(out) < n:
            out += list(self._snap(self.rng.uniform(0.0, 1.0, size=(n - len(out), cands.shape[1]))))
        return out

    def _spread_batch(
        self,
        cands: np.ndarray,
        raw: np.ndarray,
        n: int,
        taken: np.ndarray,
        spread: np.ndarray,
        radius: float,
        X: np.ndarray,
        y: np.ndarray,
    ) -> list[np.ndarray]:
        """Trees (the model does not change within a batch): best candidates, kept apart from
        each other and from the pending points."""
        chosen: list[np.ndarray] = []
        for _ in range(n):
            score = np.where(_min_dist(cands, taken) < 1e-9, -np.inf, raw)
            if len(spread):
                score = np.where(_min_dist(cands, spread) < radius, score - 1e12, score)
            best = int(np.argmax(score))
            x = cands[best]
            chosen.append(x)
            taken = np.vstack([taken, x[None, :]])
            spread = np.vstack([spread, x[None, :]]) if len(spread) else x[None, :]
            cands, raw = np.delete(cands, best, axis=0), np.delete(raw, best)
            if len(cands) == 0:
                cands = self._candidates(X, y)
                raw = np.zeros(len(cands))
        return chosen

    def _spread_top(
        self, cands: np.ndarray, score: np.ndarray, k: int, taken: np.ndarray, radius: float
    ) -> list[np.ndarray]:
        """Up to ``k`` candidates by decreasing ``score``, each ``radius`` away from ``taken``
        and from each other (greedy)."""
        order = np.argsort(-score)[: max(32 * k, 256)]
        top = cands[order]
        ok = _min_dist(top, taken) >= radius
        near = np.full(len(top), np.inf)  # each candidate's distance to the nearest taken so far
        out: list[np.ndarray] = []
        for i in range(len(top)):
            if ok[i] and near[i] >= radius:
                out.append(top[i])
                if len(out) >= k:
                    break
                near = np.minimum(near, _min_dist(top, top[i][None, :]))  # linear per pick, not in picks
        return out

    # -- surrogates ---------------------------------------------------------------------------
    def _fit(self, name: str, X: np.ndarray, y: np.ndarray, lies: np.ndarray | None = None) -> Any:
        """The surrogate on ``X, y``; a GP also learns that the pending points ``lies``
        scored the mean of ``y`` (one fit: the kernel is fixed then; see :func:`_pending_lie`)."""
        self.fits += 1
        seed = int(self.rng.randint(0, 2**31 - 1))
        if name != "GP":
            model = cook_estimator(name, random_state=seed, n_jobs=1)
            model.fit(X, y)
            return model
        if self._hyperfit_due():
            Xh, yh = self._hyperfit_window(X, y)
            model = self._hyperfit(Xh, yh, self._kernel, seed)
            self._kernel = _with_noise(model)
            self._kernel_n = self.n_told
            self.hyperfits += 1
            if len(yh) == len(y) and (lies is None or not len(lies)):
                return model
        if lies is not None and len(lies):
            X, y = np.vstack([X, lies]), np.concatenate([y, np.full(len(lies), _pending_lie(y))])
        model = self._new_gp(seed)
        model.set_params(kernel=self._kernel, optimizer=None)
        model.fit(X, y)  # convergence warnings: silenced by optimizers._quiet
        return model

    def _hyperfit_due(self) -> bool:
        """Whether the next GP fit re-optimizes the kernel: none yet, or the history grew by
        ``hyperfit_growth`` since the last time."""
        return self._kernel is None or self.n_told >= self._kernel_n * (1.0 + self.hyperfit_growth)

    def _hyperfit_window(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The observations the kernel is optimized on: its cost grows with the cube of their number."""
        return (X, y) if len(y) <= self.max_hyperfit_points else window(X, y, self.max_hyperfit_points)

    def _hyperfit(self, X: np.ndarray, y: np.ndarray, start: Any, seed: int) -> Any:
        """A GP with its kernel optimized on ``X, y``, warm-started from ``start`` (no restarts)."""
        model = self._new_gp(seed)
        if start is not None:
            model.set_params(kernel=start, n_restarts_optimizer=0)
        model.fit(X, y)  # convergence warnings: silenced by optimizers._quiet
        return model

    def _gp_targets(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """What the GP is fitted on: the losses ``y`` or their warp (``output_warp``; ``auto``:
        the likelier of the two models, chosen anew at each hyperparameter fit)."""
        if self.output_warp == "auto" and self._hyperfit_due():
            self._warped = self._choose_warp(*self._hyperfit_window(X, y))
        warped = self.output_warp is True or (self.output_warp == "auto" and self._warped)
        return power_warp(y).values if warped else y

    def _choose_warp(self, X: np.ndarray, y: np.ndarray) -> bool:
        """Fit the kernel to the raw and to the warped losses; whether the warped GP explains
        the losses better (marginal likelihood plus the warp's log-Jacobian, both as densities
        of ``y``). The winner's kernel is the one the next fits use."""
        warp = power_warp(y)
        if not warp.applied:  # too few or equal losses: nothing to choose
            return False
        seed = int(self.rng.randint(0, 2**31 - 1))
        models = {
            False: self._hyperfit(X, y, self._kernels.get(False), seed),
            True: self._hyperfit(X, warp.values, self._kernels.get(True), seed),
        }
        evidence = {
            False: _evidence(models[False], y, 0.0),
            True: _evidence(models[True], warp.values, warp.log_jacobian),
        }
        self._kernels = {k: _with_noise(m) for k, m in models.items()}
        warped = evidence[True] > evidence[False]
        self.warp_choices.append(warped)
        self._kernel = self._kernels[warped]
        self._kernel_n = self.n_told
        self.hyperfits += 1
        return warped

    def _fixed_gp(self, model: Any, X: np.ndarray, y: np.ndarray) -> Any:
        lie = clone(model)
        lie.set_params(kernel=_with_noise(model), optimizer=None)
        lie.fit(X, y)  # convergence warnings: silenced by optimizers._quiet
        return lie

    def _acquisition(self, model: Any, Xc: np.ndarray, y_opt: float) -> np.ndarray:
        """Higher is better."""
        mu, std = _predict(model, Xc)
        return self._acq(mu, std, y_opt)

    def _acq(self, mu: np.ndarray, std: np.ndarray, y_opt: float) -> np.ndarray:
        std = np.maximum(std, 1e-12)
        if self.acq_func == "LCB":
            return -(mu - self.kappa * std)
        z = (y_opt - mu - self.xi) / std
        if self.acq_func == "PI":
            return norm.cdf(z)
        return (y_opt - mu - self.xi) * norm.cdf(z) + std * norm.pdf(z)

    def _candidates(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Random candidates plus Gaussian perturbations of the best observed points, drawn in
        the unit cube the model sees and snapped onto the space (uniform in the cube is the
        space's prior there: every dimension is normalized, log ones in log scale; a one-hot
        block snaps to its largest entry, uniformly over the categories)."""
        rand = self.rng.uniform(0.0, 1.0, size=(self.n_candidates, X.shape[1]))
        order = np.argsort(y)[:5]
        per = max(self.n_candidates // 20, 10)
        local = []
        for i in order:
            for scale in (0.1, 0.02):
                noise = self.rng.normal(0.0, scale, size=(per, X.shape[1]))
                local.append(np.clip(X[i] + noise, 0.0, 1.0))
        return self._snap(np.vstack([rand] + local))

    def _snap(self, Xt: np.ndarray) -> np.ndarray:
        """Unit-cube points onto the space: integers rounded, one-hot blocks re-encoded (a
        space of plain ranges needs nothing)."""
        if self._continuous:
            return Xt
        assert self.sk is not None, "candidates exist only in a space with something free"
        return np.asarray(self.sk.transform(self.sk.inverse_transform(Xt)), dtype=float)

    def _new_gp(self, seed: int) -> Any:
        """An unfitted skopt GP for this space (``cook_estimator`` once, cloned after)."""
        if self._gp_template is None:
            self._gp_template = cook_estimator("GP", space=self.sk, random_state=0)
        return clone(self._gp_template).set_params(random_state=seed)


def _gp_parts(model: Any) -> tuple[float, float]:
    """The GP's target scaling: ``y = std * f + mean``."""
    std, mean = model.y_train_std_, model.y_train_mean_
    return float(np.ravel(std)[0]), float(np.ravel(mean)[0])


def _is_fitted_gp(model: Any) -> bool:
    return all(hasattr(model, a) for a in ("L_", "alpha_", "X_train_", "y_train_std_", "kernel_"))


def _predict(model: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of the surrogate at ``X``.

    For a GP this is skopt's ``predict(return_std=True)`` with the variance computed by a
    triangular solve against the Cholesky factor instead of its three-operand ``einsum`` over an
    explicit inverse: no BLAS there (160 ms for 3,000 candidates at 200 observations, against a
    few ms), and the explicit inverse loses the variance when the kernel matrix is
    ill-conditioned (10^10 is common with a tiny fitted noise).
    """
    if not _is_fitted_gp(model):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mu, std = model.predict(X, return_std=True)
        return np.asarray(mu, dtype=float).ravel(), np.asarray(std, dtype=float).ravel()
    y_std, y_mean = _gp_parts(model)
    K_trans = _cross_kernel(model.kernel_, X, model.X_train_)
    mu = K_trans @ np.ravel(model.alpha_) * y_std + y_mean
    v = _inverse_factor(model) @ K_trans.T  # BLAS, which lets go of the GIL; a solve does not
    var = model.kernel_.diag(X) - np.einsum("ij,ij->j", v, v)
    return mu, np.sqrt(np.maximum(var, 0.0)) * y_std


def _cross_kernel(kernel: Any, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``kernel(X, Y)`` for ``X`` apart from ``Y`` (white noise adds nothing there).

    skopt's GP kernel (a constant times a Matern 5/2, plus white noise) is computed in place:
    scikit-learn's allocates a fresh matrix per operation, 2x slower for the 3,000 x 200 matrix
    of every acquisition; any other kernel is called as is.
    """
    if isinstance(kernel, Sum) and isinstance(kernel.k2, WhiteKernel):
        kernel = kernel.k1
    if not (
        isinstance(kernel, Product)
        and isinstance(kernel.k1, ConstantKernel)
        and isinstance(kernel.k2, Matern)
        and kernel.k2.nu == 2.5
    ):
        return kernel(X, Y)
    scale = np.asarray(kernel.k2.length_scale, dtype=float)
    d = cdist(X / scale, Y / scale)
    d *= math.sqrt(5.0)
    K = d * d
    K *= 1.0 / 3.0
    K += d
    K += 1.0
    np.negative(d, out=d)
    np.exp(d, out=d)
    K *= d
    K *= kernel.k1.constant_value
    return K


def _inverse_factor(model: Any) -> np.ndarray:
    """``L^-1`` of a fitted GP's Cholesky factor, computed once per model.

    Multiplying by it gives the same ``v`` as a triangular solve per call (its condition
    number is the square root of the kernel matrix's), but as a matrix product: BLAS runs
    without holding the GIL, so the distributor thread is never held up by a prediction.
    """
    inverse = getattr(model, "_emews_L_inv", None)
    if inverse is None:
        eye = np.eye(model.L_.shape[0])
        inverse = solve_triangular(model.L_, eye, lower=True, check_finite=False)
        model._emews_L_inv = inverse
    return inverse


def _posterior(model: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A fitted GP's posterior mean and covariance at ``X`` and its observation noise
    variance, in the units of the targets."""
    y_std, y_mean = _gp_parts(model)
    K_trans = _cross_kernel(model.kernel_, X, model.X_train_)
    mu = K_trans @ np.ravel(model.alpha_) * y_std + y_mean
    v = solve_triangular(model.L_, K_trans.T, lower=True, check_finite=False)
    cov = (model.kernel_(X) - v.T @ v) * y_std**2
    noise = float(getattr(model, "noise_", None) or 0.0) * y_std**2
    return mu, cov, max(noise, 1e-10 * y_std**2)


def _evidence(model: Any, targets: np.ndarray, log_jacobian: float) -> float:
    """The log-likelihood of the losses under a GP fitted on ``targets`` made from them: its
    marginal likelihood (of the targets it normalized by their standard deviation) turned into
    a density of the losses by the normalization's and the warp's log-Jacobians."""
    spread = float(np.std(targets)) or 1.0
    return float(model.log_marginal_likelihood_value_) - len(targets) * math.log(spread) + log_jacobian


def _pending_lie(y: np.ndarray) -> float:
    """What a GP learns of a point whose evaluation is still out: the mean of the targets.

    The picks of one batch lie the best value so far (constant liar, skopt's ``cl_min``: the
    batch spreads along the acquisition's best region). Points pending from earlier fits are
    another matter: an asynchronous run has a worker's worth of them at every proposal, and
    optimistic lies for all of them make the model's mean low around each, so the next points
    cluster there. The mean is neutral: with tasks of 0.2-1 s (``bench/quality.py --timed``)
    the mixed problem's median precision went from 0.31 to 0.015 (6 seeds), Hartmann-6's from
    0.22 to 0.055 (3 seeds). (The mean for the batch's picks as well did no better with free
    tasks, where a fit has few points pending and most of a batch's lies are its own.)"""
    return float(np.mean(y))


def _with_noise(model: Any) -> Any:
    """The fitted GP kernel with its learned white noise put back (skopt zeroes it after fit)."""
    kernel = clone(model.kernel_)
    present, param = _param_for_white_kernel_in_Sum(kernel)
    noise = getattr(model, "noise_", None)
    if present and noise is not None:
        kernel.set_params(**{param: WhiteKernel(noise_level=max(float(noise), 1e-10))})
    return kernel


def _evenly(P: np.ndarray, most: float) -> np.ndarray:
    """All rows of ``P`` when there are at most ``most``, else ``most`` of them evenly spaced
    (the first and the last included: the oldest and the newest pending points)."""
    if len(P) <= most:
        return P
    return P[np.unique(np.linspace(0, len(P) - 1, int(most)).round().astype(int))]


def _same_rows(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Which rows of ``A`` equal a row of ``B`` (to 1e-9): a hash per row, linear in both."""
    seen = {row.tobytes() for row in np.round(B, 9) + 0.0}  # + 0.0: -0.0 hashes as 0.0
    return np.fromiter((row.tobytes() in seen for row in np.round(A, 9) + 0.0), dtype=bool, count=len(A))


def _min_dist(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    if len(B) == 0:
        return np.full(len(A), np.inf)
    d2 = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return np.sqrt(np.maximum(d2.min(1), 0.0))


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    return item() if callable(item) else value
