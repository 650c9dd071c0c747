"""Early stopping on real learning curves: emews' ASHA vs no stopping, Optuna's pruners and Ray Tune's ASHA.

Three training problems of different shape (``bench/es_problems.py``): ``mlp`` (a PyTorch MLP on
scikit-learn's digits, 16 configurations x 27 epochs), ``cnn`` (a small CNN on the digits as 8x8 images, 20 x 9 epochs)
and ``hgb`` (HistGradientBoosting on the breast-cancer table, 18 x 18 steps of 6 boosting rounds, whose
validation loss turns up as it overfits). For each problem and seed, configurations are drawn
from the problem's space with the seed, each trained with its own seed, so a configuration's
learning curve is the same whichever method trains it. Every method is used with its defaults,
told only the metric and the most steps a trial trains:

``none``              every trial trains all steps (the reference)
``asha``              emews' ``trial_scheduler: asha`` (``emews.training.schedulers.ASHA(max_t=steps)``:
                      grace 1, reduction factor 3, ``rule: rank``)
``optuna-sha``        Optuna's ``SuccessiveHalvingPruner()`` (min_resource auto, reduction factor 4)
``optuna-sha-parallel`` the same pruner with ``--workers`` trials at a time, as Optuna's ``n_jobs`` or
                      several processes on one storage run it (:func:`replay_optuna_parallel`): the
                      same asynchrony as the emews rows
``optuna-hyperband``  Optuna's ``HyperbandPruner()``
``ray-asha``          Ray Tune's ``ASHAScheduler(max_t=steps)`` (grace 1, reduction factor 4), run
                      by Ray's interpreter (``--ray-python``; a venv made on first use)

The model-based rows choose their configurations themselves (from the problem's space), with the
same budget of steps (``none``'s):

``bohb``              emews' ``optimizer: bohb`` (seeded, defaults; ``--bohb`` for options) with
                      emews' ``asha`` as above, ``--workers`` asynchronous workers: ``BOHB.run``
                      itself (its ``suggest``/``ingest`` loop, reading ``evaluator.reports()`` at
                      every proposal) against a replaying evaluator (``ReplayEvaluator``)
``optuna-tpe-sha``    Optuna's ``TPESampler(seed=seed)`` (defaults) with ``SuccessiveHalvingPruner()``,
                      one trial at a time (ordered lists suggested as categoricals)
``optuna-tpe-sha-parallel`` the same with ``--workers`` trials at a time (:func:`replay_tpe_parallel`)
``ray-bohb``          Ray Tune's BOHB as Ray documents it: ``TuneBOHB(seed=seed)`` (hpbandster's BOHB;
                      in a ``ConcurrencyLimiter`` of ``--workers``, the space given as Tune's domains,
                      ordered lists as ``tune.choice``) with ``HyperBandForBOHB(max_t=steps)`` (reduction
                      factor 3), defaults otherwise, ``--workers`` trials at a time; run by Ray's
                      interpreter like ``ray-asha`` (``hpbandster`` and ``ConfigSpace`` installed into
                      that venv on first use), its objects driven as Tune's ``TuneController`` drives
                      them (:func:`replay_ray_bohb`)

Their configurations' curves are trained as the rows ask and kept by configuration
(``PROBLEM-STEPS-sSEED-chosen.json``; each configuration trains with a seed of the configuration
and the problem's seed), so a rerun, or another row choosing the same configuration, replays it.
``ray-bohb``'s ``HyperBandForBOHB`` pauses trials at its rungs and resumes the ones it promotes; a
paused trial counts with its last loss when it pauses (as a stopped one does), and once the budget
is spent no trial starts or resumes (those running go on until paused, stopped or done).
Optuna studies are named per problem, seed and row (``study_name``): ``HyperbandPruner`` picks a
trial's bracket from a hash of the study's name, which is random when left unnamed.

Equal compute, same configurations in the same order: ``none`` trains the first ``--configs``
configurations fully; every other method gets ``none``'s steps as its budget and takes
configurations in the same order (``none``'s first, then more of the same draw) until that many
steps are spent (trials running then finish, or are stopped early). Printed per problem (medians
over seeds) and over all problems and seeds: the best validation loss at the end, the steps
spent, and the steps spent until the method first held a result as good as ``none``'s best of that
seed ("to match"; a stopped trial counts with its last loss; ``never`` counts as infinite), as a
share of ``none``'s steps; over all problems and seeds, each row's median share against its
reference row's (the model-based rows against ``optuna-tpe-sha``, the others against
``optuna-sha``, when run): the ratio of the medians with a paired bootstrap 90 % interval over
the problem-seeds (4,000 draws) and the share of draws where the ratio is at most 0.7.

Replay (the default): each configuration's curve is trained once, step by step as far as some
method asks, and kept in ``--cache`` (a JSON file per problem and seed, with each step's
measured seconds); every method's scheduler (the libraries' own objects: emews' ``ASHA``, an
Optuna study with its pruner, Ray's ``AsyncHyperBandScheduler``) then decides on those curves.
The emews and Ray rows run ``--workers`` asynchronous workers, each step taking the seconds it
took when trained, and a free worker takes the next configuration while budget is left, as
``emews launch`` with ``FixedConfigs`` does; Optuna runs one trial at a time, as in the real run
(the ``-parallel`` rows: ``--workers`` at a time, through the same simulation).
``--real`` instead trains through ``emews launch`` (emews rows) and Optuna's study in this process
(none, asha, optuna-sha, optuna-hyperband; wall times printed), slower and noisier.

    nice -n 10 python bench/early_stopping.py                          # 3 problems x 5 seeds, replay
    nice -n 10 python bench/early_stopping.py --problems mlp --seeds 2 --methods none,asha,optuna-sha
    nice -n 10 python bench/early_stopping.py --asha '{"rule": "quantile"}'   # asha with options
    nice -n 10 python bench/early_stopping.py --methods none,bohb,optuna-tpe-sha --problems hgb,mlp
    nice -n 10 python bench/early_stopping.py --methods none,bohb,optuna-tpe-sha,ray-bohb --seeds 1-10
    nice -n 10 python bench/early_stopping.py --real --problems mlp --seeds 1 --quick

Needs torch (``pip install emews-mpi[torch]``), optuna and scikit-learn; ``ray-asha`` makes a venv
(``--ray-python``) with ``ray[tune]``, ``ray-bohb`` adds ``hpbandster`` and ``ConfigSpace`` to it. This file also holds the optimizer the real emews runs use
(``FixedConfigs``: submits the given configurations in order).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import es_problems  # noqa: E402

from emews.core.optimizer import Optimizer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OBJECTIVE = Path(es_problems.__file__).resolve()
WORKFLOW = REPO / "workflows" / "asha.yaml"
METHODS = ("none", "asha", "optuna-sha", "optuna-sha-parallel", "optuna-hyperband", "ray-asha", "bohb", "optuna-tpe-sha",
           "optuna-tpe-sha-parallel", "ray-bohb")
#: the rows whose optimizer chooses the configurations (their curves: :class:`Chosen`)
MODEL_BASED = ("bohb", "optuna-tpe-sha", "optuna-tpe-sha-parallel", "ray-bohb")
#: the row each row is compared with at the end (ratio of the medians, paired bootstrap): the
#: model-based rows with Optuna TPE + SHA, the fixed-configuration ones with Optuna's SHA
REFERENCE = {**{m: "optuna-tpe-sha" for m in MODEL_BASED if m != "optuna-tpe-sha"},
             **{m: "optuna-sha" for m in ("asha", "optuna-sha-parallel", "optuna-hyperband", "ray-asha")}}
#: the rows Ray's interpreter runs (``--ray-python``)
RAY_ROWS = ("ray-asha", "ray-bohb")
#: configurations ``none`` trains fully, per problem
CONFIGS = {"mlp": 16, "cnn": 20, "hgb": 18}
RAY_SPEC = "ray[tune]"
#: what ``TuneBOHB`` needs besides Ray (``pip install hpbandster ConfigSpace``, as Ray's docs say)
BOHB_SPECS = ("hpbandster", "ConfigSpace")


class FixedConfigs(Optimizer):
    """Evaluates the configurations in ``configs`` (a JSON list) in order, one per free worker, until
    ``epochs`` (training reports, the compute budget) have been spent or the list is done."""

    def __init__(self, configs: Path, epochs: int | None = None) -> None:
        self.configs = json.loads(Path(configs).read_text())
        self.epochs = epochs

    def run(self, evaluator: Any) -> None:
        queue = list(self.configs)
        while True:
            spent = self.epochs is not None and len(evaluator.reports()) >= self.epochs
            while queue and not spent and evaluator.pending < evaluator.workers:
                evaluator.put([queue.pop(0)])
            if not evaluator.pending:
                return
            evaluator.get(1)


def space(problem: str) -> Any:
    from emews.config.space_section import build_space

    return build_space(es_problems.SPACES[problem], "bench/es_problems.py", REPO)


def draw_configs(problem: str, count: int, steps: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    drawn = space(problem)
    return [{**drawn.sample(rng), "problem": problem, "epochs": steps} for _ in range(count)]


def trial_seed(seed: int, index: int) -> int:
    """The seed configuration ``index`` of ``seed``'s draw trains with, in every method."""
    return (seed * 1_000_003 + index) % (2**31 - 1)


