"""Any Optuna sampler as an emews optimizer, through Optuna's ask/tell API.

    optimizer: {name: "emews.contrib.optuna:OptunaSampler", options: {sampler: TPESampler, seed: 1}}
"""
import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from emews import AskTellOptimizer, Categorical, Int


class OptunaSampler(AskTellOptimizer):
    def __init__(self, seed=None, sampler="TPESampler", **options):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.study = optuna.create_study(sampler=getattr(optuna.samplers, sampler)(seed=seed, **options))
        self.asked = {}  # repr(point) -> trials waiting for its result

    @staticmethod
    def distribution(dim):
        if isinstance(dim, Categorical):  # ordered too
            return CategoricalDistribution(dim.values)
        return (IntDistribution if isinstance(dim, Int) else FloatDistribution)(dim.lower, dim.upper, log=dim.log)

    def suggest(self, n):
        dists = {name: self.distribution(dim) for name, dim in self.space.free.items()}
        points = []
        for _ in range(n):
            trial = self.study.ask(dists)
            point = {name: trial.params.get(name, getattr(dim, "value", None))
                     for name, dim in self.space.dimensions.items()}
            self.asked.setdefault(repr(point), []).append(trial)
            points.append(point)
        return points

    def ingest(self, results):
        for r in results:
            trial = self.asked[repr(dict(r.params))].pop()
            self.study.tell(trial, r.loss if r.ok else None,
                            state=None if r.ok else optuna.trial.TrialState.FAIL)
