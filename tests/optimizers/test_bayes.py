"""Tests of the ``bayes`` optimizer (scikit-optimize surrogates, asynchronous batches)."""

from __future__ import annotations

import itertools
import math
import statistics
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import emews
from emews.core.evaluator import EvaluatorObserver
from emews.core.optimizer import AskTellOptimizer
from emews.optimizers._bayes import _engine
from emews.optimizers._bayes._space import SpaceMap
from emews.optimizers._training_set import window
from emews.optimizers.bayes import BayesianOptimizer
from emews.optimizers.random import RandomSearch
from emews.core.results import Result, Status
from emews.objective.function import ObjectiveRef
from emews.core.space import Categorical, Constant, Float, Int, Ordered, Space
from emews.testing import OptimizerConformance
from testutil import EVENTS, run_inline

HERE = __file__


def branin(params):
    from emews.objectives.benchmarks import branin as f
    return f(params)


# --------------------------------------------------------------------------- conformance kit

class TestConformance(OptimizerConformance):
    budget = 20
    workers = 3
    # With several workers the points after the initial design depend on when results arrive,
    # so a seed fixes only the initial design. Seed 0's design (and the three random fillers
    # after it) has no point the flaky objective fails on (about 6% of seeds), which left the
    # failure check to the timing-dependent model points: one of those trajectories has none
    # either, and the check failed 1 run in 6. Bayes proposes distinct points and fails on 29%
    # of them, as random sampling does (28.9% vs 29.4% over 15 seeds); seed 1's initial design
    # fails on two points whatever the timing.
    seed = 1

    def make_optimizer(self, seed):
        return BayesianOptimizer(seed=seed, n_initial_points=6, n_candidates=500)


# --------------------------------------------------------------------------- space mapping

SPACE = Space({
    "x": Float(-5.0, 5.0), "lr": Float(1e-5, 1.0, log=True), "n": Int(1, 64), "w": Int(1, 1024, log=True),
    "act": Categorical(("relu", None, 2.5, True)), "batch": Ordered((16, 32, 64, 128)),
    "opt": Constant("adam"), "one": Categorical(("only",)), "fixed": Int(3, 3),
})


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_space_round_trip(seed):
    import random
    smap = SpaceMap(SPACE)
    point = SPACE.sample(random.Random(seed))
    assert smap.from_skopt(smap.to_skopt(point)) == point
    # and from skopt's side: sampled skopt points become valid emews points of builtin types
    x = smap.skopt.rvs(1, random_state=seed)[0]
    back = smap.from_skopt(x)
    assert SPACE.contains(back)
    assert all(type(v) in (int, float, str, bool, type(None)) for v in back.values())
    assert smap.from_skopt(smap.to_skopt(back)) == back


def test_constants_and_single_values_are_not_searched():
    smap = SpaceMap(SPACE)
    assert smap.names == ["x", "lr", "n", "w", "act", "batch"]
    assert smap.fixed == {"opt": "adam", "one": "only", "fixed": 3}
    assert smap.skopt.dimensions[5].__class__.__name__ == "Integer"   # ordered -> index


def test_only_constants():
    opt = BayesianOptimizer(seed=0)
    opt.start(Space({"a": Constant(1)}), 1)
    assert opt.suggest(2) == [{"a": 1}, {"a": 1}]


# --------------------------------------------------------------------------- ask/tell

def _result(i, params, loss):
    ok = math.isfinite(loss)
    return Result(id=i, params=params, status=Status.OK if ok else Status.FAILED,
                  objective=loss if ok else None, loss=loss)


def test_suggest_inside_space_and_builtin():
    opt = BayesianOptimizer(seed=3, n_initial_points=5, n_candidates=300)
    opt.start(SPACE, 4)
    for rnd in range(4):
        points = opt.suggest(4)
        assert len(points) == 4
        for p in points:
            assert SPACE.contains(p), p
            assert all(type(v) in (int, float, str, bool, type(None)) for v in p.values())
        opt.ingest([_result(rnd * 4 + i, p, float(p["x"]) ** 2 + p["n"] / 64) for i, p in enumerate(points)])
    # a batch asked at once holds distinct points (constant liar)
    batch = opt.suggest(6)
    assert len({tuple(sorted((k, repr(v)) for k, v in p.items())) for p in batch}) == 6


