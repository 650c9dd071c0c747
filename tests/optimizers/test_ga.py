"""The DEAP genetic algorithm: operators, failure policies, strategies, budget, determinism, output."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from emews.core.evaluator import Evaluator
from emews.core.optimizer import Optimizer
from emews.optimizers._ga.failure_policy import FailurePolicy
from emews.optimizers._ga.individual import Individual
from emews.optimizers._ga.operators import Mutator, cx_uniform, mutate_value, mutation_sigma
from emews.optimizers.ga import GeneticAlgorithm
from emews.optimizers.random import RandomSearch
from emews.core.results import Result, Status
from emews.job.wiring import RunSpec, run_in_threads
from emews.objective.function import ObjectiveRef
from emews.core.space import INT_RANGE, Categorical, Constant, Float, Int, Ordered, Space
from emews.core.candle_space import candle_dimension
from emews.testing import FLAKY, mixed_space, run_traced

ROOT = Path(__file__).resolve().parents[2]
ACKLEY = ObjectiveRef("emews.objectives.ackley", "run")
ACKLEY_SPACE = Space({f"x{i}": Float(-32.768, 32.768, sigma=3.0) for i in range(1, 5)})


def ga_run(budget: int = 48, workers: int = 3, seed: int = 0, space: Space = ACKLEY_SPACE,
           objective: ObjectiveRef = ACKLEY, **options: Any):
    """Run a GA through the real runtime; return the trace (points, results, optimizer, summary)."""
    trace = run_traced(lambda s: GeneticAlgorithm(seed=s, **options), seed=seed, budget=budget,
                       workers=workers, space=space, objective=objective)
    assert trace.summary is not None and trace.summary.error is None, trace.summary
    return trace


# --------------------------------------------------------------------------- mutation and crossover

@st.composite
def dimension_and_value(draw: Any):
    kind = draw(st.sampled_from(["int", "float", "categorical", "ordered", "constant"]))
    if kind in ("int", "float"):
        log = draw(st.booleans())
        sigma = draw(st.one_of(st.none(), st.floats(0.0, 1e3)))
        if kind == "int":
            lower = draw(st.integers(1 if log else -10_000, 10_000))
            dim: Any = Int(lower, lower + draw(st.integers(0, 100_000)), log=log, sigma=sigma)
        else:
            lower = draw(st.floats(1e-6, 1e3) if log else st.floats(-1e6, 1e6))
            dim = Float(lower, lower + draw(st.floats(0.0, 1e6)), log=log, sigma=sigma)
    elif kind == "constant":
        dim = Constant(draw(st.one_of(st.integers(*INT_RANGE), st.text(max_size=4), st.booleans())))
    else:
        values = draw(st.lists(st.one_of(st.integers(-50, 50), st.text(max_size=3), st.booleans()),
                               min_size=1, max_size=6, unique_by=repr))
        dim = (Categorical if kind == "categorical" else Ordered)(tuple(values))
    value = dim.from_unit(draw(st.floats(0.0, 1.0)))
    return dim, value


@settings(max_examples=300, deadline=None)
@given(dimension_and_value(), st.integers(0, 2**32))
def test_mutation_stays_in_the_dimension_and_keeps_its_type(dv: Any, seed: int) -> None:
    dim, value = dv
    new = mutate_value(dim, value, random.Random(seed))
    assert dim.contains(new), (dim, value, new)
    if isinstance(dim, Int):
        assert type(new) is int
    elif isinstance(dim, Float):
        assert type(new) is float
    elif isinstance(dim, Constant):
        assert new == dim.value
    elif isinstance(dim, Ordered):
        if len(dim.values) > 1:
            assert abs(dim.index(new) - dim.index(value)) == 1
    elif len(dim.values) > 1:  # categorical: always a different value
        assert dim.index(new) != dim.index(value)


def test_float_mutation_uses_sigma() -> None:
    rng = random.Random(0)
    narrow = Float(-100.0, 100.0, sigma=0.5)
    steps = [mutate_value(narrow, 0.0, rng) for _ in range(2000)]
    assert 0.4 < statistics.pstdev(steps) < 0.6
    assert mutation_sigma(Float(0.0, 10.0)) == pytest.approx(1.0)  # default: 10% of the range
    assert mutation_sigma(Int(0, 3)) == 1.0                        # ints step by at least 1
    assert mutation_sigma(Float(1e-5, 1e-1, log=True)) == pytest.approx(0.4)  # decades


def test_mutation_clips_at_the_bounds() -> None:
    rng = random.Random(1)
    dim = Int(0, 10, sigma=100.0)
    values = {mutate_value(dim, 5, rng) for _ in range(200)}
    assert values <= set(range(11)) and {0, 10} <= values


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32))
def test_mutator_and_crossover_keep_points_valid_and_constants_fixed(seed: int) -> None:
    space = mixed_space()
    rng = random.Random(seed)
    mutate = Mutator(space, indpb=1.0, rng=rng)
    a, b = Individual(space.sample(rng)), Individual(space.sample(rng))
    pa, pb = dict(a), dict(b)
    cx_uniform(a, b, 0.5, list(space.free), rng)
    for name in space:
        assert {repr(a[name]), repr(b[name])} == {repr(pa[name]), repr(pb[name])}
    for ind in (a, b):
        mutate(ind)
        assert space.contains(ind)
        assert ind["optimizer"] == "adam"


# --------------------------------------------------------------------------- failure policies

def _result(i: int, loss: float | None) -> Result:
    ok = loss is not None
    return Result(i, {"x": i}, Status.OK if ok else Status.FAILED, loss, loss if ok else math.inf)


@pytest.mark.parametrize("kind, expected", [("penalty", 99.0), ("worst", 9.0), ("mean", 2.5)])
def test_failure_policies(kind: str, expected: float) -> None:
    policy = FailurePolicy(kind, penalty=99.0)
    first = [Individual(x=0)]
    policy.assign(first, [_result(0, 9.0)])
    inds = [Individual(x=i) for i in range(3)]
    policy.assign(inds, [_result(1, 2.0), _result(2, None), _result(3, 3.0)])
    assert [i.loss for i in inds] == [2.0, expected, 3.0]
    assert not inds[1].ok and inds[0].ok


def test_worst_and_mean_fall_back_to_the_penalty_before_any_success() -> None:
    for kind in ("worst", "mean"):
        ind = Individual(x=1)
        FailurePolicy(kind, penalty=7.0).assign([ind], [_result(0, None)])
        assert ind.loss == 7.0


@pytest.mark.parametrize("strategy", ["simple", "mu_plus_lambda", "async"])
@pytest.mark.parametrize("failure", ["penalty", "worst", "mean"])
def test_runs_through_failures(strategy: str, failure: str) -> None:
    trace = ga_run(budget=30, space=mixed_space(), objective=FLAKY, strategy=strategy, failure=failure,
                   population=6, penalty=1e6, cxpb=0.5, mutpb=0.5)
    ga = trace.optimizer
    assert len(trace.points) == 30 and trace.summary.failed > 0
    assert all(ind.fitness.valid for ind in ga.population)
    assert all(ind.ok for ind in ga.hall_of_fame)  # failures never enter the hall of fame
    failed = [ind for ind in ga.population if not ind.ok]
    if failure == "penalty":
        assert all(ind.loss == 1e6 for ind in failed)
    else:
        assert all(ind.loss < 1e6 for ind in failed)


# --------------------------------------------------------------------------- search quality

# one worker makes ``async`` deterministic too (the synchronous strategies are, on any number)
@pytest.mark.parametrize("strategy, workers", [("simple", 4), ("async", 1)])
def test_beats_random_search_on_ackley(strategy: str, workers: int) -> None:
    def best(make: Any, seed: int) -> float:
        trace = run_traced(make, seed=seed, budget=160, workers=workers, space=ACKLEY_SPACE, objective=ACKLEY)
        return trace.summary.best.loss

    seeds = range(5)
    ga = statistics.median(best(lambda s: GeneticAlgorithm(population=16, seed=s, strategy=strategy), s)
                           for s in seeds)
    rs = statistics.median(best(lambda s: RandomSearch(seed=s), s) for s in seeds)
    assert ga < 0.75 * rs, (ga, rs)


# --------------------------------------------------------------------------- budget and generations

@pytest.mark.parametrize("strategy", ["simple", "mu_plus_lambda"])
def test_last_generation_is_truncated_to_the_budget(strategy: str) -> None:
    trace = ga_run(budget=20, strategy=strategy, population=8, cxpb=0.5, mutpb=0.5)
    assert len(trace.points) == 20
    assert len(trace.optimizer.population) == 8


def test_budget_smaller_than_the_population() -> None:
    trace = ga_run(budget=5, population=8)
    assert len(trace.points) == 5 and len(trace.optimizer.population) == 5


def test_generations_bound_the_run() -> None:
    trace = ga_run(budget=100, population=4, generations=2, cxpb=1.0, mutpb=1.0)
    assert len(trace.points) == 4 * 3  # the initial population and two generations
    assert [row["gen"] for row in trace.optimizer.logbook] == [0, 1, 2]
    trace = ga_run(budget=100, population=4, generations=2, strategy="async")
    assert len(trace.points) == 4 * 3


def test_each_generation_is_one_batch() -> None:
    class CountMaps(Optimizer):
        def __init__(self) -> None:
            self.inner = GeneticAlgorithm(population=6, generations=3, seed=0, cxpb=1.0, mutpb=1.0)
            self.batches: list[int] = []

        def run(self, evaluator: Evaluator) -> None:
            original = evaluator.map
            evaluator.map = lambda points: (self.batches.append(len(points)), original(points))[1]
            self.inner.run(evaluator)

    trace = run_traced(lambda s: CountMaps(), budget=100, space=ACKLEY_SPACE, objective=ACKLEY)
    assert trace.optimizer.batches == [6, 6, 6, 6]


# --------------------------------------------------------------------------- determinism

@pytest.mark.parametrize("strategy, workers", [("simple", 3), ("mu_plus_lambda", 3), ("async", 1)])
def test_deterministic_under_seed(strategy: str, workers: int) -> None:
    runs = [ga_run(budget=30, workers=workers, seed=seed, strategy=strategy, population=6)
            for seed in (3, 3, 4)]
    assert runs[0].points == runs[1].points
    assert [dict(i) for i in runs[0].optimizer.hall_of_fame] == [dict(i) for i in runs[1].optimizer.hall_of_fame]
    assert runs[0].points != runs[2].points


def test_seed_option_overrides_the_run_seed() -> None:
    a = run_traced(lambda s: GeneticAlgorithm(seed=11), seed=1, budget=10, space=ACKLEY_SPACE, objective=ACKLEY)
    b = run_traced(lambda s: GeneticAlgorithm(seed=11), seed=2, budget=10, space=ACKLEY_SPACE, objective=ACKLEY)
    assert a.points == b.points


# --------------------------------------------------------------------------- async keeps workers busy

SLEEPY = '''
import json, time, zlib
import emews
from testutil import EVENTS

def run(params):
    task = emews.current_task().task_id
    slow = zlib.crc32(json.dumps(params, sort_keys=True).encode()) % 6 == 0
    if slow:
        EVENTS.record("straggler", task)
    EVENTS.record("start", task)
    time.sleep(0.3 if slow else 0.006)
    EVENTS.record("end", task)
    return sum(v * v for v in params.values())
'''


def _ran_beside_stragglers(submitted: dict[int, int], events: Any) -> list[int]:
    """Tasks submitted after a straggler started that finished before it ended."""
    starts, ends = events.seqs("start"), events.seqs("end")
    return [task for task, mark in submitted.items() for slow in events.seqs("straggler")
            if starts[slow] < mark and ends.get(task, math.inf) < ends[slow]]


def test_async_keeps_every_worker_busy(tmp_path: Path, events: Any) -> None:
    """Async: whenever the GA waits while budget is left, every worker has an evaluation, and
    while a straggler runs, new offspring are submitted and finish beside it. A synchronous
    generation submits nothing until its straggler is back."""
    objective = tmp_path / "sleepy.py"
    objective.write_text(SLEEPY)
    ref = ObjectiveRef(str(objective))
    space = Space({"a": Float(-1.0, 1.0), "b": Float(-1.0, 1.0)})
    waits: list[tuple[int, int]] = []
    submitted: dict[int, int] = {}   # task id -> event number just before it was submitted

    class Probe(Optimizer):
        def __init__(self, strategy: str) -> None:
            self.inner = GeneticAlgorithm(population=8, seed=0, strategy=strategy)

        def run(self, evaluator: Evaluator) -> None:
            get, put, map_ = evaluator.get, evaluator.put, evaluator.map

            def probed_get(n: int = 1, timeout: float | None = None, **more: Any) -> list[Result]:
                waits.append((evaluator.pending, evaluator.remaining))
                return get(n, timeout, **more)

            def probed_put(points: Any) -> list[int]:
                mark = events.record("submit")
                ids = put(points)
                submitted.update(dict.fromkeys(ids, mark))
                return ids

            def probed_map(points: Any) -> list[Result]:
                mark = events.record("submit")
                results = map_(points)
                submitted.update(dict.fromkeys((r.id for r in results), mark))
                return results

            evaluator.get, evaluator.put, evaluator.map = probed_get, probed_put, probed_map
            self.inner.run(evaluator)

    workers = 4
    run_traced(lambda s: Probe("async"), budget=64, workers=workers, space=space, objective=ref)
    assert waits and all(pending == workers for pending, remaining in waits if remaining > 0)
    assert events.seqs("straggler") and _ran_beside_stragglers(submitted, events)
    events.clear()
    submitted.clear()
    run_traced(lambda s: Probe("simple"), budget=64, workers=workers, space=space, objective=ref)
    assert events.seqs("straggler") and _ran_beside_stragglers(submitted, events) == []


# --------------------------------------------------------------------------- output and options

def test_population_and_hall_of_fame_saved_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = run_traced(lambda s: GeneticAlgorithm(seed=s, population=6, hall_of_fame=3), budget=24,
                       space=mixed_space(), objective=FLAKY, exp_dir=tmp_path)
    population = json.loads((tmp_path / "ga_population.json").read_text())
    hof = json.loads((tmp_path / "ga_hall_of_fame.json").read_text())
    assert len(population) == 6 and len(hof) == 3
    assert [h["params"] for h in hof] == [dict(i) for i in trace.optimizer.hall_of_fame]
    assert [h["loss"] for h in hof] == sorted(h["loss"] for h in hof)
    assert all(h["status"] == "ok" for h in hof)
    assert trace.optimizer.best.loss == hof[0]["loss"] == trace.summary.best.loss


def test_nothing_saved_without_an_experiment_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMEWS_EXP_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    ga_run(budget=8, population=4)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("options, message", [
    ({"strategy": "nsga"}, "strategy: unknown strategy 'nsga'; allowed: simple, mu_plus_lambda, async"),
    ({"population": 1}, "population: must be an integer >= 2"),
    ({"cxpb": 1.5}, r"cxpb: must be a probability in \[0, 1\]"),
    ({"failure": "ignore"}, "failure: unknown policy 'ignore'"),
    ({"strategy": "mu_plus_lambda", "cxpb": 0.7, "mutpb": 0.6}, "cxpb \\+ mutpb must be at most 1"),
    ({"replacement": "random"}, "replacement: unknown 'random'"),
    ({"penalty": "big"}, "penalty: must be a number, got 'big'"),
])
def test_bad_options_are_named(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GeneticAlgorithm(**options)


def test_numbers_written_as_yaml_strings_are_accepted() -> None:
    options = yaml.safe_load("{penalty: 1e6, mutpb: 5e-1}")  # PyYAML reads both as strings
    assert GeneticAlgorithm(**options).options.penalty == 1e6
    assert GeneticAlgorithm(**options).options.mutpb == 0.5


def test_registry_name_resolves() -> None:
    from emews.config.plugins import OPTIMIZERS
    assert OPTIMIZERS.resolve("ga") is GeneticAlgorithm


def test_workflow_file_runs() -> None:
    workflow = yaml.safe_load((ROOT / "workflows" / "ga.yaml").read_text())
    assert workflow["optimizer"]["name"] == "ga"
    space = Space({name: candle_dimension(dict(entry, name=name)) for name, entry in workflow["space"].items()})
    holder: dict[str, GeneticAlgorithm] = {}

    def make() -> GeneticAlgorithm:
        holder["ga"] = GeneticAlgorithm(**workflow["optimizer"]["options"])
        return holder["ga"]

    objective = workflow["objective"]
    spec = RunSpec(space=space, make_optimizer=make, budget=workflow["budget"]["evaluations"],
                   objective=ObjectiveRef(str(ROOT / objective["module"]), objective["function"],
                                          objective["metric"]),
                   direction=objective["direction"], isolation="inline", show_progress=False)
    summary = run_in_threads(spec, workers=4)
    assert summary.error is None and summary.completed <= 96
    assert len(holder["ga"].population) == 16 and holder["ga"].best.loss == summary.best.loss


# --------------------------------------------------------------------------- defaults (issue 14)

def test_elitism_keeps_the_best_of_each_generation() -> None:
    """With ``elitism`` (default 1) the best individual found so far is in the final population
    of ``simple``, however wild the mutation of the last generation (without it, here, it is lost)."""
    wild = Space({f"x{i}": Float(-32.768, 32.768, sigma=30.0) for i in range(1, 5)})
    kept = {}
    for elitism in (1, 0):
        kept[elitism] = [min(ind.loss for ind in trace.optimizer.population) == trace.summary.best.loss
                         for seed in range(4)
                         for trace in [ga_run(budget=80, seed=seed, space=wild, population=8, cxpb=1.0,
                                              mutpb=1.0, indpb=1.0, elitism=elitism)]]
    assert all(kept[1]), kept
    assert not all(kept[0]), kept


@settings(max_examples=50)
@given(budget=st.integers(1, 10_000), workers=st.integers(1, 512))
def test_default_population_and_strategy_follow_budget_and_workers(budget: int, workers: int) -> None:
    from emews.optimizers._ga.options import STEADY_STATE_WORKERS, GAOptions
    opts = GAOptions().resolved(budget, workers)
    assert 8 <= opts.population < 100 + workers
    if workers > 1 and opts.population >= workers:
        assert opts.population % workers == 0
    assert opts.strategy == ("async" if workers >= STEADY_STATE_WORKERS else "simple")
    assert opts.mu == opts.lambda_ == opts.population
    assert 0 <= opts.elitism < opts.population
    # what a user sets is kept
    assert GAOptions(population=6, strategy="mu_plus_lambda").resolved(budget, workers).population == 6
    assert GAOptions(strategy="simple").resolved(budget, workers).strategy == "simple"


def test_many_workers_run_steady_state_by_default() -> None:
    many = ga_run(budget=24, workers=8)
    few = ga_run(budget=24, workers=2)
    assert (many.optimizer.resolved.strategy, few.optimizer.resolved.strategy) == ("async", "simple")
    assert len(many.points) == len(few.points) == 24


@settings(max_examples=100)
@given(spent=st.integers(0, 1000), extra=st.integers(1, 1000), decay=st.floats(0.01, 1.0))
def test_sigma_decays_with_the_budget_spent(spent: int, extra: int, decay: float) -> None:
    from emews.optimizers._ga.engine import sigma_scale
    from emews.optimizers._ga.operators import scaled_step
    from emews.optimizers._ga.options import GAOptions

    class Spent:
        submitted, remaining = spent, extra

    scale = sigma_scale(GAOptions(sigma_decay=decay), Spent())
    assert scale == pytest.approx(decay ** (spent / (spent + extra)))
    assert decay - 1e-12 <= scale <= 1.0
    dim = Float(-10.0, 10.0, sigma=2.0)
    assert scaled_step(dim, scale).mutation_sigma() == pytest.approx(2.0 * scale)
    assert scaled_step(Int(0, 5), 0.01).mutation_sigma() == 1.0          # linear ints: at least 1
    assert scaled_step(Categorical(("a", "b")), 0.5) == Categorical(("a", "b"))


def _bred(parent_loss: float, child_loss: float) -> Individual:
    """A scored child of a parent that scored ``parent_loss``."""
    child = Individual({"x": 0.0})
    child.fitness.values = (parent_loss,)
    child.bred()
    child.fitness.values = (child_loss,)
    return child


@settings(max_examples=60)
@given(successes=st.integers(0, 20), failures=st.integers(0, 20))
def test_the_step_grows_when_more_than_a_fifth_of_the_children_improve_and_shrinks_when_fewer(
        successes: int, failures: int) -> None:
    from emews.optimizers._ga.step import MAX_SCALE, MIN_SCALE, StepAdaptation

    step = StepAdaptation()
    step.observe([_bred(1.0, 2.0)] * 4)  # no child improved: the step shrinks below sigma
    step.adapt()
    start = step.scale
    assert MIN_SCALE <= start < MAX_SCALE == 1.0
    step.observe([_bred(1.0, 0.5)] * successes + [_bred(1.0, 2.0)] * failures)
    step.observe([Individual({"x": 1.0})])  # not bred (a random or initial point): not counted
    step.adapt()
    children = successes + failures
    if children == 0 or 5 * successes == children:
        assert step.scale == pytest.approx(start)
    elif 5 * successes > children:
        assert start < step.scale <= MAX_SCALE
    else:
        assert MIN_SCALE <= step.scale < start
    again = step.scale
    step.adapt()  # nothing observed since: no change
    assert step.scale == again


def test_the_step_never_exceeds_sigma() -> None:
    from emews.optimizers._ga.step import StepAdaptation

    step = StepAdaptation()
    for _ in range(5):
        step.observe([_bred(1.0, 0.5)] * 10)  # every child improves
        step.adapt()
    assert step.history == [1.0] * 5


def test_candles_fixed_sigma_does_not_adapt() -> None:
    from emews.optimizers._ga.step import StepAdaptation

    step = StepAdaptation(enabled=False)
    step.observe([_bred(1.0, 0.5)] * 10)
    step.adapt()
    assert step.scale == 1.0


@pytest.mark.parametrize("strategy,workers", [("simple", 2), ("async", 8)])
def test_near_an_optimum_the_mutation_step_shrinks_and_candle_settings_keep_it(strategy: str, workers: int) -> None:
    branin = Space({"x1": Float(-5.0, 10.0), "x2": Float(0.0, 15.0)})
    objective = ObjectiveRef("emews.objectives.benchmarks", "branin")
    # screen 1: every child as bred, so that the success rate is the operators' (screening picks likely winners)
    adapted = ga_run(budget=160, workers=workers, space=branin, objective=objective, strategy=strategy, population=8,
                     screen=1)
    fixed = ga_run(budget=160, workers=workers, space=branin, objective=objective, strategy=strategy, population=8,
                   sigma_adapt=False, screen=1)
    steps = adapted.optimizer.step_scales
    assert len(steps) >= 5 and len(set(steps)) > 1
    if strategy == "simple":  # generations are batches: the trajectory is the seed's (async's follows arrival order)
        assert steps[-1] < 0.5  # few children beat their parents near the optimum: smaller steps
    assert set(fixed.optimizer.step_scales) == {1.0}


def test_sigma_adapt_must_be_a_boolean() -> None:
    with pytest.raises(ValueError, match="sigma_adapt: must be true or false"):
        GeneticAlgorithm(sigma_adapt="yes")  # type: ignore[arg-type]
