"""Any Optuna sampler as an emews optimizer, through Optuna's ask/tell API.

``optimizer: {name: "emews.contrib.optuna:OptunaSampler", options: {sampler: TPESampler, seed: 1}}``
"""
from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from emews.optimizer import AskTellOptimizer
from emews.space import Categorical, Int


class OptunaSampler(AskTellOptimizer):
    def __init__(self, seed: int | None = None, sampler: str = "TPESampler", **options) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(sampler=getattr(optuna.samplers, sampler)(seed=seed, **options))
        self.trials: dict[str, list] = {}

    def suggest(self, n: int) -> list[dict]:
        dists = {k: CategoricalDistribution(d.values) if isinstance(d, Categorical) else
                 (IntDistribution if isinstance(d, Int) else FloatDistribution)(d.lower, d.upper, log=d.log)
                 for k, d in self.space.free.items()}
        points = []
        for _ in range(n):
            trial = self.study.ask(dists)
            points.append({k: trial.params[k] if k in dists else d.value for k, d in self.space.dimensions.items()})
            self.trials.setdefault(repr(points[-1]), []).append(trial)
        return points

    def ingest(self, results) -> None:
        for r in results:
            trial = self.trials[repr(dict(r.params))].pop()
            self.study.tell(trial, r.loss if r.ok else None, state=None if r.ok else optuna.trial.TrialState.FAIL)
