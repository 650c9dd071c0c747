"""hyperspace at width (issue 27 item 3): above ``hyperspace.WIDE`` workers its subspaces
propose in a model thread (``optimizers._bayes._subspaces.Subspaces`` behind the bayes
``Proposer``). Every result reaches every subspace that contains it, a batch is one fit of one
subspace, a subspace's pending points are those in flight inside it, and only the first
subspace to fit optimizes a kernel from scratch. Work is counted (fits, hyperfits, points told,
pending points learned as lies), never timed.
"""

from __future__ import annotations

import json
import math
import os
import random

import pytest

from emews.core.space import Categorical, Float, Int, Space
from emews.objective.function import ObjectiveRef
from emews.optimizers import hyperspace as hyperspace_module
from emews.optimizers._bayes import _engine
from emews.optimizers._bayes._engine import Engine
from emews.optimizers._bayes._space import SpaceMap
from emews.optimizers._bayes._subspaces import Subspaces
from emews.optimizers.hyperspace import HyperSpace
from testutil import run_inline

HERE = __file__

SPACE = Space(
    {
        "lr": Float(1e-5, 1e-1, log=True),
        "dropout": Float(0.0, 0.5),
        "units": Int(8, 512),
        "act": Categorical(["relu", "tanh", "sigmoid"]),
    }
)


def recorded_quadratic(params) -> float:
    """``quadratic``, each point written as a line of JSON to the file $HYPERSPACE_WIDTH_LOG (the
    objective module is loaded anew by the run: a list here would not see its calls)."""
    with open(os.environ["HYPERSPACE_WIDTH_LOG"], "a") as out:
        out.write(json.dumps(params) + "\n")
    return quadratic(params)


def quadratic(params) -> float:
    return (math.log10(params["lr"]) + 3) ** 2 + (params["dropout"] - 0.2) ** 2 + (params["act"] != "relu")


def _subspaces(workers: int = 512, **options) -> tuple[HyperSpace, Subspaces, SpaceMap]:
    opt = HyperSpace(seed=0, n_candidates=100, n_initial_points=2, **options)
    opt.start(SPACE, workers)
    full = SpaceMap(SPACE)
    model = Subspaces([s.engine for s in opt.subspaces], [s.bounds for s in opt.subspaces], full)
    return opt, model, full


def test_every_result_reaches_every_subspace_that_contains_it_and_a_batch_is_one_fit():
    opt, model, full = _subspaces(output_warp=False)
    assert len(opt.subspaces) == 8
    wave = model.propose(512, [])
    assert [sub.engine.n_proposed for sub in opt.subspaces] == [64] * 8  # the first wave, shared
    rng = random.Random(1)
    points = [SPACE.sample(rng) for _ in range(300)]
    model.tell([full.to_skopt(p) for p in points], [quadratic(p) for p in points])
    for sub in opt.subspaces:
        assert sub.engine.n_told == sum(sub.space.contains(p) for p in points)
    assert model.n_told == 300
    pending = wave[:400]
    for _ in range(3):
        proposed = [sub.engine.n_proposed for sub in opt.subspaces]
        fits = model.fits
        xs = model.propose(40, pending)
        assert len(xs) == 40 and model.fits == fits + 1
        grew = [sub.engine.n_proposed - before for sub, before in zip(opt.subspaces, proposed, strict=True)]
        assert sorted(grew) == [0] * 7 + [40]
        k = grew.index(40)
        inside = sum(opt.subspaces[k].space.contains(full.from_skopt(x)) for x in pending)
        assert opt.subspaces[k].engine.last_work["lies"] == min(inside, _engine.MAX_LIES)
        assert all(opt.subspaces[k].space.contains(full.from_skopt(x)) for x in xs)
        pending = pending + xs
    fits = model.fits
    assert len(model.propose(600, pending)) == 600 and model.fits == fits + 1  # a large batch after the wave: one fit


def test_the_subspaces_share_one_kernel_reoptimized_as_the_results_grow():
    """Only the first subspace to fit optimizes a kernel; the others take it, until the results
    told to all of them grew by ``hyperfit_growth``: then the next subspace due optimizes one,
    which the others take in turn."""
    opt, model, full = _subspaces(output_warp=False)
    model.propose(512, [])
    rng = random.Random(2)
    points = [SPACE.sample(rng) for _ in range(200)]
    model.tell([full.to_skopt(p) for p in points], [quadratic(p) for p in points])
    for _ in range(8):
        model.propose(10, [])
    assert model.fits == 8 and model.hyperfits == 1
    more = [SPACE.sample(rng) for _ in range(400)]  # 200 -> 600 told: grown by more than 10%
    model.tell([full.to_skopt(p) for p in more], [quadratic(p) for p in more])
    for _ in range(8):
        model.propose(10, [])
    assert model.fits == 16 and model.hyperfits == 2
    kernels = {repr(sub.engine._kernel) for sub in opt.subspaces}
    assert len(kernels) == 1


