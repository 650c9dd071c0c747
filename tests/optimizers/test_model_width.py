"""Model-based search at width (issue 27 item 3): the work of a proposal stays bounded however
many points are in flight, every result still reaches the model, and a few workers get the
same proposals as without the bounds.

Work is counted (points a GP is fitted on, pending points learned as lies, candidates a batch is
picked from), never timed.
"""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest

from emews.core.results import Result, Status
from emews.core.space import Categorical, Float, Int, Space
from emews.objective.function import ObjectiveRef
from emews.optimizers._bayes import _engine
from emews.optimizers._bayes._engine import Engine
from emews.optimizers._bayes._space import SpaceMap
from emews.optimizers.bayes import BayesianOptimizer
from emews.optimizers.hyperspace import HyperSpace
from testutil import run_inline

HERE = __file__

#: bench/scale.py's space: a log range, a range, integers and a category
SPACE = Space(
    {
        "lr": Float(1e-5, 1e-1, log=True),
        "dropout": Float(0.0, 0.5),
        "units": Int(8, 512),
        "act": Categorical(["relu", "tanh", "sigmoid"]),
    }
)
#: a small discrete space (21 x 21 x 2 points): exact repeats are likely unless avoided
GRID = Space({"a": Int(0, 20), "b": Int(0, 20), "c": Categorical(["x", "y"])})


def _loss(x: list) -> float:
    return float(np.log10(x[0]) + 3) ** 2 + (x[1] - 0.2) ** 2 + (x[3] != "relu")


def quadratic(params) -> float:
    return _quadratic(params)


def slow_quadratic(params) -> float:
    """``quadratic`` as a task that lasts 0.1 to 1.6 s by its dropout (its duration, not a
    synchronization): results come back spread out, so fits run with points pending."""
    time.sleep(0.1 + 3.0 * params["dropout"])
    return _quadratic(params)


def _quadratic(params) -> float:
    return (math.log10(params["lr"]) + 3) ** 2 + (params["dropout"] - 0.2) ** 2 + (params["act"] != "relu")


def _few_workers(engine: Engine, steps: int = 12) -> list[list]:
    """Four workers' worth of proposals: at most 4 pending, two results back per step."""
    out, pending = [], []
    for _ in range(steps):
        xs = engine.propose(4 - len(pending), pending)
        out += xs
        pending += xs
        done, pending = pending[:2], pending[2:]
        engine.tell(done, [_loss(x) for x in done])
    return out


@pytest.mark.parametrize("estimator", ["GP", "ET"])
def test_few_workers_get_the_same_proposals_as_without_the_bounds(estimator):
    """With 4 points in flight and asked, the bounds never engage: the seeded proposals are the
    ones of an engine with no bounds at all (the code before them), point for point."""
    options = dict(seed=7, base_estimator=estimator, n_initial_points=4, n_candidates=300)
    bounded = Engine(SpaceMap(SPACE), **options)
    unbounded = Engine(SpaceMap(SPACE), **options, max_lies=math.inf, liar_picks=math.inf)
    assert _few_workers(bounded) == _few_workers(unbounded)
    assert bounded.last_work["lies"] <= 4 and bounded.last_work["thompson"] == 0


def _told_engine(space: Space, told: int, seed: int = 0) -> tuple[Engine, random.Random]:
    engine = Engine(SpaceMap(space), seed=seed, n_candidates=500)
    rng = random.Random(seed)
    xs = [engine.map.to_skopt(space.sample(rng)) for _ in range(told)]
    engine.tell(xs, [float(sum(abs(hash(str(v))) % 97 for v in x)) for x in xs])
    engine.n_proposed = told
    return engine, rng


@pytest.mark.parametrize("pending", [10, 200, 3000])
def test_proposal_work_is_bounded_as_the_points_in_flight_grow(pending):
    """Whatever the points in flight and the batch asked, a fit learns at most MAX_LIES of the
    pending points, the GP sees at most the window plus those, the batch is picked from at most
    MAX_BATCH_CANDIDATES candidates, and picks beyond LIAR_PICKS are Thompson samples."""
    engine, rng = _told_engine(SPACE, told=40)
    out = [engine.map.to_skopt(SPACE.sample(rng)) for _ in range(pending)]
    n = 300
    xs = engine.propose(n, out)
    work = engine.last_work
    assert len(xs) == n
    assert work["lies"] == min(pending, _engine.MAX_LIES)
    assert work["fit_points"] == 40 + work["lies"]
    assert work["candidates"] <= _engine.MAX_BATCH_CANDIDATES
    assert work["thompson"] == n - _engine.LIAR_PICKS
    assert all(SPACE.contains(engine.map.from_skopt(x)) for x in xs)