def test_failures_get_the_worst_loss_or_are_skipped():
    space = Space({"x": Float(0.0, 1.0)})
    for penalty, expect in (("worst", [1.0, 3.0, 3.0]), ("skip", [1.0, 3.0]), (7.5, [1.0, 3.0, 7.5])):
        opt = BayesianOptimizer(seed=0, failure_penalty=penalty)
        opt.start(space, 1)
        opt.ingest([_result(0, {"x": 0.1}, 1.0), _result(1, {"x": 0.2}, 3.0), _result(2, {"x": 0.3}, math.inf)])
        X, y = opt.engine._training_set()
        assert sorted(y.tolist()) == expect
    # all failures: the model is not used until two finite losses exist; proposals keep coming
    opt = BayesianOptimizer(seed=0, n_initial_points=1)
    opt.start(space, 1)
    opt.ingest([_result(i, {"x": i / 10}, math.inf) for i in range(5)])
    assert all(space.contains(p) for p in opt.suggest(3))


def test_options_are_checked():
    with pytest.raises(ValueError, match="base_estimator"):
        BayesianOptimizer(base_estimator="GBRT")
    with pytest.raises(ValueError, match="acq_func"):
        BayesianOptimizer(acq_func="gp_hedgehog")
    with pytest.raises(ValueError, match="failure_penalty"):
        BayesianOptimizer(failure_penalty="mean")
    with pytest.raises(ValueError, match="n_initial_points"):
        BayesianOptimizer(n_initial_points=0)


@pytest.mark.parametrize("estimator", ["RF", "ET"])
def test_tree_surrogates(estimator):
    opt = BayesianOptimizer(seed=1, base_estimator=estimator, n_initial_points=4, n_candidates=300)
    opt.start(SPACE, 2)
    pts = opt.suggest(4)
    opt.ingest([_result(i, p, float(p["x"]) ** 2) for i, p in enumerate(pts)])
    batch = opt.suggest(3)
    assert all(SPACE.contains(p) for p in batch)
    assert len({repr(sorted(p.items())) for p in batch}) == 3


def test_switch_and_window():
    opt = BayesianOptimizer(seed=0, n_initial_points=2, max_gp_points=20, switch_after=30, n_candidates=200)
    space = Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})
    opt.start(space, 1)
    rng = np.random.RandomState(0)
    opt.ingest([_result(i, {"x": float(a), "y": float(b)}, float(a + b)) for i, (a, b) in enumerate(rng.rand(25, 2))])
    X, y = window(*opt.engine._training_set(), 20)
    assert len(y) == 20 and min(y) == min(opt.engine.y)
    assert opt.engine.estimator_name() == "GP" and len(opt.suggest(2)) == 2
    opt.ingest([_result(100 + i, {"x": float(a), "y": float(b)}, float(a + b)) for i, (a, b) in enumerate(rng.rand(10, 2))])
    assert opt.engine.estimator_name() == "ET" and len(opt.suggest(2)) == 2


# --------------------------------------------------------------------------- the asynchronous loop

def test_batches_when_several_workers_idle():
    space = Space({"x1": Float(-5.0, 10.0), "x2": Float(0.0, 15.0)})
    summary, opt = run_inline(lambda: BayesianOptimizer(seed=0, n_initial_points=4, lookahead=0, n_candidates=500),
                        objective=ObjectiveRef(HERE, "branin"), space=space, budget=28, workers=4)
    assert summary.completed == 28
    model_points = 28 - 4
    # one fit serves several points: far fewer fits than model-proposed points
    assert opt.stats["fits"] <= model_points / 2, opt.stats


class _SlowFit(BayesianOptimizer):
    """Every surrogate fit takes an extra 0.2 s (a stand-in for a GP at hundreds of points) and
    writes its start and end to the shared event log.

    The fit is slowed in this process, so the model stays in this process too (thread mode).
    """

    fit_seconds = 0.2

    def __init__(self, *args, **kwargs):
        kwargs["model_process"] = False
        super().__init__(*args, **kwargs)

    def start(self, space, workers):
        super().start(space, workers)
        fit, count = self.engine._fit, itertools.count()

        def slow_fit(*args, **kwargs):
            n = next(count)
            EVENTS.record("refit-start", n)
            try:
                self.pause(n)
                return fit(*args, **kwargs)
            finally:
                EVENTS.record("refit-end", n)

        self.engine._fit = slow_fit

    def pause(self, n: int) -> None:
        """The extra time fit ``n`` takes."""
        time.sleep(self.fit_seconds)


