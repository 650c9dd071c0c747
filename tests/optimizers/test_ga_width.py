"""The steady-state GA at width (``bench/scale.py``): its per-result work stays bounded and its
decisions stay DEAP's (issue 27)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any

import pytest
from threadpoolctl import threadpool_info

from emews.core.results import Result, Status
from emews.core.space import Float, Space
from emews.optimizers._ga.failure_policy import FailurePolicy
from emews.optimizers._ga.individual import Individual
from emews.optimizers._ga.screen import MAX_POINTS, SurrogateScreen
from emews.optimizers._ga.steady_state import insert

PLANE = Space({"x": Float(-5.0, 5.0), "y": Float(-5.0, 5.0)})


def _scored(point: dict[str, Any], loss: float, task: int) -> Individual:
    ind = Individual(point)
    ind.result = Result(task, point, Status.OK, loss, loss)
    ind.fitness.values = (loss,)
    return ind


def _bowl(rng: random.Random, n: int, start: int) -> list[Individual]:
    points = [PLANE.sample(rng) for _ in range(n)]
    return [_scored(p, p["x"] ** 2 + p["y"] ** 2, start + i) for i, p in enumerate(points)]


def test_hyperparameter_fits_double_apart_once_the_fit_is_full() -> None:
    """Below ``MAX_POINTS`` the kernel is re-optimized each tenth more evaluations; past it, the
    fit's size stays the same and a re-optimization waits for the evaluations to double (a
    tenth more was ~30 fits of 1-2 s in the optimizer's thread between 200 and 3,200)."""
    rng = random.Random(0)
    screen = SurrogateScreen(10, PLANE)
    told = 0
    hyperfits_at: list[int] = []
    while told < 16 * MAX_POINTS:
        batch = _bowl(rng, 100, told)
        screen.observe(batch)
        told += len(batch)
        before = screen.hyperfits
        screen.pick([Individual(PLANE.sample(rng)) for _ in range(20)], 2)
        if screen.hyperfits > before:
            hyperfits_at.append(told)
    past = [n for n in hyperfits_at if n > MAX_POINTS]
    assert past, hyperfits_at
    assert all(later >= 2 * earlier for earlier, later in zip(past, past[1:], strict=False)), hyperfits_at
    assert len(past) <= math.log2(16) + 1, hyperfits_at
    assert screen.fits == len(range(0, 16 * MAX_POINTS, 100))  # every pick still refits (kernel fixed)