def test_points_in_flight_beyond_the_lies_are_never_proposed_again():
    """In a small discrete space with 400 points out (of 882) and only MAX_LIES of them learned,
    a batch of 200 still holds no pending point and no point twice."""
    engine, rng = _told_engine(GRID, told=30, seed=3)
    pending: list[list] = []
    keys: set[tuple] = set()
    while len(pending) < 400:
        x = engine.map.to_skopt(GRID.sample(rng))
        if tuple(x) not in keys:
            keys.add(tuple(x))
            pending.append(x)
    xs = engine.propose(200, pending)
    assert engine.last_work["lies"] == _engine.MAX_LIES
    proposed = [tuple(x) for x in xs]
    assert len(set(proposed)) == len(proposed)
    assert not set(proposed) & {tuple(x) for x in pending}


class _Recorded(BayesianOptimizer):
    """bayes with the model in this process, every point from the engine (no speculation: no
    runners-up) and a record of every proposal's work; the lie bound lowered to 8 so that 30
    threads of workers reach it."""

    def __init__(self, **kwargs):
        super().__init__(model_process=False, speculate=False, **kwargs)
        self.work: list[dict[str, int]] = []

    def start(self, space, workers):
        super().start(space, workers)
        engine = self.engine
        engine.max_lies = 8
        propose = engine.propose

        def recorded(n, pending=()):
            before = {"told": engine.n_told, "pending": len(pending), "proposed": engine.n_proposed}
            out = propose(n, pending)
            if engine.last_work:
                self.work.append(dict(engine.last_work, **before))
            return out

        engine.propose = recorded


def test_bayes_learns_every_result_while_the_lies_are_bounded():
    """30 workers, 120 evaluations, at most 8 lies per fit, fits with more points pending than
    they learned as lies: at every model proposal, each point proposed so far was either told
    to the model with its result or passed as pending (no result lost to the bound)."""
    summary, opt = run_inline(lambda: _Recorded(seed=0, n_initial_points=5, n_candidates=300), space=SPACE,
                              objective=ObjectiveRef(HERE, "slow_quadratic"), budget=120, workers=30)
    assert summary.completed == 120
    assert opt.stats["runners_up"] == opt.stats["random_fillers"] == 0  # every point is the engine's
    assert opt.work and max(w["lies"] for w in opt.work) <= 8
    assert any(w["pending"] > w["lies"] for w in opt.work)
    assert all(w["told"] + w["pending"] == w["proposed"] for w in opt.work), opt.work
    assert opt.work[-1]["told"] >= 120 - 30  # results of the last wave need no further proposal


def _result(i: int, params: dict) -> Result:
    loss = _quadratic(params)
    return Result(id=i, params=params, status=Status.OK, objective=loss, loss=loss)