class _HeldFits(_SlowFit):
    """Fits 4 to 7 last until a task submitted after they began has started (at most 20 s each):
    refits that outlast a task whatever the load, so that the test sees whether tasks get out
    meanwhile. (Released by any start, a hold could end before a task submitted during it
    started, under load.) The first fits are left alone: speculation starts once a fit was
    timed, and the reserve it keeps is at most a quarter of the results told (one point or none
    while fewer than 8 are in)."""

    def pause(self, n: int) -> None:
        if not 4 <= n <= 7:
            return super().pause(n)
        began = EVENTS.record("held-fit", n)

        def fed(events):
            later = events[began + 1:]
            put = {task for kind, task in later if kind == "put"}
            return any(kind == "start" and task in put for kind, task in later)

        EVENTS.wait_until(fed, timeout=20.0)


class _SlowFitSync(_SlowFit):
    def run(self, evaluator):   # the naive loop: suggest (and so fit) on the main thread
        return AskTellOptimizer.run(self, evaluator)


def _timed_sphere(params, seconds):
    """A sphere that takes ``seconds`` and logs its start with its task id."""
    task = emews.current_task().task_id
    EVENTS.record("start", task)
    time.sleep(seconds)
    return sum(float(v) ** 2 for k, v in params.items() if k.startswith("x"))


def slow_sphere(params):
    """A 0.3 s objective: a refit (0.2 s and more) is shorter than a task."""
    return _timed_sphere(params, 0.3)


def quick_sphere(params):
    """A 0.1 s objective: results arrive faster than a slow refit."""
    return _timed_sphere(params, 0.1)


class _Recording:
    """Builds the optimizer, keeps every result its evaluator handed out and logs each task id
    it submits (after ``put`` returned)."""

    def __init__(self, cls, **kw):
        self.cls, self.kw, self.results = cls, kw, []

    def __call__(self):
        opt, results = self.cls(**self.kw), self.results
        run = opt.run

        class Recorded(EvaluatorObserver):
            def submitted(self, tasks):
                for task in tasks:
                    EVENTS.record("put", task.id)

            def received(self, rs):
                results.extend(rs)

        def run_recorded(evaluator):
            evaluator.observers.append(Recorded())
            return run(evaluator)

        opt.run = run_recorded
        return opt


def _overlaps(events):
    """From the event log of a run: (tasks submitted while a refit ran, those of them that also
    started before that refit ended, the refits)."""
    refits = events.spans("refit-start", "refit-end")
    starts = events.seqs("start")
    put_during, fed_during = [], []
    for task, put in events.seqs("put").items():
        for begin, end in refits:
            if begin < put < end:
                put_during.append(task)
                if starts.get(task, math.inf) < end:
                    fed_during.append(task)
                break
    return put_during, fed_during, refits


def _sphere_run(objective, opt, budget):
    space = Space({f"x{i}": Float(-1.0, 1.0) for i in range(3)})
    run_inline(opt, objective=ObjectiveRef(HERE, objective), space=space, budget=budget, workers=4)
    assert len(opt.results) == budget


def test_workers_stay_busy_during_slow_refits(events):
    """The model refits on its own thread: tasks are submitted, and start, while a refit runs.
    Fitting on the main thread instead submits nothing until the fit is done."""
    kw = dict(seed=0, n_initial_points=4, n_candidates=300)
    _sphere_run("slow_sphere", _Recording(_HeldFits, speculate=True, **kw), budget=48)
    put_during, fed_during, refits = _overlaps(events)
    assert fed_during, (len(refits), put_during)
    events.clear()
    _sphere_run("slow_sphere", _Recording(_SlowFitSync, lookahead=0, **kw), budget=16)
    put_during, _, refits = _overlaps(events)
    assert refits and put_during == [], (refits, put_during)