# --- replay ----------------------------------------------------------------------------------------


class CurveCache:
    """Learning curves trained step by step as far as asked, once, kept in ``path`` (JSON: key ->
    ``[loss, seconds]`` per step); a curve cut short by an earlier process is retrained from its
    start up to where it stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.known: dict[str, list[list[float]]] = json.loads(path.read_text()) if path.exists() else {}
        self.live: dict[str, tuple[Any, int]] = {}  # key -> (steps generator, steps it yielded)
        self.trained = 0

    def _at(self, key: str, k: int, train: Callable[[], Any]) -> tuple[float, float]:
        """``(loss, seconds)`` of step ``k`` of ``key``'s curve; ``train()`` starts its steps."""
        curve = self.known.setdefault(key, [])
        while len(curve) < k:
            steps, done = self.live.get(key) or (train(), 0)
            started = time.perf_counter()
            metrics = next(steps)
            done += 1
            self.live[key] = (steps, done)
            self.trained += 1
            if done > len(curve):
                loss = metrics["val_loss"]
                curve.append([loss if math.isfinite(loss) else math.inf, time.perf_counter() - started])
        loss, seconds = curve[k - 1]
        return loss, seconds

    def save(self) -> None:
        temp = self.path.with_suffix(".tmp")
        temp.write_text(json.dumps(self.known))
        os.replace(temp, self.path)


class Curves(CurveCache):
    """The learning curves of a draw: ``at(i, k)`` is ``(loss, seconds)`` of configuration ``i``'s
    step ``k``, trained as far as asked (once; kept in ``path``)."""

    def __init__(self, path: Path, pool: list[dict], seed: int) -> None:
        super().__init__(path)
        self.pool, self.seed = pool, seed

    def at(self, i: int, k: int) -> tuple[float, float]:
        return self._at(str(i), k, lambda: es_problems.steps(self.pool[i], trial_seed(self.seed, i)))


def simulate(curves: Curves, count: int, budget: int, steps: int, workers: int,
             decide: Callable[[int, int, float], bool], ended: Callable[[int, int, float], None] | None = None) -> dict:
    """``workers`` asynchronous workers train configurations ``0..count-1`` in order while fewer than
    ``budget`` steps have been reported, each step taking its recorded seconds; ``decide(trial,
    step, loss)`` is True to stop the trial. Returns the best loss, the steps spent, the arrivals
    ``(last loss, steps spent then)`` in the order trials ended, and each trial's steps."""
    events: list[tuple[float, int, int, int]] = []  # (time, worker, trial, step)
    state = {"next": 0, "spent": 0}
    arrivals: list[tuple[float, int]] = []
    lengths: dict[int, int] = {}
    order: list[int] = []  # the trials in the order they ended

    def start(worker: int, now: float) -> None:
        if state["spent"] >= budget or state["next"] >= count:
            return
        trial = state["next"]
        state["next"] += 1
        heapq.heappush(events, (now + curves.at(trial, 1)[1], worker, trial, 1))

    for worker in range(workers):
        start(worker, 0.0)
    while events:
        now, worker, trial, step = heapq.heappop(events)
        loss = curves.at(trial, step)[0]
        state["spent"] += 1
        if step >= steps or decide(trial, step, loss):
            arrivals.append((loss, state["spent"]))
            order.append(trial)
            lengths[trial] = step
            if ended is not None:
                ended(trial, step, loss)
            start(worker, now)
        else:
            heapq.heappush(events, (now + curves.at(trial, step + 1)[1], worker, trial, step + 1))
    return {"best": min(_losses(arrivals), default=math.nan), "epochs": state["spent"], "arrivals": arrivals,
            "lengths": [lengths[t] for t in sorted(lengths)], "order": order}


def replay_none(curves: Curves, count: int, steps: int, workers: int) -> dict:
    return simulate(curves, count, count * steps, steps, workers, lambda *_: False)


def replay_asha(curves: Curves, budget: int, steps: int, workers: int, options: dict) -> dict:
    from emews.training.schedulers.asha import ASHA

    scheduler = ASHA(**{"max_t": steps, **options})
    scheduler.bind(metric="val_loss", direction="minimize")
    return simulate(curves, len(curves.pool), budget, steps, workers,
                    lambda trial, step, loss: scheduler.on_report(trial, step, {"val_loss": loss}, {}).stop,
                    lambda trial, step, loss: scheduler.ended(trial))