def test_hyperspace_shares_a_wide_batch_among_its_subspaces_and_learns_every_result():
    """512 workers (8 subspaces): the first wave of 512 is 64 from each subspace, later batches
    of 64 come from one subspace in turn; with the lie bound lowered to 8, each fit learns at
    most 8 of its subspace's pending points while more are out, and every result reaches every
    subspace that contains it."""
    opt = HyperSpace(seed=0, n_candidates=100, n_initial_points=2, output_warp=False)
    opt.start(SPACE, 512)
    assert len(opt.subspaces) == 8
    for sub in opt.subspaces:
        sub.engine.max_lies = 8
    ids = iter(range(10**6))
    points = opt.suggest(512)
    opt.submitted([next(ids) for _ in points], points)
    assert [sub.engine.n_proposed for sub in opt.subspaces] == [64] * 8
    pending = dict(opt.task_points)
    told, lies = 0, []
    for _ in range(3):  # the newest third of what is out comes back, the rest stays pending
        back = sorted(pending)[-(len(pending) // 3) :]
        opt.ingest([_result(i, pending.pop(i)) for i in back])
        told += len(back)
        proposed = [sub.engine.n_proposed for sub in opt.subspaces]
        points = opt.suggest(64)
        grew = [sub.engine.n_proposed - before for sub, before in zip(opt.subspaces, proposed, strict=True)]
        assert sorted(grew) == [0] * 7 + [64]  # one subspace, one fit
        new = [next(ids) for _ in points]
        opt.submitted(new, points)
        pending.update(zip(new, points, strict=True))
        lies += [sub.engine.last_work.get("lies", 0) for sub in opt.subspaces]
    assert max(lies) == 8  # bounded, and reached: more than 8 were pending in a subspace
    # every result told to every subspace containing it: the sum counts the overlaps
    assert all(sub.results == sub.engine.n_told for sub in opt.subspaces)
    assert sum(sub.results for sub in opt.subspaces) >= told
    assert all(sub.results == sum(sub.space.contains(p) for p in _told_points(opt, pending)) for sub in opt.subspaces)


def _told_points(opt: HyperSpace, pending: dict) -> list:
    return [p for i, p in opt.task_points.items() if i not in pending]


def test_hyperspace_few_workers_keep_one_subspace_per_batch():
    """4 workers (4 subspaces): a batch of up to 4 comes from the one subspace whose turn it
    is, as before."""
    opt = HyperSpace(seed=0, n_candidates=200)
    opt.start(SPACE, 4)
    points = opt.suggest(4)
    assert [sub.engine.n_proposed for sub in opt.subspaces] == [4, 0, 0, 0]
    assert all(opt.subspaces[0].space.contains(p) for p in points)


@pytest.mark.parametrize("wide, speculates", [(False, False), (True, True)])
def test_a_wide_run_keeps_a_reserve_even_when_fits_are_shorter_than_tasks(wide, speculates):
    """bayes's defaults: a fit of 0.1 s next to tasks of 60 s speculates (keeps proposals in
    stock) only in a wide run (more than bayes.WIDE workers); a run of a few workers waits."""
    from emews.optimizers._bayes._proposer import Proposer

    engine = Engine(SpaceMap(SPACE), seed=0)
    proposer = Proposer(engine, max_ahead=400, min_cycle=5.0, longer_than_tasks=True, wide=wide)
    proposer._cycles.append(0.1)  # the last fit, as the model thread records it
    proposer._durations.extend([60.0] * 5)  # the tasks, submission to result
    assert proposer.speculating is speculates


def test_the_reserve_of_a_wide_run_is_sized_for_its_workers_not_for_the_results_told():
    """The stock of proposals: the results a fit's time frees (x2), capped by a quarter of the
    results told for a few workers; a wide run keeps 1/64 of its workers at least and may keep
    up to 1/8 of them right after its random first wave, when few results were told."""
    from emews.optimizers._bayes._proposer import reserve_size

    few = dict(safety=2.0, most=400, staleness=0.25)
    assert reserve_size(10.0, 3.0, told=1000, **few) == 60  # 10/s x 3 s x 2
    assert reserve_size(10.0, 3.0, told=100, **few) == 25  # a quarter of the told
    assert reserve_size(0.0, 3.0, told=100, **few) == 0
    wide = dict(safety=2.0, most=40_000, staleness=0.25, workers=10_000)
    assert reserve_size(167.0, 3.0, told=100, **wide) == 1002  # not 25: the workers' 1/8 caps
    assert reserve_size(167.0, 30.0, told=100, **wide) == 1250  # 1/8 of the workers
    assert reserve_size(167.0, 30.0, told=8000, **wide) == 2000  # a quarter of the told
    assert reserve_size(1.0, 0.5, told=10, **wide) == 156  # at least 1/64 of the workers
    assert reserve_size(167.0, 3.0, told=100, **{**wide, "most": 500}) == 500


@pytest.mark.parametrize("workers, growth", [(4, 0.1), (128, 0.1), (129, 1.0)])
def test_a_wide_bayes_run_reoptimizes_its_kernel_once_the_results_doubled(monkeypatch, workers, growth):
    """Above bayes.WIDE workers the GP kernel is re-optimized at each doubling of the results
    (at the default 10% nearly every fit was one at 10,000 workers); a few workers keep 10%."""
    from emews.optimizers import bayes

    seen: dict[str, object] = {}

    def stop(evaluator, proposer, refill, **kwargs):
        seen["growth"] = proposer.engine.hyperfit_growth
        seen["workers"] = proposer.workers

    monkeypatch.setattr(bayes, "serve", stop)

    class Evaluator:
        seed, space, history, earlier_points = 1, SPACE, (), 0

    Evaluator.workers = workers
    bayes.BayesianOptimizer(seed=1).run(Evaluator())
    assert seen["growth"] == growth
    assert seen["workers"] == (workers if workers > bayes.WIDE else 0)