class _SlowerFit(_SlowFit):
    """Refits of 0.6 s and more: past ``speculate_after: 0.5``."""

    fit_seconds = 0.6


def long_sphere(params):
    """An 8 s objective: longer than a 0.6 s refit, also when both cores are busy with other work
    (at 1.5 s a refit under stress-ng outlasted a task and the defaults rightly speculated; at 4 s
    one did at load 15, the refit's own CPU stretched by the other processes). Task 2, the first
    wave's last, takes 10 s: its result comes once the first fit (on tasks 0 and 1) was timed, so
    the fit it asks for is one that may speculate."""
    return _timed_sphere(params, 10.0 if emews.current_task().task_id == 2 else 8.0)


class _InFlight(EvaluatorObserver):
    """The most evaluations an optimizer had out at once."""

    def __init__(self, evaluator):
        self.evaluator, self.most = evaluator, 0

    def submitted(self, tasks):
        self.most = max(self.most, self.evaluator.pending)


def _watched(cls, **kw):
    """An optimizer factory whose optimizer records its in-flight maximum as ``in_flight_seen``."""
    def make():
        opt = cls(**kw)
        run = opt.run

        def run_watched(evaluator):
            opt.watch = _InFlight(evaluator)
            evaluator.observers.append(opt.watch)
            return run(evaluator)

        opt.run = run_watched
        return opt
    return make


@pytest.mark.parametrize("objective, speculates, budget, initial", [
    ("long_sphere", False, 6, 2),  # two waves of 8 s tasks: task 2 asks for a fit after a timed one
    ("quick_sphere", True, 40, 4),
])
def test_defaults_speculate_only_when_refits_outlast_tasks(events, objective, speculates, budget, initial):
    """With its defaults bayes keeps one evaluation per worker in flight and waits for a refit
    that is shorter than a task (no runner-up, no random filler, no reserve: every point is
    chosen with every result back, and no fit is made speculating); when refits outlast tasks it
    hands waiting workers the last fit's runners-up. Speculating while refits are shorter than
    tasks need not hand out a runner-up (the reserve feeds the workers): the fits it made while
    speculating (``speculative_fits``) say it."""
    space = Space({f"x{i}": Float(-1.0, 1.0) for i in range(3)})
    summary, opt = run_inline(_watched(_SlowerFit, seed=0, n_initial_points=initial, n_candidates=300, speculate_after=0.5),
                        objective=ObjectiveRef(HERE, objective), space=space, budget=budget, workers=3)
    assert summary.completed == budget
    assert opt.watch.most <= 3, opt.watch.most
    if speculates:
        assert opt.stats["runners_up"] + opt.stats["random_fillers"] > 0, opt.stats
        assert opt.stats["speculative_fits"] > 0, opt.stats
    else:
        assert opt.stats["fits"] >= 2, opt.stats  # a fit after the first timed one: the decision was taken
        assert opt.stats["runners_up"] == opt.stats["random_fillers"] == opt.stats["speculative_fits"] == 0, opt.stats


def test_lookahead_adds_points_in_flight():
    space = Space({f"x{i}": Float(-1.0, 1.0) for i in range(3)})
    summary, opt = run_inline(_watched(BayesianOptimizer, seed=0, n_initial_points=4, n_candidates=300, lookahead=2),
                        objective=ObjectiveRef(HERE, "slow_sphere"), space=space, budget=12, workers=2)
    assert summary.completed == 12
    assert 2 < opt.watch.most <= 4, opt.watch.most


def test_max_idle_fills_with_random_points():
    space = Space({f"x{i}": Float(-1.0, 1.0) for i in range(3)})
    summary, opt = run_inline(lambda: _SlowFit(seed=0, n_initial_points=6, n_candidates=300, max_idle=0.0),
                        objective=ObjectiveRef(HERE, "quick_sphere"), space=space, budget=40, workers=4)
    assert summary.completed == 40
    assert opt.stats["random_fillers"] + opt.stats["runners_up"] > 0, opt.stats


