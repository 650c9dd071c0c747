"""Bayesian optimization on scikit-optimize surrogates, asynchronous and batch-parallel.

Workflow YAML::

    optimizer:
      name: bayes
      options: {seed: 1, n_initial_points: 10, base_estimator: GP, acq_func: EI}

Defaults that need no tuning: ``bayes`` keeps one evaluation in flight per worker
(``lookahead: 0``) and waits for the model while a refit is short next to a task (the usual
case: trainings take minutes), so every point is chosen with every result back so far. It
speculates only when the model would otherwise leave workers idle: once a refit takes longer
than a task (median of the recent ones, submission to result) and at least
``speculate_after`` seconds (5), which a free objective reaches only with large histories.

How it keeps workers busy when it speculates:

* A background thread owns the surrogate (never the evaluator, queues or MPI). The main thread
  hands it every result that arrived and the number of points it could submit now; the thread
  fits **once** on all new results and proposes a constant-liar batch (each pick conditions the
  GP on the pick scoring the best value seen: a rank-one update, no refit). ``lookahead`` extra
  points (default 0) stay queued at the workers behind the running ones.
* Speculation (``speculate``): the thread keeps a **reserve** of proposals ready
  beyond the demand, sized to what the workers will take during the next refit (results per
  second x the longest recent refit x 2) and started when half of it is used, so a refit runs
  while points are still in stock and absorbs many results. The reserve never exceeds a
  quarter of the results told (early results are too informative to skip).
* Fallback: if a worker would still go idle while a refit runs, it gets one of the last fit's
  **runners-up** (the best candidates its batch did not take, spread apart) at once; before
  the model has been fitted on ``n_initial_points`` results, a random point (more of the
  initial design, at most one per worker in all). ``max_idle`` adds random points for workers
  idle that long in any case.
* The cost per fit is bounded: GP hyperparameters are re-optimized only when the history grew
  by ``hyperfit_growth`` (warm-started); otherwise the kernel is kept and the GP refit is one
  Cholesky factorization. The GP trains on at most ``max_gp_points`` observations (the best
  half plus the most recent), and ``switch_after`` hands large histories to RF/ET.
* The model leaves the optimizer rank's GIL when it gets heavy (``model_process``): once a fit
  took ``process_after`` seconds, a child process (``emews.optimizers._bayes._server``) is
  started; while it imports scikit-learn (about a second) the thread goes on, then the engine
  is handed over whole (observations, kernel, random state) and the thread only forwards
  results and proposals. Long C-level stretches of a large GP then never delay the distributor
  thread. If the child dies, an in-process copy that saw every result takes over.

A resumed run (``evaluator.history``) tells the model every earlier result before its first
proposal; they count towards ``n_initial_points``, and a seeded initial design goes on from the
earlier runs' draws (their points are not proposed again).

A training trial stopped early by its trial scheduler is told the loss of its last report (the
rule of ``optimizers._stopped``: an upper bound of what it would have reached, told as it is),
also when its objective returns nothing after the stop.

Failed evaluations (``loss == inf``) are told as the worst finite loss of the run so far
(``failure_penalty: worst``, so the region looks bad without distorting the scale), or left
out (``skip``), or told as a fixed number: the policy the GA shares (``_failures``).

At width (more than ``WIDE`` = 128 workers, as many in flight) the work of a proposal is
bounded whatever the points in flight (the engine learns at most 64 of them as lies, picks at most
64 points of a batch by constant liar and the rest by Thompson sampling over at most 1,024 of the
best candidates: ``optimizers._bayes._engine``), and the reserve is kept from the first timed fit
on, however short next to a task, so that freed workers take points from stock instead of waiting
on a refit. The reserve is then sized for the workers (at least 1/64 of them, up to 1/8 however
few results were told: ``_proposer.reserve_size``), and the GP kernel is re-optimized once the
results doubled (``WIDE_HYPERFIT_GROWTH``) instead of every 10%. With at most 64 points in flight
and asked nothing of the bounds engages (the same proposals as without them), and the early
reserve, its sizing and the hyperparameter cadence only above 128 workers.

With one worker a seeded run is reproducible (no speculation then). ``speculate: false`` makes every batch wait for a fit on all results back so far: the
most informed points per evaluation, for objectives so cheap that idle workers cost nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from emews.config.plugins import validate_options
from emews.core.errors import OptionError, did_you_mean
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Result
from emews.core.space import Space

from ._bayes._proposer import Proposer
from ._bayes._refill import Refill
from ._bayes._serve import serve
from ._bayes._settings import ACQ_FUNCS, ESTIMATORS, INITIAL_GENERATORS, MAX_LIES
from ._failures import FailureImputation
from ._stopped import StoppedTrials

if TYPE_CHECKING:  # the model's modules load scikit-optimize, scikit-learn and scipy: ``start`` imports them
    from ._bayes._engine import Engine

__all__ = ["BayesianOptimizer"]

#: option types: the constraints are part of the options schema (exit 2 naming the key)
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


#: ``speculate: auto`` speculates only once refits take this many seconds (and longer than
#: tasks): with free objectives, waiting for shorter refits costs less than the quality that
#: speculation loses (BBOB f1 5-D, 100 evaluations: precision 0.2-0.7 speculating under load,
#: 0.004 waiting)
SPECULATE_AFTER = 5.0


#: more workers than this (twice the pending points a fit learns): a wide run, which keeps a
#: reserve of proposals from the first timed fit on (``Proposer.wide``)
WIDE = 2 * MAX_LIES

#: a wide run re-optimizes the GP kernel once the results doubled (``hyperfit_growth`` 1, or the
#: option when larger): results arrive by hundreds a second, and at the default 10% nearly
#: every fit re-optimized it (45 of 60 fits at 10,000 workers, two GPs each with
#: ``output_warp`` auto), the fits that leave workers waiting under load
WIDE_HYPERFIT_GROWTH = 1.0


#: integer options with a lower bound
AtLeast0 = Annotated[int, Field(ge=0)]
AtLeast1 = Annotated[int, Field(ge=1)]
AtLeast10 = Annotated[int, Field(ge=10)]


def _choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    text = str(value).upper() if allowed is not INITIAL_GENERATORS else str(value).lower()
    if text not in allowed:
        raise OptionError(name, f"invalid value {value!r}{did_you_mean(text, allowed)}", ", ".join(allowed))
    return text


class BayesianOptimizer(AskTellOptimizer):
    """Asynchronous Bayesian optimization (GP, RF or ET surrogate from scikit-optimize).

    Options (workflow ``optimizer.options``):

    seed                     random seed (default: the workflow's seed)
    n_initial_points         random (or ``initial_point_generator``) points before the model (10)
    initial_point_generator  random | lhs | sobol | halton | hammersly
    base_estimator           GP | RF | ET (GP)
    acq_func                 EI | PI | LCB (EI); ``xi`` (0.01) and ``kappa`` (1.96) tune them
    n_candidates             random candidates per acquisition maximization (2000), plus
                             perturbations of the five best points
    output_warp              auto (default): at each hyperparameter fit, a GP on the losses
                             and one on their Yeo-Johnson transform compete by likelihood and
                             the likelier is used (see ``optimizers._output_warp``); true:
                             always the transform; false: always the losses
    max_gp_points            most observations a GP is trained on (200)
    max_hyperfit_points      most observations its hyperparameters are optimized on (200): a
                             larger ``max_gp_points`` then costs one Cholesky per fit, not an
                             optimization over the whole window
    hyperfit_growth          re-optimize GP hyperparameters when the history grew by this
                             fraction (0.1; above 128 workers at least 1: doubling)
    switch_after             use ``fallback_estimator`` (ET) above this many observations (None)
    failure_penalty          worst | skip | a number
    lookahead                extra points kept queued beyond one per worker (0)
    model_process            auto | true | false: run the model in a child process of its own
                             (with several workers), so that its fits never hold the optimizer
                             rank's GIL and dispatch stays prompt. It takes about a second to
                             start, while the model goes on in a thread, and takes over from
                             there; ``auto`` (default) starts it once a fit took longer than
                             ``process_after`` seconds (0.25)
    max_idle                 seconds a worker may wait on the model before it gets a random
                             point (None: never; the default fallback is the runners-up, above)
    speculate                auto (default): keep a reserve of proposals beyond the demand and
                             give would-be idle workers the last fit's runners-up while a refit
                             runs, once refits take longer than a task and ``speculate_after``
                             seconds (5); true: whenever
                             a refit keeps workers waiting; a number: once a refit took that
                             many seconds; false: every batch waits for a fit on all results
    """

    def __init__(
        self,
        seed: int | None = None,
        n_initial_points: AtLeast1 = 10,
        initial_point_generator: str = "random",
        base_estimator: str = "GP",
        acq_func: str = "EI",
        xi: NonNegative = 0.01,
        kappa: NonNegative = 1.96,
        n_candidates: AtLeast10 = 2000,
        output_warp: bool | Literal["auto"] = "auto",
        max_gp_points: AtLeast10 = 200,
        max_hyperfit_points: AtLeast10 = 200,
        hyperfit_growth: NonNegative = 0.1,
        switch_after: AtLeast0 | None = None,
        fallback_estimator: str = "ET",
        failure_penalty: Literal["worst", "skip"] | Finite = "worst",
        lookahead: AtLeast0 = 0,
        max_idle: NonNegative | None = None,
        model_process: bool | Literal["auto"] = "auto",
        process_after: NonNegative = 0.25,
        speculate: bool | Literal["auto"] | NonNegative = "auto",
        speculate_after: NonNegative = SPECULATE_AFTER,
    ) -> None:
        # the same schema the workflow's options are checked against (``plugins.options_model``)
        validate_options(BayesianOptimizer, {k: v for k, v in locals().items() if k != "self"})
        self.seed = seed
        self.lookahead = lookahead
        self.max_idle = max_idle
        self.model_process = model_process
        self.process_after = float(process_after)
        #: seconds a refit must take before speculating (inf: never); ``auto`` also waits for
        #: refits to take longer than tasks
        # booleans by type: 1 == True in a dict lookup, and `speculate: 1` means one second
        if isinstance(speculate, bool):
            self.speculate = 0.0 if speculate else math.inf
        elif speculate == "auto":
            self.speculate = float(speculate_after)
        else:
            self.speculate = float(speculate)
        self.speculate_auto = speculate == "auto"
        self.options: dict[str, Any] = dict(
            n_initial_points=n_initial_points,
            initial_point_generator=_choice("initial_point_generator", initial_point_generator, INITIAL_GENERATORS),
            base_estimator=_choice("base_estimator", base_estimator, ESTIMATORS),
            fallback_estimator=_choice("fallback_estimator", fallback_estimator, ESTIMATORS),
            acq_func=_choice("acq_func", acq_func, ACQ_FUNCS),
            xi=float(xi),
            kappa=float(kappa),
            n_candidates=int(n_candidates),
            output_warp=output_warp,
            max_gp_points=max_gp_points,
            max_hyperfit_points=max_hyperfit_points,
            hyperfit_growth=float(hyperfit_growth),
            switch_after=switch_after,
            failures=FailureImputation.from_option(failure_penalty),
        )
        self.engine: Engine | None = None
        self.stats: dict[str, Any] = {}
        self._pending: dict[int, list[Any]] = {}  # suggest/ingest bookkeeping: task id -> skopt point
        self._fresh: list[list[Any]] = []  # the last suggest's points, not yet submitted
        #: what the model is told about trials stopped early (``optimizers._stopped``)
        self.stopped = StoppedTrials(None)

    # -- ask/tell API ---------------------------------------------------------------------------
    def start(self, space: Space, workers: int) -> None:
        # here, not at the top: ``emews check`` and ``emews launch`` load this class to validate
        # the options and need no model (these imports cost 1.2 s of CPU and 140 MB)
        from ._bayes._engine import Engine
        from ._bayes._space import SpaceMap

        super().start(space, workers)
        self.map = SpaceMap(space)
        self.engine = Engine(self.map, seed=self.seed, **self.options)
        self.in_flight = workers + self.lookahead
        self.stats = {"proposed": 0, "runners_up": 0, "random_fillers": 0, "model_time": 0.0}

    def suggest(self, n: int) -> list[dict[str, Any]]:
        """Fit on everything ingested and return ``n`` points (synchronous)."""
        points = [self.map.from_skopt(x) for x in self._engine().propose(n, list(self._pending.values()))]
        self._fresh = [self.map.to_skopt(p) for p in points]
        self.stats["proposed"] += len(points)
        return points

    def submitted(self, ids: Sequence[int], points: Sequence[dict[str, Any]]) -> None:
        super().submitted(ids, points)
        self._pending.update(zip(ids, self._fresh, strict=False))
        self._fresh = []

    def ingest(self, results: Sequence[Result]) -> None:
        """Tell the model every result; those of points it never proposed (an earlier run's)
        also count towards the initial design."""
        foreign = sum(self._pending.pop(r.id, None) is None for r in results)
        self._tell(results, foreign)

    def _tell(self, results: Sequence[Result], foreign: int = 0) -> None:
        xs, ys = [], []
        for r in self.stopped.results(results):
            x = self._x(r)
            if x is not None:
                xs.append(x)
                ys.append(r.loss)
        engine = self._engine()
        engine.tell(xs, ys)
        engine.n_proposed += foreign

    def _engine(self) -> Engine:
        assert self.engine is not None, "start() makes the engine"
        return self.engine

    def _x(self, result: Result) -> list[Any] | None:
        try:
            return self.map.to_skopt(result.params)
        except (KeyError, ValueError):  # not a point of this space (e.g. a foreign resumed result)
            return None

    # -- the asynchronous loop ------------------------------------------------------------------
    def run(self, evaluator: Any) -> None:
        if self.seed is None:
            self.seed = evaluator.seed
        self.stopped = StoppedTrials(evaluator)
        self.start(evaluator.space, evaluator.workers)
        self._engine().skip_draws(evaluator.earlier_points)  # a resumed run's design goes on
        if evaluator.history:  # a resumed run: learn the earlier results first
            self.ingest(list(evaluator.history))
        target = self.in_flight
        assert target is not None, "start() sets in_flight"
        workers = evaluator.workers
        speculate = math.isfinite(self.speculate) and workers > 1  # one worker: none, runs repeat
        engine = self._engine()
        if speculate:
            engine.reserve_size = workers
        engine.wide_wave = workers > WIDE
        if workers > WIDE:
            engine.hyperfit_growth = max(engine.hyperfit_growth, WIDE_HYPERFIT_GROWTH)
        by_word: dict[object, float] = {True: 0.0, False: math.inf}
        process_after = by_word.get(self.model_process, self.process_after)
        proposer = Proposer(
            engine,
            max_ahead=4 * target if speculate else 0,
            min_cycle=self.speculate if speculate else 0.0,
            longer_than_tasks=self.speculate_auto,
            process_after=process_after if speculate else math.inf,
            wide=speculate and workers > WIDE,
            workers=workers,
        ).start()
        refill = Refill(
            self.space,
            self.map,
            proposer,
            workers=workers,
            speculate=speculate,
            max_idle=self.max_idle,
            seed=self.seed,
            stats=self.stats,
        )

        def learn(results: Sequence[Result]) -> None:
            told = self.stopped.results(results)  # a trial stopped early: its last report's loss
            proposer.tell([r.id for r in told], [self._x(r) for r in told], [r.loss for r in told])

        try:
            serve(
                evaluator,
                proposer,
                refill,
                target=target,
                to_x=self.map.to_skopt,
                learn=learn,
                stats=self.stats,
                max_idle=self.max_idle,
            )
        finally:
            proposer.close()
            self.stats.update(proposer.summary())
