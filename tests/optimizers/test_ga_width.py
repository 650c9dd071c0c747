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

    evaluator = SimpleNamespace(space=PLANE, seed=0, submitted=0, remaining=10, workers=4, history=[])
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