def test_gp_variance_is_computed_stably():
    """The engine's GP prediction matches skopt's mean and a direct solve's variance."""
    space = Space({f"x{i}": Float(-5.0, 5.0) for i in range(3)})
    opt = BayesianOptimizer(seed=0, n_initial_points=2)
    opt.start(space, 1)
    rng = np.random.RandomState(0)
    pts = [{f"x{i}": float(v) for i, v in enumerate(row)} for row in rng.uniform(-5, 5, (60, 3))]
    opt.ingest([_result(i, p, sum(v * v for v in p.values())) for i, p in enumerate(pts)])
    X, y = opt.engine._training_set()
    model = opt.engine._fit("GP", X, y)
    C = rng.uniform(0, 1, (200, 3))
    mu, std = _engine._predict(model, C)
    mu_sk, _ = model.predict(C, return_std=True)
    np.testing.assert_allclose(mu, mu_sk, rtol=1e-6, atol=1e-6)
    K = model.L_ @ model.L_.T
    Kt = model.kernel_(C, model.X_train_)
    var = model.kernel_.diag(C) - np.einsum("ij,ji->i", Kt, np.linalg.lstsq(K, Kt.T, rcond=None)[0])
    ref = np.sqrt(np.maximum(var, 0)) * float(np.ravel(model.y_train_std_)[0])
    np.testing.assert_allclose(std, ref, rtol=1e-3, atol=1e-6 * ref.max())


def test_beats_random_on_branin():
    from emews.objectives.benchmarks import PROBLEMS
    space = PROBLEMS["branin"]["space"]
    obj = ObjectiveRef(HERE, "branin")
    bayes, rand = [], []
    for seed in range(3):
        s, _ = run_inline(lambda: BayesianOptimizer(seed=seed, n_initial_points=8, lookahead=0, speculate=False,
                                                      n_candidates=1000),
                    objective=obj, space=space, budget=30, workers=2, seed=seed)
        bayes.append(s.best.loss)
        s, _ = run_inline(lambda: RandomSearch(seed=seed), objective=obj, space=space, budget=30, workers=2, seed=seed)
        rand.append(s.best.loss)
    assert statistics.median(bayes) < statistics.median(rand), (bayes, rand)
    assert statistics.median(bayes) < 1.0, bayes


def test_hyperparameters_are_optimized_on_a_bounded_window():
    """A large GP window costs one Cholesky per fit; the kernel comes from at most
    ``max_hyperfit_points`` observations."""
    space = Space({f"x{i}": Float(-5.0, 5.0) for i in range(3)})
    engine = _engine.Engine(SpaceMap(space), seed=0, max_gp_points=100, max_hyperfit_points=20)
    rng = np.random.RandomState(0)
    X = rng.uniform(0, 1, (60, 3))
    y = (X ** 2).sum(1)
    engine.y = list(y)   # n_told for the hyperfit rule
    model = engine._fit("GP", X, y)
    assert engine.hyperfits == 1 and len(model.X_train_) == 60
    assert model.optimizer is None   # the whole window is fitted with the kernel found on 20 points
    with pytest.raises(ValueError, match="max_hyperfit_points"):
        BayesianOptimizer(max_hyperfit_points=3)


def test_points_still_pending_are_learned_as_the_mean_loss_and_a_batchs_picks_as_the_best():
    """Constant liar: a point pending from an earlier fit is told the mean of the losses (an
    optimistic lie for every pending point drew the next proposals around them), the picks of
    one batch the best loss so far."""
    plane = Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})
    engine = _engine.Engine(SpaceMap(plane), seed=0, n_initial_points=2, n_candidates=100, output_warp=False)
    xs = np.random.RandomState(1).uniform(0, 1, (20, 2))
    losses = xs @ np.array([3.0, 1.0])
    engine.tell([list(x) for x in xs], list(losses))
    engine.n_proposed = 20                           # the initial design is done: the model proposes
    fitted = []                                      # the targets of each GP fit, in loss units
    fit, fixed_gp = engine._fit, engine._fixed_gp

    def targets(model):
        std, mean = _engine._gp_parts(model)
        return np.ravel(model.y_train_) * std + mean

    def spy_fit(name, X, y, lies=None):
        model = fit(name, X, y, lies)
        fitted.append(targets(model))
        return model

    def spy_fixed(model, X, y):
        fitted.append(np.asarray(y, dtype=float))
        return fixed_gp(model, X, y)

    engine._fit, engine._fixed_gp = spy_fit, spy_fixed
    assert len(engine.propose(2, [[0.5, 0.5], [0.9, 0.1]])) == 2
    with_pending, with_pick = fitted[0], fitted[1]
    np.testing.assert_allclose(with_pending[:20], losses)
    np.testing.assert_allclose(with_pending[20:], [np.mean(losses)] * 2)
    np.testing.assert_allclose(with_pick[-1], np.min(losses))