def replay_optuna(curves: Curves, budget: int, steps: int, pruner: Any, name: str | None = None) -> dict:
    """An Optuna study (one trial at a time, named ``name``) on the curves in order, until ``budget`` steps."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", pruner=pruner, sampler=optuna.samplers.RandomSampler(0),
                                study_name=name)
    spent, arrivals, lengths = 0, [], []
    while spent < budget and len(lengths) < len(curves.pool):
        trial = study.ask()
        loss, step = train_optuna_trial(study, trial, lambda step: curves.at(trial.number, step)[0], steps)
        spent += step
        lengths.append(step)
        arrivals.append((loss, spent))
    return {"best": min(_losses(arrivals), default=math.nan), "epochs": spent, "arrivals": arrivals,
            "lengths": lengths, "order": list(range(len(lengths)))}


class StudyTrials:
    """The curves a replayed Optuna study trains, one trial per index: trial ``i`` is asked of
    ``study`` when a worker starts it (its first ``at``), ``params_of(trial, i)`` gives its
    configuration (a fixed one, or the sampler's suggestion) and ``curve_at(params, k)`` the
    ``(loss, seconds)`` of its step ``k``."""

    def __init__(self, study: Any, params_of: Callable[[Any, int], dict],
                 curve_at: Callable[[dict, int], tuple[float, float]]) -> None:
        self.study, self.params_of, self.curve_at = study, params_of, curve_at
        self.trials: dict[int, Any] = {}
        self.params: dict[int, dict] = {}

    def at(self, index: int, k: int) -> tuple[float, float]:
        if index not in self.trials:
            self.trials[index] = self.study.ask()
            self.params[index] = self.params_of(self.trials[index], index)
        return self.curve_at(self.params[index], k)


def replay_optuna_parallel(trials: StudyTrials, count: int, budget: int, steps: int, workers: int) -> dict:
    """The study of ``trials`` with ``workers`` trials at a time, as :func:`simulate` runs the
    emews rows: each trial reports every step and asks ``should_prune`` (what a worker of
    ``n_jobs`` or of several processes sharing a storage does), and is told when it ends."""
    import optuna

    def decide(index: int, step: int, loss: float) -> bool:
        trial = trials.trials[index]
        trial.report(loss, step)
        return trial.should_prune()

    def ended(index: int, step: int, loss: float) -> None:
        trial = trials.trials[index]
        if step < steps:
            trials.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            trial.report(loss, step)
            trials.study.tell(trial, loss if math.isfinite(loss) else None,
                              state=None if math.isfinite(loss) else optuna.trial.TrialState.FAIL)

    run = simulate(trials, count, budget, steps, workers, decide, ended)
    run["configs"] = [trials.params[i] for i in sorted(trials.params)]
    return run


def optuna_study(pruner: Any, sampler: Any, name: str) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction="minimize", pruner=pruner, sampler=sampler, study_name=name)


def replay_sha_parallel(curves: Curves, budget: int, steps: int, workers: int, name: str) -> dict:
    """Optuna's ``SuccessiveHalvingPruner()`` on the curves in order, ``workers`` trials at a time."""
    import optuna

    study = optuna_study(optuna.pruners.SuccessiveHalvingPruner(), optuna.samplers.RandomSampler(0), name)
    trials = StudyTrials(study, lambda trial, i: {"index": i}, lambda params, k: curves.at(params["index"], k))
    run = replay_optuna_parallel(trials, len(curves.pool), budget, steps, workers)
    run.pop("configs")
    return run


def replay_tpe_parallel(chosen: Chosen, problem: str, budget: int, steps: int, seed: int, workers: int) -> dict:
    """Optuna's ``TPESampler(seed=seed)`` with ``SuccessiveHalvingPruner()``, ``workers`` trials at a
    time: each configuration is suggested when a worker starts it (the sampler sees the trials
    finished by then, its defaults otherwise, as with ``n_jobs``)."""
    import optuna

    drawn = model_space(problem, steps)
    study = optuna_study(optuna.pruners.SuccessiveHalvingPruner(), optuna.samplers.TPESampler(seed=seed),
                         study_name(problem, seed, "optuna-tpe-sha-parallel"))
    trials = StudyTrials(study, lambda trial, i: {**suggest_optuna(trial, drawn), "problem": problem, "epochs": steps},
                         chosen.at)
    return replay_optuna_parallel(trials, 2**31, budget, steps, workers)


def train_optuna_trial(study: Any, trial: Any, loss_at: Callable[[int], float], steps: int) -> tuple[float, int]:
    """Report ``trial``'s curve (``loss_at(step)``) step by step until its pruner stops it, tell
    the study how it ended (pruned, complete, or failed on a non-finite loss); the last loss and
    the steps trained."""
    import optuna

    loss, step = math.nan, 0
    for step in range(1, steps + 1):
        loss = loss_at(step)
        trial.report(loss, step)
        if step < steps and trial.should_prune():
            break
    if step < steps:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    else:
        study.tell(trial, loss if math.isfinite(loss) else None,
                   state=None if math.isfinite(loss) else optuna.trial.TrialState.FAIL)
    return loss, step


def study_name(problem: str, seed: int, method: str) -> str:
    """The Optuna study's name: fixed per problem, seed and row, so that a rerun repeats
    (``HyperbandPruner`` assigns trial ``n`` to a bracket by a hash of ``"{study_name}_{n}"``; a
    study left unnamed gets a random name, hence other brackets, on every run)."""
    return f"emews-es-{problem}-s{seed}-{method}"


# --- model-based rows: the optimizer chooses the configurations --------------------------------------


class Chosen(CurveCache):
    """Learning curves of configurations an optimizer chose, keyed by configuration: ``at(params,
    k)`` is ``(loss, seconds)`` of its step ``k``, trained as far as asked (once; kept in ``path``,
    so reruns and the other model-based rows reuse it). A configuration trains with a seed of its
    own (of the configuration and the problem's seed: :meth:`seed`), so its curve is the same
    whichever row chose it, at whatever place in the run."""

    def __init__(self, path: Path, seed: int) -> None:
        super().__init__(path)
        self.seed = seed

    @staticmethod
    def key(params: dict) -> str:
        return json.dumps(params, sort_keys=True)

    def seed_of(self, key: str) -> int:
        import hashlib

        return int.from_bytes(hashlib.sha256(f"{self.seed}:{key}".encode()).digest()[:4], "big") % (2**31 - 1)

    def at(self, params: dict, k: int) -> tuple[float, float]:
        key = self.key(params)
        return self._at(key, k, lambda: es_problems.steps(params, self.seed_of(key)))


class ReplayEvaluator:
    """What an emews optimizer sees of a run (``put``, ``get``, ``pending``, ``remaining``,
    ``reports()``), backed by the replay: ``workers`` asynchronous workers train the points put,
    each step taking its recorded seconds, the trial scheduler's object deciding at every report
    as the runtime asks it; ``get`` advances the clock until a trial ends. New trials start while
    fewer than ``budget`` steps have been reported (``budget: {steps: N}``; trials running then
    finish or are stopped by the scheduler, as in the other replayed rows)."""

    def __init__(self, chosen: Chosen, space: Any, budget: int, steps: int, workers: int, seed: int,
                 scheduler: Any) -> None:
        from emews.core.direction import Direction

        self.chosen, self.space, self.steps, self.workers, self.seed = chosen, space, steps, workers, seed
        self.step_budget, self.scheduler = budget, scheduler
        self.metric, self.direction, self.exp_dir = "val_loss", Direction.MINIMIZE, None
        self.budget, self.history, self.requeued, self.earlier_points = 2**62, (), (), 0
        self.events: list[tuple[float, int, int]] = []  # (time, trial, step)
        self.params: dict[int, dict] = {}
        self.stored: list[Any] = []
        self.done: list[Any] = []
        self.now, self.spent, self.running = 0.0, 0, 0
        self.arrivals: list[tuple[float, int]] = []
        self.lengths: dict[int, int] = {}

    @property
    def remaining(self) -> int:
        return 0 if self.spent >= self.step_budget else 2**62

    @property
    def pending(self) -> int:
        return len(self.params) - len(self.lengths) + len(self.done)

    def reports(self, trial: int | None = None) -> list[Any]:
        return [r for r in self.stored if trial is None or r.trial == trial]

    def room(self, own: Any) -> Any:
        """``Evaluator.room`` of fixed workers: the optimizer's own count, the workers as capacity."""
        from emews.core.evaluator import Room, own_count

        return Room.of(self.workers, own_count(own), self.pending, self.remaining)

    def put(self, points: list[dict]) -> list[int]:
        ids = []
        for point in points:
            if self.running >= self.workers:
                raise RuntimeError("more points put than free workers")
            trial = len(self.params)
            self.params[trial] = dict(point)
            self.running += 1
            heapq.heappush(self.events, (self.now + self.chosen.at(self.params[trial], 1)[1], trial, 1))
            ids.append(trial)
        return ids

    def get(self, n: int = 1, *, more_room: int | None = None) -> list[Any]:
        from emews.core.results import Result, Status, StoredReport

        while not self.done:
            self.now, trial, step = heapq.heappop(self.events)
            params = self.params[trial]
            loss = self.chosen.at(params, step)[0]
            self.spent += 1
            self.stored.append(StoredReport(len(self.stored), trial, step, {"val_loss": loss}, self.now))
            decision = self.scheduler.on_report(trial, step, {"val_loss": loss}, params)
            if step >= self.steps or decision.stop:
                self.scheduler.ended(trial)
                self.running -= 1
                self.arrivals.append((loss, self.spent))
                self.lengths[trial] = step
                ok = math.isfinite(loss)
                self.done.append(Result(id=trial, params=params, status=Status.OK if ok else Status.FAILED,
                                        objective=loss if ok else None, loss=loss if ok else math.inf,
                                        metrics={"val_loss": loss}))
            else:
                heapq.heappush(self.events, (self.now + self.chosen.at(params, step + 1)[1], trial, step + 1))
        out, self.done = self.done[:n], self.done[n:]
        return out


def model_space(problem: str, steps: int) -> Any:
    """The problem's space as the workflow gives it to the optimizer (``problem`` and ``epochs``
    constants, as in ``--real``)."""
    from emews.config.space_section import build_space

    raw = {**es_problems.SPACES[problem], "problem": {"type": "constant", "value": problem},
           "epochs": {"type": "constant", "value": steps}}
    return build_space(raw, "bench/es_problems.py", REPO)


def replay_bohb(chosen: Chosen, problem: str, budget: int, steps: int, workers: int, seed: int,
                options: dict, asha_options: dict) -> dict:
    """emews' ``bohb`` (seeded, ``options`` besides) choosing configurations, run by its own loop
    (``BOHB.run``: asynchronous ``suggest``/``ingest``, ``evaluator.reports()`` at every proposal)
    against :class:`ReplayEvaluator` with emews' ``ASHA`` (defaults but ``max_t``)."""
    from emews.optimizers.bohb import BOHB
    from emews.training.schedulers.asha import ASHA

    scheduler = ASHA(**{"max_t": steps, **asha_options})
    scheduler.bind(metric="val_loss", direction="minimize")
    evaluator = ReplayEvaluator(chosen, model_space(problem, steps), budget, steps, workers, seed, scheduler)
    origins: list[str] = []  # per trial: "random" or the budget its model was fitted at

    class Traced(BOHB):
        def suggest(self, n: int) -> list[dict]:
            points = []
            for _ in range(n):  # one at a time, so each point's origin is known
                before = self.stats["random"]
                points += super().suggest(1)
                origins.append("random" if self.stats["random"] > before else f"{self.stats['budget']:g}")
            return points

    optimizer = Traced(**{"seed": seed, **options})
    optimizer.run(evaluator)
    lengths = [evaluator.lengths[t] for t in sorted(evaluator.lengths)]
    return {"best": min(_losses(evaluator.arrivals), default=math.nan), "epochs": evaluator.spent,
            "arrivals": evaluator.arrivals, "lengths": lengths, "order": list(evaluator.lengths),
            "bohb": {"random": optimizer.stats["random"], "model": optimizer.stats["model"],
                     "budgets": {f"{k:g}": v for k, v in sorted(optimizer.modelled.items())},
                     "with_stopped": optimizer.with_stopped},
            "configs": [evaluator.params[t] for t in sorted(evaluator.params)], "origins": origins}


def suggest_optuna(trial: Any, space: Any) -> dict:
    """A point of ``space`` from an Optuna trial (an ordered list as a categorical, as a user of
    Optuna writes it; a log range with ``log=True``)."""
    from emews.core.space import Categorical, Float, Int

    point = {}
    for name, dim in space.free.items():
        if isinstance(dim, Float):
            point[name] = trial.suggest_float(name, dim.lower, dim.upper, log=dim.log)
        elif isinstance(dim, Int):
            point[name] = trial.suggest_int(name, dim.lower, dim.upper, log=dim.log)
        elif isinstance(dim, Categorical):
            point[name] = trial.suggest_categorical(name, list(dim.values))
        else:
            raise TypeError(f"{name}: {type(dim).__name__} has no Optuna suggest")
    return point


def replay_tpe(chosen: Chosen, problem: str, budget: int, steps: int, seed: int) -> dict:
    """Optuna's ``TPESampler(seed=seed)`` (defaults) choosing configurations, one trial at a time,
    with ``SuccessiveHalvingPruner()`` deciding at every report, until ``budget`` steps."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    drawn = model_space(problem, steps)
    study = optuna.create_study(direction="minimize", pruner=optuna.pruners.SuccessiveHalvingPruner(),
                                sampler=optuna.samplers.TPESampler(seed=seed),
                                study_name=study_name(problem, seed, "optuna-tpe-sha"))
    spent, arrivals, lengths, configs = 0, [], [], []
    while spent < budget:
        trial = study.ask()
        params = {**suggest_optuna(trial, drawn), "problem": problem, "epochs": steps}
        configs.append(params)
        loss, step = train_optuna_trial(study, trial, lambda step: chosen.at(params, step)[0], steps)
        spent += step
        lengths.append(step)
        arrivals.append((loss, spent))
    return {"best": min(_losses(arrivals), default=math.nan), "epochs": spent, "arrivals": arrivals,
            "lengths": lengths, "order": list(range(len(lengths))), "configs": configs}


def replay_ray(curves: Curves, budget: int, steps: int, workers: int) -> dict:
    """Ray Tune's ``ASHAScheduler`` (defaults but ``max_t``) deciding on the curves (in Ray's venv)."""
    from ray.tune.schedulers import ASHAScheduler, TrialScheduler

    scheduler = ASHAScheduler(metric="val_loss", mode="min", max_t=steps)

    class _Trial:  # what the scheduler reads of a trial
        def __init__(self, trial_id: str) -> None:
            self.trial_id = trial_id

    trials: dict[int, _Trial] = {}

    def decide(trial: int, step: int, loss: float) -> bool:
        if trial not in trials:
            trials[trial] = _Trial(str(trial))
            scheduler.on_trial_add(None, trials[trial])
        result = {"training_iteration": step, "val_loss": loss}
        return scheduler.on_trial_result(None, trials[trial], result) == TrialScheduler.STOP

    def ended(trial: int, step: int, loss: float) -> None:
        scheduler.on_trial_complete(None, trials[trial], {"training_iteration": step, "val_loss": loss})

    return simulate(curves, len(curves.pool), budget, steps, workers, decide, ended)


def tune_space(problem: str, steps: int) -> dict:
    """The problem's space as Ray Tune's domains (a log range as ``loguniform``/``lograndint``, an
    ordered list as ``choice``, as a user of Tune writes it; ``TuneBOHB`` turns it into a ConfigSpace)."""
    from ray import tune

    from emews.core.space import Categorical, Float, Int

    domains: dict[str, Any] = {}
    for name, dim in model_space(problem, steps).free.items():
        if isinstance(dim, Float):
            domains[name] = (tune.loguniform if dim.log else tune.uniform)(dim.lower, dim.upper)
        elif isinstance(dim, Int):  # Tune's integer upper bound is exclusive
            domains[name] = (tune.lograndint if dim.log else tune.randint)(dim.lower, dim.upper + 1)
        elif isinstance(dim, Categorical):
            domains[name] = tune.choice(list(dim.values))
        else:
            raise TypeError(f"{name}: {type(dim).__name__} has no Tune domain")
    return domains


class _RayTrial:
    """What Ray's schedulers and searchers read of a trial (``trial_id``, ``status``, ``is_saving``)."""

    def __init__(self, trial_id: str, params: dict, status: str) -> None:
        self.trial_id, self.params, self.status = trial_id, params, status
        self.is_saving = False
        self.step = 0
        self.last_result: dict = {}

    def __str__(self) -> str:
        return self.trial_id


