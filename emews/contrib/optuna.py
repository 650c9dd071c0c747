"""Any Optuna sampler as an emews optimizer, through Optuna's ask/tell API.

optimizer: {name: "emews.contrib.optuna:OptunaSampler", options: {sampler: TPESampler, seed: 1}}
"""

import importlib
import math
from collections.abc import Callable
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from emews.contrib.optuna_options import sampler_class
from emews.core.errors import OptionError
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Status
from emews.core.seeds import resumed_seed
from emews.core.space import Categorical, Float, Int, registered

#: the Optuna distribution of each emews dimension type (ordered ones as categorical)
DISTRIBUTIONS: dict[type, Callable[[Any], BaseDistribution]] = {
    Categorical: lambda dim: CategoricalDistribution(dim.values),
    Int: lambda dim: IntDistribution(dim.lower, dim.upper, log=dim.log),
    Float: lambda dim: FloatDistribution(dim.lower, dim.upper, log=dim.log),
}


#: what a sampler needs besides Optuna (pip install 'emews-mpi[optuna]'): refused by emews check, not mid-run
NEEDS = {"CmaEsSampler": ["cmaes"], "GPSampler": ["torch", "scipy"], "QMCSampler": ["scipy"]}


class OptunaSampler(AskTellOptimizer):
    """Optuna's ask/tell API behind :class:`~emews.core.optimizer.AskTellOptimizer`.

    Options (workflow ``optimizer.options``): ``sampler`` (a class of ``optuna.samplers``:
    TPESampler, the default, CmaEsSampler, GPSampler, QMCSampler, RandomSampler, NSGAIISampler,
    NSGAIIISampler), ``seed`` (the sampler's seed; None: unseeded) and any other keyword of the
    sampler's constructor (``n_startup_trials``, ``multivariate``, ...).
    """

    def __init__(self, seed: int | None = None, sampler: str = "TPESampler", **options):
        cls = sampler_class(sampler, options)  # an unknown sampler or keyword (a pruner): one line naming it
        for package in NEEDS.get(sampler, []):
            try:
                importlib.import_module(package)
            except ImportError as exc:
                raise OptionError(
                    "sampler", f"{sampler} needs {package} ({exc}): pip install 'emews-mpi[optuna]'"
                ) from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.make_sampler = lambda seed: cls(seed=seed, **options)
        self.seed = seed
        self.study = optuna.create_study(sampler=self.make_sampler(seed))
        self.trials: dict[int, Any] = {}  # task id -> the trial waiting for its result

    def run(self, evaluator: Any) -> None:
        """Run the ask/tell loop; a resumed seeded run first reseeds its sampler to draw on."""
        self.evaluator = evaluator
        if self.seed is not None and evaluator.earlier_points:  # resumed: draw on, not the first run's draws again
            self.study.sampler = self.make_sampler(resumed_seed(self.seed, evaluator.earlier_points))
        super().run(evaluator)

    @staticmethod
    def distribution(dim):
        return registered(DISTRIBUTIONS, dim)(dim)

    def start(self, space, workers):
        super().start(space, workers)
        self.dists = {name: self.distribution(dim) for name, dim in space.free.items()}

    def suggest(self, n):
        self.fresh = [self.study.ask(self.dists) for _ in range(n)]
        return [
            {name: t.params.get(name, getattr(dim, "value", None)) for name, dim in self.space.dimensions.items()}
            for t in self.fresh
        ]

    def submitted(self, ids, points):
        super().submitted(ids, points)
        self.trials.update(zip(ids, self.fresh, strict=False))

    def ingest(self, results):
        """Tell Optuna each result: a trial its trial scheduler stopped early as PRUNED with the reports
        the scheduler took in as intermediate values (none an objective made after the stop: Optuna's
        raised ``TrialPruned`` there), its value the last step's unless NaN (as Optuna's ``tell``),
        a success as COMPLETE, any other as FAIL."""
        for r in results:
            pruned = self._pruned(r)
            state = TrialState.PRUNED if pruned else TrialState.COMPLETE if r.ok else TrialState.FAIL
            steps = self._intermediate_values(r.id) if pruned else {}
            trial = self.trials.pop(r.id, None)
            if trial is None:  # an earlier run's result: add it as a finished trial
                value = pruned_value(steps) if pruned else r.loss if r.ok else None
                self.study.add_trial(
                    create_trial(
                        params={k: r.params[k] for k in self.dists},
                        distributions=self.dists,
                        value=value,
                        state=state,
                        intermediate_values=steps,
                    )
                )
                continue
            for step, value in steps.items():
                trial.report(value, step)
            self.study.tell(trial, r.loss if state is TrialState.COMPLETE else None, state=state)

    def _pruned(self, result) -> bool:
        """Whether ``result``'s trial was stopped early by its trial scheduler (not crashed nor killed after)."""
        stopped = getattr(getattr(self, "evaluator", None), "stopped_by_scheduler", None)
        return stopped is not None and result.status in (Status.OK, Status.FAILED) and stopped(result.id)

    def _intermediate_values(self, trial: int) -> dict[int, float]:
        """Step -> the trial's reported metric signed as Optuna minimizes it (its last report of each step
        the trial scheduler took in)."""
        evaluator = self.evaluator
        sign = float(evaluator.direction.sign)
        steps: dict[int, float] = {}
        for report in evaluator.scheduled_reports(trial):
            value = report.metrics.get(evaluator.metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                steps[report.step] = sign * float(value)
        return steps


def pruned_value(steps: dict[int, float]) -> float | None:
    """The value Optuna's ``tell`` gives a PRUNED trial: its last step's intermediate value, unless NaN."""
    if not steps:
        return None
    value = steps[max(steps)]
    return None if math.isnan(value) else value