def test_the_screen_fits_with_one_blas_thread() -> None:
    """The model's matrices are small and the optimizer rank shares its node with workers: BLAS
    threads sized to the node spun against them (a 200-point Cholesky 41 ms instead of 0.9 ms)."""
    seen: list[int] = []

    class Watched(SurrogateScreen):
        def _model(self) -> Any:
            seen.extend(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")
            return super()._model()

    screen = Watched(10, PLANE)
    screen.observe(_bowl(random.Random(1), 20, 0))
    rng = random.Random(2)
    screen.pick([Individual(PLANE.sample(rng)) for _ in range(10)], 1)
    assert seen and set(seen) == {1}


def test_successes_are_scored_without_reading_the_cohort() -> None:
    """The cohort (the whole population, once per result) is read only to score a failure."""

    def untouchable() -> Iterator[Individual]:
        raise AssertionError("the cohort was read")
        yield  # pragma: no cover

    ind = Individual(x=1.0, y=1.0)
    FailurePolicy("mean").assign([ind], [Result(1, dict(ind), Status.OK, 2.0, 2.0)], cohort=untouchable())
    assert ind.loss == 2.0
    failed = Individual(x=2.0, y=2.0)
    cohort = _bowl(random.Random(3), 5, 10)
    FailurePolicy("mean").assign([failed], [Result(2, dict(failed), Status.FAILED, None, math.inf)], cohort=cohort)
    assert failed.loss == sum(m.loss for m in cohort) / len(cohort)


def test_replacement_drops_the_first_of_the_worst() -> None:
    """``replacement: worst`` removes the least fit member, the first one among ties, as the
    comparison of DEAP fitnesses did."""
    from types import SimpleNamespace

    from emews.optimizers._ga.engine import Engine
    from emews.optimizers._ga.options import GAOptions

    evaluator = SimpleNamespace(space=PLANE, seed=0, submitted=0, remaining=10, workers=4, history=[], earlier_points=0)
    engine = Engine(GAOptions(seed=0, screen=1, replacement="worst").resolved(10, 4), evaluator)  # type: ignore[arg-type]
    population = [_scored({"x": float(i), "y": 0.0}, loss, i) for i, loss in enumerate([1.0, 3.0, 2.0, 3.0])]
    newcomer = Individual(x=9.0, y=0.0)
    insert(engine, population, 4, newcomer, Result(9, dict(newcomer), Status.OK, 0.5, 0.5))
    assert [m["x"] for m in population] == [0.0, 2.0, 3.0, 9.0]


def test_a_clone_shares_nothing_a_child_changes() -> None:
    """DEAP's ``clone`` of a parent: the point and fitness are the clone's own (a point of plain
    values is copied shallowly, one holding a list deeply), the scoring result is shared."""
    import copy

    parent = _scored({"x": 1.0, "y": 2.0}, 5.0, 1)
    twin = copy.deepcopy(parent)
    twin["x"] = 4.0
    twin.bred()
    assert parent["x"] == 1.0 and parent.loss == 5.0 and twin.loss is None
    assert twin.result is parent.result and twin.parent_fitness == parent.fitness.wvalues
    nested = _scored({"x": 1.0, "layers": [64, 32]}, 1.0, 2)
    nested_twin = copy.deepcopy(nested)
    nested_twin["layers"].append(16)
    assert nested["layers"] == [64, 32]


def _async_ga(seed: int) -> Any:
    from emews.optimizers.ga import GeneticAlgorithm

    return GeneticAlgorithm(seed=seed, strategy="async", screen=1)


@pytest.mark.parametrize(("workers", "first_batch"), [(4, 4), (128, 128), (192, 195)])
def test_above_128_workers_the_ga_keeps_a_reserve_queued(workers: int, first_batch: int) -> None:
    """Up to 128 workers one child per worker is out; above, 1/64 more wait queued, so a worker
    that frees takes one at once instead of waiting for its result to be bred from."""
    from emews.testing import run_traced

    trace = run_traced(_async_ga, workers=workers, budget=2 * workers, timeout=300)
    assert not trace.hung
    puts = [n for kind, n in trace.events if kind == "put"]
    assert puts[0] == first_batch
    assert len(trace.results) == 2 * workers


# -- the wide breeder: screened children bred ahead, off the optimizer thread --------------------


def _simulate_breeder(rate: float, per_bred: float, screen: int, seconds: float = 120.0) -> dict[str, Any]:
    """The breeder's stock and factor policies on a virtual clock: one result (and one child
    taken) every ``1 / rate`` s; a batch of ``n`` children bred ``factor`` times over takes
    20 ms plus ``per_bred`` s per child bred. Counts the results that found the stock empty
    after the first three batches, and the factors used."""
    from emews.optimizers._ga.wide import Factor, Stock

    stock, factor = Stock(most=4096), Factor(screen)
    now, have, batches, dry, empty_after_warmup = 0.0, 0, 0, False, 0
    next_result, batch_end, batch_n, batch_s = 1 / rate, math.inf, 0, 0.0
    factors: list[int] = []
    while now < seconds:
        if batch_end <= next_result:
            now, batch_end = batch_end, math.inf
            stock.bred(batch_s)
            if batches:
                factor.after_batch(dry)
            batches += 1
            have += batch_n
        else:
            now, next_result = next_result, next_result + 1 / rate
            stock.arrived(now, 1)
            if have:
                have -= 1
            elif batches:
                dry = True
                empty_after_warmup += batches >= 3
        if batch_end == math.inf and have < stock.low(now):
            batch_n, dry = max(stock.target(now) - have, 1), False
            factors.append(factor.value)
            batch_s = 0.02 + per_bred * factor.value * batch_n
            batch_end = now + batch_s
    return {"empty": empty_after_warmup, "factors": factors, "batches": batches}


def test_the_stock_never_runs_dry_while_the_breeder_outpaces_the_results() -> None:
    """1,667 results/s (100,000 workers on 60 s tasks) against a breeder that breeds a child in
    20 us (ten per child screened: 200 us each, 5,000 screened children/s): after its first
    batches the optimizer never finds the stock empty, and once settled every child is the
    pick of ten."""
    run = _simulate_breeder(rate=1667, per_bred=20e-6, screen=10)
    assert run["empty"] == 0, run
    assert set(run["factors"][len(run["factors"]) // 4 :]) == {10}
    assert run["batches"] < 1667 * 120 / 50  # batches of about a hundred: a model fit each, not one per result


def test_a_breeder_slower_than_the_results_screens_fewer_per_child() -> None:
    """At 100 us per child bred, ten per child screened is 1,000 children/s against 1,667
    results/s: the factor comes down to what keeps up (at most 5), and after that the stock
    is empty for few results."""
    run = _simulate_breeder(rate=1667, per_bred=100e-6, screen=10)
    later = run["factors"][len(run["factors"]) // 2 :]
    assert 2 <= min(later) and max(later) <= 6, run["factors"]
    assert sorted(later)[len(later) // 2] <= 5, run["factors"]
    assert run["empty"] < 0.05 * 1667 * 120, run["empty"]


def _scored_population(n: int, seed: int) -> list[Individual]:
    members = _bowl(random.Random(seed), n, 0)
    return sorted(members, key=lambda m: m.fitness.wvalues, reverse=True)


def _options(screen: int = 10) -> Any:
    from emews.optimizers._ga.options import GAOptions

    return GAOptions(seed=0, screen=screen).resolved(10_000, 1_000)


@pytest.mark.parametrize("process", [True, False])
def test_the_breeder_keeps_screened_children_in_stock(process: bool) -> None:
    """Told results, the breeder fills its stock with children of the population: new points
    of the space, no fitness yet, their parent's remembered; each batch is one model fit over
    ``screen`` children bred per child kept (in the model process, or in this one)."""
    from emews.optimizers._ga.wide import WideBreeder

    population = _scored_population(30, 4)
    breeder = WideBreeder(_options(), PLANE, 0, population, most=64, process=process).start()
    try:
        breeder.tell(population + _bowl(random.Random(5), 40, 100), 1.0, 1_000)
        assert breeder.wait_stock(16, timeout=120) >= 16
        children = breeder.take(16)
        summary = breeder.summary()
    finally:
        breeder.close()
    assert len(children) == 16
    known = {(m["x"], m["y"]) for m in population}
    for child in children:
        assert PLANE.contains(dict(child)) and not child.fitness.valid and child.result is None
        assert child.parent_fitness in {m.fitness.wvalues for m in population}
    assert len({(c["x"], c["y"]) for c in children} - known) == 16
    assert summary["model_process"] == ("running" if process else "none")
    assert summary["fits"] <= summary["batches"] and summary["fits"] >= 1
    assert summary["bred"] == 10 * summary["screened"] and summary["screened"] >= 16


def test_the_breeder_goes_on_in_this_process_when_the_model_process_dies() -> None:
    from emews.optimizers._ga.wide import WideBreeder

    population = _scored_population(30, 6)
    breeder = WideBreeder(_options(), PLANE, 0, population, most=64).start()
    try:
        breeder.tell(_bowl(random.Random(7), 40, 100), 1.0, 1_000)
        breeder.wait_stock(16, timeout=120)
        assert breeder.process_state == "running"
        assert breeder._proc is not None
        breeder._proc.kill()
        breeder.take(64)
        breeder.tell(_bowl(random.Random(8), 10, 200), 1.0, 1_000)
        assert breeder.wait_stock(16, timeout=120) >= 16
        summary = breeder.summary()
    finally:
        breeder.close()
    assert summary["model_process"] == "failed"
    assert summary["screened"] >= 32


def _wide_ga(seed: int) -> Any:
    from emews.optimizers.ga import GeneticAlgorithm

    return GeneticAlgorithm(seed=seed, strategy="async", screen=10)


def test_a_wide_run_takes_children_from_the_breeder_or_breeds_them_unscreened(monkeypatch) -> None:
    """Above WIDE_WORKERS (128; lowered to 8 here, so that 12 worker threads are a wide run: 192
    threads of one interpreter spend minutes polling for its lock on a quiet machine) workers with
    the screen on, every child after the random ones comes from the breeder's stock or, when the
    stock ran short of the workers, is bred unscreened on the optimizer thread; the model fits once
    per batch, not once per result."""
    import functools

    from emews.optimizers._ga import steady_state
    from emews.optimizers._ga.wide import WideBreeder
    from emews.testing import run_traced

    monkeypatch.setattr(steady_state, "WIDE_WORKERS", 8)
    # breeding in the breeder thread: a model process still importing scikit-learn when the 144
    # evaluations end (a loaded machine) bred nothing (the process is tested on its own above)
    monkeypatch.setattr(steady_state, "WideBreeder", functools.partial(WideBreeder, process=False))
    workers, budget = 12, 12 * 12
    trace = run_traced(_wide_ga, workers=workers, budget=budget, space=PLANE, timeout=300)
    assert not trace.hung and trace.summary.error is None
    assert len(trace.results) == budget
    stats = trace.optimizer.stats
    assert stats["batches"] >= 1, stats  # the breeder ran
    assert stats["random"] + stats["from_stock"] + stats["unscreened"] == budget, stats
    assert stats["fits"] <= stats["batches"] < len(trace.results), stats
    assert stats["model_process"] == "none", stats  # bred in the breeder thread, as asked


def test_up_to_128_workers_no_breeder_runs() -> None:
    from emews.testing import run_traced

    trace = run_traced(_wide_ga, workers=4, budget=40, space=PLANE, timeout=120)
    stats = trace.optimizer.stats
    assert "batches" not in stats and stats["from_stock"] == stats["unscreened"] == 0, stats
    assert stats["fits"] >= 1


def test_the_kept_fitness_list_drops_the_same_members_as_reading_them() -> None:
    """``insert`` with the members' fitnesses kept beside them (the steady-state loop's) removes
    the same member as reading every member's fitness, ties and all, and keeps the list in step."""
    from types import SimpleNamespace

    from emews.optimizers._ga.engine import Engine
    from emews.optimizers._ga.options import GAOptions

    def run(kept: bool) -> list[dict[str, Any]]:
        evaluator = SimpleNamespace(space=PLANE, seed=0, submitted=0, remaining=10, workers=4, history=[], earlier_points=0)
        engine = Engine(GAOptions(seed=0, screen=1).resolved(10, 4), evaluator)  # type: ignore[arg-type]
        population: list[Individual] = []
        fitness: list[tuple[float, ...]] | None = [] if kept else None
        rng = random.Random(3)
        for task in range(300):
            point = {"x": float(rng.randrange(20)), "y": 0.0}
            loss = float(rng.randrange(8))  # many ties
            insert(engine, population, 16, Individual(point), Result(task, point, Status.OK, loss, loss), fitness)
            if fitness is not None:
                assert fitness == [m.fitness.wvalues for m in population]
        return [dict(m) for m in population]

    assert run(kept=True) == run(kept=False)


def test_children_bred_unscreened_on_the_optimizer_thread() -> None:
    """The fallback when the stock runs short: ``n`` new children of the population, valid points
    with no fitness of their own and their parent's remembered, drawn from a stream of their own
    (not the model process's: the same population must not give both the same children)."""
    from emews.optimizers._ga.options import GAOptions
    from emews.optimizers._ga.wide import WideBreeder

    rng = random.Random(1)
    population = _bowl(rng, 20, 0)
    breeder = WideBreeder(GAOptions(seed=0, screen=10).resolved(1000, 200), PLANE, 0, population, most=64, process=False)
    children = breeder.unscreened(population, 50, 1.0)
    assert len(children) == 50
    wvalues = {m.fitness.wvalues for m in population}
    for child in children:
        assert PLANE.validate(dict(child)) == dict(child)
        assert not child.fitness.valid and child.result is None
        assert child.parent_fitness in wvalues
    assert any(dict(c) not in [dict(m) for m in population] for c in children)
    modelled = breeder._local_breeding([(dict(m), m.fitness.wvalues) for m in population])
    assert [dict(c) for c in children][:5] != [p for p, _ in modelled.breed([(dict(m), m.fitness.wvalues) for m in population], 5, 1.0, factor=1)]
    assert breeder.summary()["batches"] == 0  # the fallback is no batch of the breeder


def test_the_breeder_screens_out_children_in_a_failing_region() -> None:
    """The wide breeder's screen learns failures too (told as their policy's loss; inf: the
    worst loss): a population over [-1, 1]^2 where x > 0 failed, 16 children a seed, seeds 0-5.
    Told as failures only marking their points taken, 28 of the 96 children were in the failing
    half; now none."""
    from emews.optimizers._ga.wide import WideBreeder

    square = Space({"x": Float(-1.0, 1.0), "y": Float(-1.0, 1.0)})
    failing = 0
    for seed in range(6):
        rng = random.Random(seed)
        ok = [_scored({"x": -(x := rng.uniform(0, 1)), "y": (y := rng.uniform(-1, 1))}, x * x + y * y, i)
              for i in range(20)]
        failed = []
        for i in range(20):
            point = {"x": rng.uniform(0, 1), "y": rng.uniform(-1, 1)}
            ind = Individual(point)
            ind.result = Result(100 + i, point, Status.FAILED, None, math.inf)
            ind.fitness.values = (math.inf,)  # ``failure: penalty``, the default
            failed.append(ind)
        population = sorted(ok + failed, key=lambda m: m.fitness.wvalues, reverse=True)
        breeder = WideBreeder(_options(), square, seed, population, most=64, process=False).start()
        try:
            breeder.tell(population, 1.0, 1_000)
            assert breeder.wait_stock(16, timeout=120) >= 16
            children = breeder.take(16)
        finally:
            breeder.close()
        assert len(children) == 16
        failing += sum(child["x"] > 0 for child in children)
    assert failing <= 8, failing