def test_a_fit_waits_briefly_for_the_tasks_still_out(monkeypatch):
    """Tasks short next to a fit: the fit that a result starts waits (a quarter of the last fit)
    for the other tasks out, learns all their results and proposes for every freed worker.

    The share is raised from a quarter to 30 times the last fit (30 s): the test tells the three
    results once the model thread has decided to wait, and a quarter of the 1 s fit (0.25 s) ran
    out first whenever a loaded machine held the test's thread that long (a fit on 5 results). The
    wait ends as the last result comes in, so the test takes no longer; without a wait the fit
    still learns 5 results, not 8."""
    from emews.optimizers._bayes import _proposer
    from emews.optimizers._bayes._proposer import Proposer

    monkeypatch.setattr(_proposer, "GATHER", 30.0)

    space = Space({f"x{i}": Float(-1.0, 1.0) for i in range(3)})
    smap = SpaceMap(space)
    engine = _engine.Engine(smap, seed=0, n_initial_points=2, n_candidates=100)
    calls = []
    propose = engine.propose

    def recorded(n, pending=()):
        calls.append((engine.n_told, n))
        if len(calls) == 1:
            time.sleep(1.0)   # a slow first fit: the next one waits up to 0.25 s for the rest
        return propose(n, pending)

    engine.propose = recorded
    proposer = Proposer(engine)
    deciding = threading.Event()   # the model thread decides how long to wait (lock held)
    gather = proposer._gather_seconds

    def observed():
        if proposer._pending:
            deciding.set()
        return gather()

    proposer._gather_seconds = observed
    proposer.start()
    try:
        rng = np.random.RandomState(0)
        first = [list(x) for x in rng.uniform(-1, 1, (4, 3))]
        proposer.submitted([0, 1, 2, 3], first)
        proposer.tell([0, 1, 2, 3], first, [float(sum(v * v for v in x)) for x in first])
        proposer.request(4)
        proposer.wait_ready(4)
        batch = proposer.take(4)
        proposer.submitted([4, 5, 6, 7], batch)
        proposer.tell([4], [batch[0]], [float(sum(v * v for v in batch[0]))])   # starts a fit
        assert deciding.wait(60)
        for i, x in zip([5, 6, 7], batch[1:]):   # the other three come back at once
            proposer.tell([i], [x], [float(sum(v * v for v in x))])
        proposer.wait_ready(4)
    finally:
        proposer.close()
    assert calls[0] == (4, 4)
    assert calls[1] == (8, 4), calls   # one fit on all 8 results, a point for each freed worker


@pytest.mark.parametrize(("option", "seconds"), [(True, 0.0), (False, math.inf), (1, 1.0), (0, 0.0), (2.5, 2.5)])
def test_speculate_takes_numbers_as_seconds_and_booleans_as_words(option, seconds):
    """``speculate: 1`` is one second, not ``true`` (1 == True in a dict lookup was the bug)."""
    assert BayesianOptimizer(speculate=option).speculate == seconds


def test_a_seeded_launch_with_one_worker_proposes_the_same_points_again(emews_cmd, tmp_path) -> None:
    """docs/workflow-reference.md's promise for the model-based optimizers: with one worker the
    results come back in one order, so the same seed proposes the same points past the initial ones."""
    from testutil import stored_rows, write_workflow

    wf = write_workflow(tmp_path, optimizer={"name": "bayes", "options": {"seed": 3, "n_initial_points": 3}},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0},
                               "mode": {"type": "categorical", "values": ["ok", "dict"]}},
                        budget={"evaluations": 8})
    points = []
    for exp in ("one", "two"):
        proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", exp, timeout=240)
        assert proc.returncode == 0, proc.stderr
        points.append([row["params"] for row in stored_rows(tmp_path / exp)])
    assert len(points[0]) == 8 and points[0] == points[1]