def replay_ray_bohb(chosen: Chosen, problem: str, budget: int, steps: int, workers: int, seed: int) -> dict:
    """Ray Tune's BOHB choosing configurations (in Ray's venv): ``TuneBOHB(seed=seed)`` in a
    ``ConcurrencyLimiter(max_concurrent=workers)`` with ``HyperBandForBOHB(max_t=steps)``, both
    given the metric and the space as ``Tuner`` gives them, driven as Tune's ``TuneController``
    drives them: new trials asked of the searcher while fewer than ``workers`` are pending (its
    ``max_pending_trials`` under a limiter), a free worker takes the scheduler's
    ``choose_trial_to_run`` or else the oldest pending trial, every report goes to the scheduler
    and, unless it says STOP, to the searcher; PAUSE frees the worker (the trial resumes where it
    was when the scheduler promotes it), STOP ends the trial (``stop_trial``). Steps take their
    recorded seconds on ``workers`` workers; no trial starts or resumes once ``budget`` steps are spent.

    ``arrivals``: each trial once, with its last loss, when it last left its worker (stopped, done,
    or paused and never resumed), as the other rows count a trial; ``paused_arrivals`` also counts
    the loss of every pause of a trial resumed later (its checkpoint holds that model)."""
    import logging

    import numpy as np
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import HyperBandForBOHB, TrialScheduler
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.bohb import TuneBOHB

    # hpbandster draws from numpy's global generator (TuneBOHB's seed seeds only the ConfigSpace):
    # seeded too, so that a rerun repeats
    np.random.seed(seed)
    failures: list[str] = []  # hpbandster falls back to a random configuration on errors: count them

    class _Failures(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING and "random configuration" in record.getMessage():
                failures.append(record.getMessage().splitlines()[0])

    bohb = TuneBOHB(seed=seed)
    searcher = ConcurrencyLimiter(bohb, max_concurrent=workers)
    searcher.set_search_properties("val_loss", "min", tune_space(problem, steps))
    logging.getLogger("hpbandster").addHandler(_Failures())
    bohb.bohber.logger.addHandler(_Failures())
    picks = {"model": 0, "random": 0}
    get_config = bohb.bohber.get_config

    def counted(budget_: Any) -> tuple[dict, dict]:
        config, info = get_config(budget_)
        picks["model" if info.get("model_based_pick") else "random"] += 1
        return config, info

    bohb.bohber.get_config = counted
    scheduler = HyperBandForBOHB(time_attr="training_iteration", max_t=steps)
    scheduler.set_search_properties("val_loss", "min")
    trials: list[_RayTrial] = []
    events: list[tuple[float, int, str]] = []  # (time, trial, its step)
    state = {"now": 0.0, "spent": 0, "running": 0, "paused": 0, "resumed": 0}
    arrivals: list[tuple[float, int]] = []
    held: dict[str, int] = {}  # trial -> its arrival when it paused
    withdrawn: set[int] = set()  # the arrivals of pauses resumed later
    order: list[int] = []

    class Controller:  # what HyperBandForBOHB calls back
        search_alg = type("SearchGenerator", (), {"searcher": searcher})()

        def get_trials(self) -> list[_RayTrial]:
            return trials

        def stop_trial(self, trial: _RayTrial) -> None:  # TuneController.stop_trial
            if trial.status in (Trial.ERROR, Trial.TERMINATED):
                return
            if trial.status in (Trial.PENDING, Trial.PAUSED):
                scheduler.on_trial_remove(self, trial)
                searcher.on_trial_complete(trial.trial_id)
            else:
                scheduler.on_trial_complete(self, trial, trial.last_result)
                searcher.on_trial_complete(trial.trial_id, result=trial.last_result)
            trial.status = Trial.TERMINATED
            order.append(int(trial.trial_id))

    controller = Controller()

    def params_of(config: dict) -> dict:
        plain = {k: v.item() if isinstance(v, np.generic) else v for k, v in config.items()}
        return {**plain, "problem": problem, "epochs": steps}

    def start(trial: _RayTrial) -> None:
        if trial.status == Trial.PAUSED:
            state["resumed"] += 1
            withdrawn.add(held.pop(trial.trial_id))
        trial.status = Trial.RUNNING
        state["running"] += 1
        heapq.heappush(events, (state["now"] + chosen.at(trial.params, trial.step + 1)[1], int(trial.trial_id),
                                trial.trial_id))

    def fill() -> None:
        if state["spent"] >= budget:
            return
        while sum(t.status == Trial.PENDING for t in trials) < workers:  # _maybe_update_trial_queue
            trial_id = f"{len(trials):05d}"
            config = searcher.suggest(trial_id)
            if config is None:
                break
            trials.append(_RayTrial(trial_id, params_of(config), Trial.PENDING))
            scheduler.on_trial_add(controller, trials[-1])
        while state["running"] < workers:  # _maybe_add_actors
            trial = scheduler.choose_trial_to_run(controller) or next(
                (t for t in trials if t.status == Trial.PENDING), None)
            if trial is None:
                return
            if trial.step >= steps:  # nothing left to train (not seen so far): it ends
                controller.stop_trial(trial)
                continue
            start(trial)

    fill()
    while events:
        state["now"], _, trial_id = heapq.heappop(events)
        trial = trials[int(trial_id)]
        trial.step += 1
        loss = chosen.at(trial.params, trial.step)[0]
        state["spent"] += 1
        trial.last_result = result = {"training_iteration": trial.step, "val_loss": loss, "trial_id": trial_id}
        decision = scheduler.on_trial_result(controller, trial, result)
        if decision != TrialScheduler.STOP:
            searcher.on_trial_result(trial_id, result)
        if decision == TrialScheduler.CONTINUE and trial.step < steps:
            heapq.heappush(events, (state["now"] + chosen.at(trial.params, trial.step + 1)[1], int(trial_id),
                                    trial_id))
            continue
        state["running"] -= 1
        arrivals.append((loss, state["spent"]))  # the loss it holds now, stopped, done or paused
        if decision == TrialScheduler.PAUSE:
            trial.status = Trial.PAUSED
            state["paused"] += 1
            held[trial_id] = len(arrivals) - 1
        else:  # STOP, or its training loop ended
            controller.stop_trial(trial)
        fill()
    last = [arrival for i, arrival in enumerate(arrivals) if i not in withdrawn]
    return {"best": min(_losses(last), default=math.nan), "epochs": state["spent"], "arrivals": last,
            "paused_arrivals": arrivals, "lengths": [t.step for t in trials if t.step], "order": order,
            "ray_bohb": {"trials": len(trials), "model": picks["model"], "random": picks["random"],
                         "paused": state["paused"], "resumed": state["resumed"], "fallbacks": len(failures),
                         "brackets": scheduler.state()["num_brackets"]},
            "configs": [t.params for t in trials]}


def ray_python(venv: Path) -> Path:
    """The venv's python with Ray Tune (made on first use, seeing this interpreter's packages)."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import ray.tune, emews, torch, sklearn"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"making {venv} ({RAY_SPEC}) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", RAY_SPEC], check=True)
    subprocess.run(probe, check=True)
    return python


def ray_bohb_ready(python: Path) -> str | None:
    """None when ``python`` (Ray's venv) imports ``TuneBOHB``'s packages, installing them into that
    venv on first use; else why not (one line)."""
    probe = [str(python), "-c", "import hpbandster, ConfigSpace; from ray.tune.search.bohb import TuneBOHB"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return None
    print(f"installing {' '.join(BOHB_SPECS)} into {python.parent.parent} ...", flush=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *BOHB_SPECS], capture_output=True)
    proc = subprocess.run(probe, capture_output=True, text=True)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["import failed"])[-1]


def ray_child(request: dict) -> None:
    """``--ray-child``: the ray-asha or ray-bohb row of one problem and seed, printed as JSON."""
    if request.get("row") == "ray-bohb":
        chosen = Chosen(Path(request["cache"]), request["seed"])
        run = replay_ray_bohb(chosen, request["problem"], request["budget"], request["steps"], request["workers"],
                              request["seed"])
        chosen.save()
        if request.get("target") is not None:  # counting every pause's loss too
            run["to_match_at_pause"] = epochs_to_match(run["paused_arrivals"], request["target"])
        print(json.dumps({**run, "trained": chosen.trained}))
        return
    pool = draw_configs(request["problem"], request["pool"], request["steps"], request["seed"])
    curves = Curves(Path(request["cache"]), pool, request["seed"])
    run = replay_ray(curves, request["budget"], request["steps"], request["workers"])
    curves.save()
    print(json.dumps({**run, "trained": curves.trained}))


def run_ray(python: Path, request: dict) -> dict:
    proc = subprocess.run([str(python), __file__, "--ray-child", json.dumps(request)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{request.get('row', 'ray-asha')} ({request['problem']}, seed {request['seed']}) failed:\n"
                         f"{proc.stderr[-3000:]}")
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    run["arrivals"] = [tuple(a) for a in run["arrivals"]]
    return run


# --- real runs (--real) ----------------------------------------------------------------------------


def run_emews(folder: Path, name: str, problem: str, configs: list[dict], seed: int, workers: int, steps: int,
              scheduler: dict | None, budget: int | None = None) -> dict:
    """``emews launch`` of ``configs`` in order (``FixedConfigs``) until ``budget`` steps."""
    import yaml

    listing = folder / f"{name}-configs.json"
    listing.write_text(json.dumps(configs))
    data = yaml.safe_load(WORKFLOW.read_text())
    data.update(optimizer={"name": f"{Path(__file__).resolve()}:FixedConfigs",
                           "options": {"configs": str(listing), "epochs": budget}},
                budget={"evaluations": len(configs)}, seed=seed, checkpoints={"keep_last": 1})
    data["objective"]["module"] = str(OBJECTIVE)
    data["space"] = {**es_problems.SPACES[problem], "problem": {"type": "constant", "value": problem},
                     "epochs": {"type": "constant", "value": steps}}
    data.pop("trial_scheduler", None)
    if scheduler:
        data["trial_scheduler"] = scheduler
    wf = folder / f"{name}.yaml"
    wf.write_text(yaml.safe_dump(data))
    exp = folder / f"exp-{name}"
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "emews", "launch", str(wf), "--workers", str(workers),
                           "--exp-dir", str(exp)], capture_output=True, text=True)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{name}: emews launch failed:\n{proc.stderr}")
    db = sqlite3.connect(exp / "results.db")
    best = db.execute("SELECT MIN(objective) FROM results WHERE status = 'ok'").fetchone()[0]
    spent = db.execute("SELECT COUNT(*) FROM reports").fetchone()[0]
    # the steps spent when each result arrived, in arrival order: what it took to hold that loss
    arrivals = [(objective, db.execute("SELECT COUNT(*) FROM reports WHERE time <= ?", (finished,)).fetchone()[0])
                for objective, finished in db.execute(
                    "SELECT objective, finished FROM results WHERE status = 'ok' ORDER BY finished")]
    db.close()
    return {"best": best, "epochs": spent, "wall": wall, "arrivals": arrivals}


class _OptunaContext:
    """The objective's ``ctx`` backed by an Optuna trial: report -> trial.report + should_prune."""

    def __init__(self, trial: Any, seed: int) -> None:
        self.trial, self.seed, self.epochs = trial, seed, 0

    def report(self, step: int, metrics: dict, checkpoint: Any = None, wait: bool = True) -> Any:
        from emews.training.messages import CONTINUE, Action, Decision

        self.epochs += 1
        self.trial.report(metrics["val_loss"], step)
        return Decision(Action.STOP) if self.trial.should_prune() else CONTINUE


def run_optuna(configs: list[dict], seed: int, pruner: Any, budget: int, name: str | None = None) -> dict:
    """Optuna (one trial at a time, in this process) on ``configs`` in order until ``budget`` steps."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed),
                                study_name=name)
    spent = 0

    def optimize(trial: Any) -> float:
        nonlocal spent
        params = configs[trial.number]  # the pruner sees only the reported values
        ctx = _OptunaContext(trial, trial_seed(seed, trial.number))
        metrics = es_problems.run(params, ctx)
        spent += ctx.epochs
        if ctx.epochs < params["epochs"]:
            trial.set_user_attr("val_loss", metrics["val_loss"])
            raise optuna.TrialPruned()
        return metrics["val_loss"]

    arrivals: list[tuple[float, int]] = []

    def arrived(study: Any, trial: Any) -> None:
        arrivals.append((trial.value if trial.value is not None else trial.user_attrs.get("val_loss"), spent))
        if spent >= budget:
            study.stop()

    started = time.perf_counter()
    study.optimize(optimize, n_trials=len(configs), callbacks=[arrived])
    wall = time.perf_counter() - started
    return {"best": min(_losses(arrivals), default=math.nan), "epochs": spent, "wall": wall, "arrivals": arrivals}


# --- the table -------------------------------------------------------------------------------------


def _losses(arrivals: list[tuple[float | None, int]]) -> list[float]:
    """The finite losses of ``arrivals`` (a diverged trial reports NaN; it never counts as best)."""
    return [loss for loss, _ in arrivals if loss is not None and math.isfinite(loss)]


def epochs_to_match(arrivals: list[tuple[float | None, int]], target: float) -> float:
    """The steps spent when a result at least as good as ``target`` first arrived (inf: never)."""
    for loss, epochs in arrivals:
        if loss is not None and math.isfinite(loss) and loss <= target:
            return epochs
    return math.inf


def _share(value: float) -> str:
    return "never" if math.isinf(value) else f"{value:.2f}"


def report(runs: dict[str, dict[str, list[dict]]], methods: list[str]) -> None:
    """The table: per problem, medians over seeds; then over every problem and seed."""
    print(f"{'problem':>8} {'method':>17} {'best loss':>10} {'steps':>7} {'of none':>8} {'to match':>9} "
          f"{'of none':>8}  per seed (to match, of none's steps)")
    every: dict[str, list[float]] = {m: [] for m in methods}
    for problem, by_method in runs.items():
        none = by_method["none"]
        for name in methods:
            results = by_method.get(name)
            if not results:
                continue
            shares = [r["to_match"] / n["epochs"] for r, n in zip(results, none)]
            every[name] += shares
            to_match = statistics.median(r["to_match"] for r in results)
            print(f"{problem:>8} {name:>17} {statistics.median(r['best'] for r in results):>10.4f} "
                  f"{statistics.median(r['epochs'] for r in results):>7.0f} "
                  f"{statistics.median(r['epochs'] / n['epochs'] for r, n in zip(results, none)):>8.2f} "
                  f"{'never' if math.isinf(to_match) else f'{to_match:.0f}':>9} "
                  f"{_share(statistics.median(shares)):>8}  {', '.join(_share(s) for s in shares)}")
    print("# over every problem and seed, median steps to match none's best as a share of none's steps"
          " (and against the reference row: the ratio of the medians, a paired bootstrap 90 % interval"
          " over the problem-seeds, and how often the ratio is <= 0.7 in it):")
    for name in methods:
        if every[name]:
            line = (f"#   {name:>17}: {_share(statistics.median(every[name]))} "
                    f"(matched in {sum(not math.isinf(s) for s in every[name])} of {len(every[name])})")
            reference = REFERENCE.get(name)
            if reference in methods and every[reference]:
                ratio, low, high, at_most = paired_bootstrap(every[name], every[reference])
                line += f"; {ratio:.2f}x {reference} (90 % {low:.2f}-{high:.2f}, P(<= 0.7) {at_most:.2f})"
            print(line)


def _ratio(row: list[float], reference: list[float]) -> float:
    """The ratio of the medians of ``row`` and ``reference`` (inf when the reference's is 0 or never)."""
    low, top = statistics.median(row), statistics.median(reference)
    if math.isinf(low) and math.isinf(top):
        return 1.0
    return low / top if 0 < top < math.inf else math.inf


def paired_bootstrap(row: list[float], reference: list[float], draws: int = 4000,
                     seed: int = 0) -> tuple[float, float, float, float]:
    """``row``'s median over ``reference``'s (the same problem-seeds, in the same order), the 5th
    and 95th percentiles of that ratio over ``draws`` resamples of the problem-seeds (paired: a
    draw takes both rows' values of each problem-seed it picks), and the share of draws where the
    ratio is at most 0.7."""
    rng = random.Random(seed)
    n = len(row)
    ratios = []
    for _ in range(draws):
        picked = [rng.randrange(n) for _ in range(n)]
        ratios.append(_ratio([row[i] for i in picked], [reference[i] for i in picked]))
    ratios.sort()
    return (_ratio(row, reference), ratios[int(0.05 * draws)], ratios[int(0.95 * draws) - 1],
            sum(r <= 0.7 for r in ratios) / draws)


def _seeds(text: str) -> list[int]:
    """``N`` -> 1..N, ``A-B`` -> A..B, ``a,b,c`` -> those."""
    if "-" in text:
        low, high = (int(part) for part in text.split("-"))
        seeds = list(range(low, high + 1))
    elif "," in text:
        seeds = [int(part) for part in text.split(",")]
    else:
        seeds = list(range(1, int(text) + 1))
    if not seeds or min(seeds) < 1:
        raise ValueError(text)
    return seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", default=",".join(es_problems.STEPS), help="comma-separated: mlp,cnn,hgb")
    parser.add_argument("--seeds", default="5", help="N (seeds 1..N), A-B or a comma-separated list")
    parser.add_argument("--workers", type=int, default=2, help="the emews and Ray rows' workers")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated rows ({', '.join(METHODS)}; none is always run: the reference)")
    parser.add_argument("--asha", default="{}", help="JSON: options of the asha row besides max_t (default none)")
    parser.add_argument("--bohb", default="{}", help="JSON: options of the bohb row besides the seed (default none)")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "emews-es-curves"),
                        help="folder of the replay's learning curves")
    parser.add_argument("--ray-python", default="/tmp/emews-bench-ray",
                        help="the venv with ray[tune] (made on first use)")
    parser.add_argument("--real", action="store_true",
                        help="train through emews launch and Optuna (rows none, asha, optuna-*) instead of replaying")
    parser.add_argument("--quick", action="store_true", help="9 configurations, 9 steps (a smoke run)")
    parser.add_argument("--traces", help="write each run's trial lengths and arrivals here (JSON)")
    parser.add_argument("--ray-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ray_child:
        return ray_child(json.loads(args.ray_child))
    problems = args.problems.split(",")
    try:
        seeds = _seeds(args.seeds)
    except ValueError:
        print(f"--seeds: N, A-B or a comma-separated list of positive integers, got {args.seeds!r}", file=sys.stderr)
        raise SystemExit(2) from None
    methods = ["none", *[m for m in args.methods.split(",") if m != "none"]]
    for key, chosen, allowed in (("--problems", problems, es_problems.STEPS), ("--methods", methods, METHODS)):
        unknown = [c for c in chosen if c not in allowed]
        if unknown:
            print(f"{key}: unknown {', '.join(unknown)}; allowed: {', '.join(allowed)}", file=sys.stderr)
            raise SystemExit(2)
    replayed_only = [m for m in methods if m in ("ray-asha", "optuna-sha-parallel", *MODEL_BASED)]
    if args.real and replayed_only:
        print(f"--real: {', '.join(replayed_only)}: replayed only, leave out of --methods", file=sys.stderr)
        raise SystemExit(2)
    options = {}
    for key in ("asha", "bohb"):
        try:
            options[key] = json.loads(getattr(args, key))
            assert isinstance(options[key], dict)
        except (ValueError, AssertionError):
            print(f"--{key}: a JSON object of {key} options, got {getattr(args, key)!r}", file=sys.stderr)
            raise SystemExit(2) from None
    asha_options, bohb_options = options["asha"], options["bohb"]
    if "bohb" in methods:  # bad options say so before any work
        from emews.optimizers.bohb import BOHB

        try:
            BOHB(**{"seed": 1, **bohb_options})
        except Exception as exc:  # noqa: BLE001 (the option check's own message, on one line)
            print(f"--bohb: {' '.join(str(exc).split())}", file=sys.stderr)
            raise SystemExit(2) from None
    import optuna

    python = ray_python(Path(args.ray_python)) if set(RAY_ROWS) & set(methods) else None
    if "ray-bohb" in methods:
        why = ray_bohb_ready(python)
        if why:  # the bench says so and goes on without the row
            print(f"ray-bohb: not run: {args.ray_python} lacks TuneBOHB's {' and '.join(BOHB_SPECS)} ({why})",
                  file=sys.stderr)
            methods.remove("ray-bohb")
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[str, list[dict]]] = {}
    traces: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="emews-es-bench-") as tmp:
        for problem in problems:
            steps = 9 if args.quick else es_problems.STEPS[problem]
            count = 9 if args.quick else CONFIGS[problem]
            budget = count * steps
            for seed in seeds:
                pool = draw_configs(problem, budget, steps, seed)  # more than any budget takes
                curves = Curves(cache / f"{problem}-{steps}-s{seed}.json", pool, seed)
                chosen = Chosen(cache / f"{problem}-{steps}-s{seed}-chosen.json", seed)
                folder = Path(tmp) / f"{problem}-{seed}"
                folder.mkdir()
                asha = {"name": "asha", "options": {"max_t": steps, **asha_options}}
                if args.real:
                    rows: dict[str, Callable[[], dict]] = {
                        "none": lambda: run_emews(folder, "none", problem, pool[:count], seed, args.workers, steps, None),
                        "asha": lambda: run_emews(folder, "asha", problem, pool, seed, args.workers, steps, asha,
                                                  budget),
                        "optuna-sha": lambda: run_optuna(pool, seed, optuna.pruners.SuccessiveHalvingPruner(), budget,
                                                         study_name(problem, seed, "optuna-sha")),
                        "optuna-hyperband": lambda: run_optuna(pool, seed, optuna.pruners.HyperbandPruner(), budget,
                                                               study_name(problem, seed, "optuna-hyperband")),
                    }
                else:
                    rows = {
                        "none": lambda: replay_none(curves, count, steps, args.workers),
                        "asha": lambda: replay_asha(curves, budget, steps, args.workers, asha_options),
                        "optuna-sha": lambda: replay_optuna(curves, budget, steps,
                                                            optuna.pruners.SuccessiveHalvingPruner(),
                                                            study_name(problem, seed, "optuna-sha")),
                        "optuna-sha-parallel": lambda: replay_sha_parallel(
                            curves, budget, steps, args.workers, study_name(problem, seed, "optuna-sha-parallel")),
                        "optuna-tpe-sha-parallel": lambda: replay_tpe_parallel(
                            chosen, problem, budget, steps, seed, args.workers),
                        "optuna-hyperband": lambda: replay_optuna(curves, budget, steps,
                                                                  optuna.pruners.HyperbandPruner(),
                                                                  study_name(problem, seed, "optuna-hyperband")),
                        "bohb": lambda: replay_bohb(chosen, problem, budget, steps, args.workers, seed,
                                                    bohb_options, asha_options),
                        "optuna-tpe-sha": lambda: replay_tpe(chosen, problem, budget, steps, seed),
                        "ray-asha": lambda: (curves.save(), run_ray(python, {
                            "problem": problem, "seed": seed, "pool": len(pool), "steps": steps, "budget": budget,
                            "workers": args.workers, "cache": str(curves.path)}))[1],
                        "ray-bohb": lambda: (chosen.save(), run_ray(python, {
                            "row": "ray-bohb", "problem": problem, "seed": seed, "steps": steps, "budget": budget,
                            "workers": args.workers, "cache": str(chosen.path),
                            "target": runs[problem]["none"][-1]["best"]}))[1],
                    }
                for name in methods:
                    run = rows[name]()
                    if name == "ray-asha":  # the child trained what it needed: read its curves
                        curves = Curves(curves.path, pool, seed)
                    if name == "ray-bohb":
                        chosen = Chosen(chosen.path, seed)
                    target = runs.get(problem, {}).get("none", [{}])[-1].get("best") if name != "none" else run["best"]
                    run["to_match"] = epochs_to_match(run["arrivals"], target)
                    traces.append({"problem": problem, "seed": seed, "method": name, **run})
                    run.pop("arrivals")
                    run.pop("lengths", None)
                    run.pop("order", None)
                    run.pop("configs", None)
                    run.pop("origins", None)
                    run.pop("paused_arrivals", None)
                    runs.setdefault(problem, {}).setdefault(name, []).append(run)
                    print(f"# {problem} seed {seed} {name}: {json.dumps(run)}", flush=True)
                    if not args.real:
                        curves.save()
                        chosen.save()
    how = "real runs (emews launch, Optuna serial)" if args.real else "replayed curves"
    sizes = ", ".join(f"{p} {9 if args.quick else CONFIGS[p]} configs x {9 if args.quick else es_problems.STEPS[p]} steps"
                      for p in problems)
    print(f"# {how}; none: {sizes};"
          f" the others: configurations in the same order until that many steps; seeds {args.seeds},"
          f" {args.workers} workers (emews, Ray, optuna-*-parallel), Optuna otherwise one trial at a time; asha options {asha_options or 'default'},"
          f" bohb options {bohb_options or 'default'}")
    report(runs, methods)
    if args.traces:
        Path(args.traces).write_text(json.dumps(traces))


if __name__ == "__main__":
    main()
