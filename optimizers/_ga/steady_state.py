"""The ``async`` strategy: a steady-state GA that never waits for a generation.

``in_flight`` evaluations (default: one per worker, and above 128 workers a reserve of 1/64
more, see :func:`reserve`) stay outstanding. The
first ``population`` children are random points; after that every arriving
result is inserted into the population, the population is cut back to its
size by removing the worst member (``replacement: worst``) or the loser of a
tournament (``replacement: tournament``), and one new child is bred (two
tournament-selected parents, uniform crossover with ``cxpb``, mutation with
``mutpb``, or always when crossover left the child a copy of its parent) and
submitted (with ``screen`` above 1: the most promising of ``screen`` children bred, see
``_ga.screen``). ``generations`` caps the run at ``population * (generations + 1)``
evaluations; the budget always caps it.

Resuming: the population starts as the best ``population`` individuals of the earlier
runs (``evaluator.history``, which also count towards ``generations``); breeding starts
at once when there are enough of them. Results of tasks an earlier run left running
(``evaluator.requeued``) are inserted like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .individual import Individual
from .operators import tournament_loser

if TYPE_CHECKING:
    from emews.core.results import Result

    from .engine import Engine


def run_steady_state(engine: Engine) -> list[Individual]:
    opts, evaluator = engine.options, engine.evaluator
    size = opts.population
    assert size is not None, "the engine runs on GAOptions.resolved()"
    cap = None if opts.generations is None else size * (opts.generations + 1)
    target = opts.in_flight or evaluator.workers + reserve(evaluator.workers)
    earlier = engine.earlier()
    population: list[Individual] = earlier[:size]
    in_flight: dict[int, Individual] = {}
    state = {"random": len(population), "submitted": len(earlier), "arrived": len(earlier)}

    def breed(n: int) -> list[Individual]:
        randoms = max(min(n, size - state["random"]), n if len(population) < 2 else 0)
        state["random"] += randoms
        children = [Individual(engine.space.sample(engine.rng)) for _ in range(randoms)]
        return children + (engine.children(population, n - randoms) if n > randoms else [])

    while True:
        want = min(target - evaluator.pending, evaluator.remaining)
        if cap is not None:
            want = min(want, cap - state["submitted"])
        if want > 0:
            children = breed(want)
            for task_id, child in zip(evaluator.put([dict(c) for c in children]), children, strict=False):
                in_flight[task_id] = child
            state["submitted"] += want
        if evaluator.pending == 0:
            return population
        for result in evaluator.get(1):
            arrived = in_flight.pop(result.id, None) or Individual(engine.space.validate(result.params))
            insert(engine, population, size, arrived, result)
            state["arrived"] += 1
            if state["arrived"] % size == 0:
                engine.step.adapt()
                engine.record_population(population, state["arrived"] // size)


#: from this many workers on, children are kept queued beyond one per worker (:func:`reserve`)
WIDE_WORKERS = 128
#: the queued children's share of the workers
RESERVE_FRACTION = 1 / 64


def reserve(workers: int) -> int:
    """Children kept queued beyond one per worker by default: none up to ``WIDE_WORKERS``;
    above, a worker that frees takes a queued child at once instead of waiting for its result to
    reach the GA and a child to be bred (at 100,000 workers on 60 s tasks, 1,562 children: a
    second of the demand, each bred from a population at most that much older)."""
    return int(workers * RESERVE_FRACTION) if workers > WIDE_WORKERS else 0


def insert(engine: Engine, population: list[Individual], size: int, ind: Individual, result: Result) -> None:
    """Score ``ind`` and add it; drop one member when the population is over ``size``."""
    engine.policy.assign([ind], [result], cohort=population)
    engine.step.observe([ind])
    engine.record([ind], gen=None)
    population.append(ind)
    if len(population) > size:
        if engine.options.replacement == "worst":
            fitness = [member.fitness.wvalues for member in population]
            loser = fitness.index(min(fitness))  # the first of the worst, as DEAP's comparisons order them
        else:
            loser = tournament_loser(population, engine.options.tournament, engine.rng)
        del population[loser]
