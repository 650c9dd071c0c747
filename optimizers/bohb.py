"""BOHB: configurations proposed from density models of the trials' reports at every budget.

The rule is BOHB's (Falkner, Klein and Hutter, ICML 2018; HpBandSter's ``BOHB`` config generator),
run asynchronously next to a trial scheduler (``asha`` or ``hyperband``) that stops the trials::

    optimizer: {name: bohb}
    trial_scheduler: {name: asha, options: {max_t: 27}}

A *budget* is a step of the training reports: every trial's loss at each step it reported is an
observation at that budget (a trial stopped early counts at the steps it reached, its last
report included). For each proposal:

1. with probability ``random_fraction`` (BOHB's ρ, 1/3) a point drawn at random;
2. else the model is fitted on the **highest budget with at least** ``min_points`` observations
   (default HpBandSter's: 2 (free parameters + 1), a good and a bad set of ``d + 1`` each): there, the ``max(d + 1, top_fraction * n)`` best (BOHB's
   ``N_l``, top 15 %, at most half) are the good set and the rest the bad set; a product-kernel
   density of each, ``l(x)`` and ``g(x)`` (``optimizers._kde``), and of ``samples`` candidates
   (64) drawn around the good points with ``bandwidth_factor`` (3) times their bandwidth, the one
   with the highest ``l(x) / g(x)`` is proposed;
3. before any budget has enough observations, a random point.

Trials the scheduler stopped below the modelled budget are not observed there (BOHB's rule, the
default: only the observations at the budget count); with ``stopped_as_bad: auto`` those stopped
at a rung join the bad set when the losses at that rung and at each rung above it rank the trials
that reached both as the next rung does (Spearman ``agreement``, 0.5), with ``true`` all of them.
The defaults are HpBandSter's (``min_points``, ``min_bandwidth`` 1e-3, ``stopped_as_bad: false``):
measured against the earlier ones in ``docs/training.md``.

Proposals never wait: each is made from the reports stored when a worker needs one (read through
``evaluator.reports()``), however few trials have reached a rung. Results of trials that never
reported (a plain objective) are the budget above every step, so without a trial scheduler
``bohb`` is a TPE-like search on the final results. A resumed run rebuilds the model from the
stored reports and the earlier runs' results; its random draws continue past the earlier ones.
In a run with an experiment directory, ``bohb.json`` says at the end how many proposals were random
and how many came from the model at each budget (a step, or ``final``).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field
from scipy.stats import spearmanr

from emews.config.plugins import validate_options
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Result
from emews.core.space import Space

from ._fidelities import FINAL, Fidelities
from ._kde import KDE, Encoding, propose, split

__all__ = ["BOHB"]

Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
Positive = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]


class BOHB(AskTellOptimizer):
    """Model-based multi-fidelity search (BOHB's density models over the rungs' reports).

    Options (workflow ``optimizer.options``):

    seed              random seed (default: the workflow's seed)
    random_fraction   share of proposals drawn at random (BOHB's ρ: 1/3)
    min_points        observations a budget needs to be modelled (default HpBandSter's:
                      2 (free parameters + 1), so that the good and the bad set hold d + 1 each)
    top_fraction      the share of a budget's observations that is good (BOHB's 15 %), at
                      least free parameters + 1 and at most half
    samples           candidates per model-based proposal (BOHB's 64)
    bandwidth_factor  how much wider than the good density candidates are drawn (BOHB's 3)
    min_bandwidth     floor of a continuous kernel's bandwidth, in unit coordinates, times
                      ``n ** (-1 / (d + 4))`` (HpBandSter's 1e-3: the good set's own spread
                      sets the width)
    metric            the reported metric modelled (default: the objective's metric)
    in_flight         evaluations kept outstanding (default: one per worker, so that every
                      proposal sees the reports so far; more for ASHA's promotion variant)
    stopped_as_bad    whether trials that ended below the modelled budget (stopped early by the
                      trial scheduler) join its bad set: ``false`` (default) none (BOHB's: only
                      the observations at the budget count); ``auto`` those stopped at a rung
                      whose losses rank trials as every rung above it does, up to the budget
                      (``agreement``), re-checked at every proposal; ``true`` all. Counting them helps
                      where early rungs rank configurations as the last ones do and hurts where
                      the curves cross (``docs/training.md``)
    agreement         the Spearman correlation, over the trials that reported at both, from which
                      a rung's losses rank as the next rung's (or the budget's) do (0.5; at least
                      ``min_points`` trials)
    """

    def __init__(
        self,
        seed: int | None = None,
        random_fraction: Fraction = 1 / 3,
        min_points: Annotated[int, Field(ge=2)] | None = None,
        top_fraction: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.15,
        samples: Annotated[int, Field(ge=1)] = 64,
        bandwidth_factor: Positive = 3.0,
        min_bandwidth: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] = 1e-3,
        metric: str | None = None,
        in_flight: Annotated[int, Field(ge=1)] | None = None,
        stopped_as_bad: bool | Literal["auto"] = False,
        agreement: Annotated[float, Field(ge=-1.0, le=1.0)] = 0.5,
    ) -> None:
        validate_options(BOHB, {k: v for k, v in locals().items() if k != "self"})
        self.seed = seed
        self.random_fraction = float(random_fraction)
        self.min_points = min_points
        self.top_fraction = float(top_fraction)
        self.samples = samples
        self.bandwidth_factor = float(bandwidth_factor)
        self.min_bandwidth = float(min_bandwidth)
        self.metric = metric
        self.in_flight = in_flight
        self.stopped_as_bad = stopped_as_bad
        self.agreement = float(agreement)
        self.fidelities = Fidelities()
        self.evaluator: Any = None
        self._sign = 1.0  # the objective's direction: losses are sign * metric
        #: how proposals were made: ``random``, ``model`` and the budget of the last model
        self.stats: dict[str, Any] = {"random": 0, "model": 0, "budget": None}
        #: model-based proposals whose bad set held trials stopped below the budget
        self.with_stopped = 0
        self._stopped = 0  # how many stopped trials the last model's bad set held
        #: budget -> model-based proposals made from it
        self.modelled: dict[float, int] = {}

    # -- the loop -------------------------------------------------------------------------------
    def run(self, evaluator: Any) -> None:
        self.attach(evaluator)
        try:
            super().run(evaluator)
        finally:
            self._write_stats(evaluator.exp_dir)

    def _write_stats(self, exp_dir: Path | None) -> None:
        """``EXP/bohb.json``: how many proposals were random and model-based, and at which budgets."""
        if exp_dir is None:
            return
        name = lambda budget: "final" if budget == FINAL else f"{budget:g}"  # noqa: E731
        stats = {
            "random": self.stats["random"],
            "model": self.stats["model"],
            "budgets": {name(k): v for k, v in sorted(self.modelled.items())},
            "with_stopped": self.with_stopped,
        }
        path = Path(exp_dir) / "bohb.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(stats, indent=2, allow_nan=False, default=str) + "\n")
        os.replace(tmp, path)

    def attach(self, evaluator: Any) -> None:
        """Read reports through ``evaluator``: its seed, metric and direction unless given, and the
        parameters of an earlier run's trials still to finish (their reports count)."""
        self.evaluator = evaluator
        if self.seed is None:
            self.seed = evaluator.seed
        if self.metric is None:
            self.metric = getattr(evaluator, "metric", None)
        self._sign = float(evaluator.direction.sign)
        for task in evaluator.requeued:
            self.fidelities.know(task.id, task.params)

    def start(self, space: Space, workers: int) -> None:
        super().start(space, workers)
        self.encoding = Encoding.of(space)
        earlier = 0 if self.evaluator is None else int(self.evaluator.earlier_points)
        # a resumed run draws on from where the earlier runs' draws ended, never repeating them
        self.rng = random.Random(f"{self.seed}:{earlier}")
        self.np_rng = np.random.default_rng([abs(int(self.seed or 0)) % 2**32, earlier])
        dims = self.encoding.size
        # HpBandSter models a budget once its good and its bad set each hold d + 1 points
        self.enough = self.min_points if self.min_points is not None else 2 * (dims + 1)

    def suggest(self, n: int) -> list[dict[str, Any]]:
        model = self._model() if self.encoding.size else None
        points = []
        for _ in range(n):
            if model is None or self.rng.random() < self.random_fraction:
                points.append(self.space.sample(self.rng))
                self.stats["random"] += 1
            else:
                point, _ = propose(
                    *model, self.encoding, self.np_rng, samples=self.samples, widen=self.bandwidth_factor
                )
                points.append(point)
                self.stats["model"] += 1
                self.with_stopped += self._stopped > 0
                self.modelled[self.stats["budget"]] = self.modelled.get(self.stats["budget"], 0) + 1
        return points

    def submitted(self, ids: Sequence[int], points: Sequence[dict[str, Any]]) -> None:
        super().submitted(ids, points)
        for trial, point in zip(ids, points, strict=False):
            self.fidelities.know(trial, point)

    def ingest(self, results: Sequence[Result]) -> None:
        """Results count at their trials' budgets (reports), or above every step (no reports)."""
        self.fidelities.add_results(results)

    # -- the model ------------------------------------------------------------------------------
    def _model(self) -> tuple[KDE, KDE] | None:
        """The good and bad densities at the highest budget with enough observations, or ``None``."""
        read = getattr(self.evaluator, "reports", None)  # a replicating evaluator keeps no reports
        reports = read() if read is not None else []
        self.fidelities.read_reports(reports, self.metric, self._sign)
        budget = self.fidelities.highest(self.enough)
        if budget is None:
            return None
        seen = [(p, loss) for p, loss in self.fidelities.at(budget) if self._fits(p)]
        seen += [(p, float("inf")) for p in self.fidelities.failed_unreported() if self._fits(p)]
        stopped = [p for p in self._stopped_bad(budget) if self._fits(p)]
        self._stopped = len(stopped)
        seen += [(p, float("inf")) for p in stopped]
        seen.sort(key=lambda item: item[1])
        losses = [loss for _, loss in seen]
        n_good = split(losses, self.encoding.size, self.top_fraction)
        if n_good < 1 or len(seen) - n_good < 1:
            return None
        X = np.array([self.encoding.encode(p) for p, _ in seen])
        self.stats["budget"] = budget
        good = KDE(X[:n_good], self.encoding.choices, self.min_bandwidth)
        bad = KDE(X[n_good:], self.encoding.choices, self.min_bandwidth)
        return good, bad

    def _stopped_bad(self, budget: float) -> list[Mapping[str, Any]]:
        """The trials stopped below ``budget`` that count as bad there: none (``stopped_as_bad:
        false``), all (``true``), or (``auto``) those stopped at a rung (a step where at least
        ``enough`` trials stopped) from which every rung up to ``budget`` ranks as the next does:
        the Spearman correlation of the losses at a rung and at the next one (or the budget), over
        the trials that reported at both (at least ``enough``), is at least ``agreement``."""
        if budget == FINAL or self.stopped_as_bad is False:
            return []
        if self.stopped_as_bad is True:
            return self.fidelities.ended_below(budget)
        groups = self.fidelities.stopped_at(budget)
        rungs = [step for step, trials in groups.items() if len(trials) >= self.enough]
        ladder = [*rungs, budget]
        agrees = [self._agrees(low, high) for low, high in zip(ladder, ladder[1:], strict=False)]
        bad: list[Mapping[str, Any]] = []
        for i, step in enumerate(rungs):
            if all(agrees[i:]):
                bad += groups[step]
        return bad

    def _agrees(self, low: float, high: float) -> bool:
        """Whether the losses at step ``low`` rank the trials as those at ``high`` do (see above)."""
        pairs = self.fidelities.pairs(low, high)
        if len(pairs) < self.enough or any(len(set(losses)) < 2 for losses in zip(*pairs, strict=True)):
            return False  # too few, or one step's losses all equal (no ranking)
        rho = spearmanr(*zip(*pairs, strict=True)).statistic
        return bool(np.isfinite(rho) and rho >= self.agreement)

    def _fits(self, params: Mapping[str, Any]) -> bool:
        """Whether ``params`` is a point of this space (an earlier run's may not be)."""
        try:
            self.encoding.encode(params)
        except (KeyError, ValueError, TypeError):
            return False
        return True