def test_a_random_wave_of_thousands_is_one_draw_and_a_few_workers_draws_are_as_before():
    """In a wide run (more than 128 workers) a random wave of more than LIAR_PICKS points is one
    draw; otherwise, whatever the wave's size, one point at a time as seeded before (the same
    points as an engine drawing every point alone: 100 workers propose what they did)."""
    for n in (4, 100):
        few, alone = Engine(SpaceMap(SPACE), seed=3, n_initial_points=n), Engine(SpaceMap(SPACE), seed=3)
        assert few.propose(n) == [x for _ in range(n) for x in alone.propose(1)]
    wide = Engine(SpaceMap(SPACE), seed=3)
    wide.wide_wave = True
    wave = wide.propose(5000)
    assert len(wave) == 5000 and len({tuple(x) for x in wave}) == 5000
    assert all(SPACE.contains(SpaceMap(SPACE).from_skopt(x)) for x in wave[:200])


def test_a_wide_run_proposes_in_the_model_thread_and_learns_every_result(monkeypatch, tmp_path):
    """More workers than hyperspace.WIDE (lowered to 8 here so that 12 threads of workers are a
    wide run): the run goes through the model thread, spends its budget, and each subspace
    counted exactly the results whose points it contains; every result was handed to the model
    thread, which learns it at its next fit (none is needed after the budget is spent)."""
    monkeypatch.setattr(hyperspace_module, "WIDE", 8)
    # the model stays in this process: once it moves to a model process (a cycle past 0.25 s,
    # likely under load) the counters read below are the parent's copies, frozen at the handover
    monkeypatch.setattr(hyperspace_module, "PROCESS_AFTER", math.inf)
    log = tmp_path / "evaluated.jsonl"
    monkeypatch.setenv("HYPERSPACE_WIDTH_LOG", str(log))
    summary, opt = run_inline(lambda: HyperSpace(seed=0, n_candidates=100, n_initial_points=2, output_warp=False),
                              space=SPACE, objective=ObjectiveRef(HERE, "recorded_quadratic"), budget=80, workers=12)
    assert summary.completed == 80
    assert opt.stats["proposed"] == 80 and opt.stats["fits"] >= 1
    evaluated = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(evaluated) == 80
    assert [sub.results for sub in opt.subspaces] == [
        sum(sub.space.contains(p) for p in evaluated) for sub in opt.subspaces
    ]
    # every result reached the model thread; it learned them up to its last fit (how many came
    # back after that depends on the machine's load: not asserted)
    assert opt.stats["results_told"] == 80 and 1 <= opt.model.n_told <= 80


@pytest.mark.parametrize("workers", [128, 129, 10_000])
def test_a_wide_run_sizes_its_stock_for_its_workers_by_the_bayes_rule(monkeypatch, workers):
    """Above hyperspace.WIDE workers the model thread's stock of proposals is sized for the
    workers by bayes' rule (``_proposer.reserve_size``: the Proposer is told the workers and keeps
    the longest of its last WIDE_CYCLES fits); at most 128 workers the run is the synchronous
    loop, with no model thread (seeded proposals as before)."""
    from emews.core.optimizer import AskTellOptimizer
    from emews.optimizers._bayes._proposer import WIDE_CYCLES

    seen: dict[str, object] = {}

    def stop(evaluator, proposer, refill, **kwargs):
        seen["workers"], seen["cycles"] = proposer.workers, proposer._cycles.maxlen

    monkeypatch.setattr(hyperspace_module, "serve", stop)
    monkeypatch.setattr(hyperspace_module, "PROCESS_AFTER", math.inf)  # no model process to start
    monkeypatch.setattr(AskTellOptimizer, "run", lambda self, evaluator: seen.setdefault("synchronous", True))

    class Evaluator:
        seed, space, history, budget, exp_dir, earlier_points = 1, SPACE, (), 100, None, 0

    Evaluator.workers = workers
    HyperSpace(seed=1).run(Evaluator())
    if workers > hyperspace_module.WIDE:
        assert seen == {"workers": workers, "cycles": WIDE_CYCLES}
    else:
        assert seen == {"synchronous": True}
