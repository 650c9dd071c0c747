"""The ``async`` strategy: a steady-state GA that never waits for a generation.

``in_flight`` evaluations (default: one per worker, and above 128 workers a reserve of 1/64
more, see :func:`reserve`; with pools at least what they can hold, ``evaluator.room``, so
a pool that joins gets children at once) stay outstanding. The
first ``population`` children are random points; after that every arriving
result is inserted into the population, the population is cut back to its
size by removing the worst member (``replacement: worst``) or the loser of a
tournament (``replacement: tournament``), and one new child is bred (two
tournament-selected parents, uniform crossover with ``cxpb``, mutation with
``mutpb``, or always when crossover left the child a copy of its parent) and
submitted (with ``screen`` above 1: the most promising of ``screen`` children bred, see
``_ga.screen``). ``generations`` caps the run at ``population * (generations + 1)``
evaluations; the budget always caps it.

Above ``WIDE_WORKERS`` workers with the screen on, the children are bred and screened in
batches ahead, in a model process, and handed out from that stock (``_ga.wide``); when the
stock runs short of the workers, children are bred here unscreened. Up to ``WIDE_WORKERS``
workers, or with ``screen: 1``, nothing of this engages (seeded runs propose as before).

Resuming: the population starts as the best ``population`` individuals of the earlier
runs (``evaluator.history``, which also count towards ``generations``); breeding starts
at once when there are enough of them. Results of tasks an earlier run left running
(``evaluator.requeued``) are inserted like any other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine import sigma_scale
from .individual import Individual
from .operators import tournament_loser
from .screen import SurrogateScreen
from .wide import WideBreeder

if TYPE_CHECKING:
    from emews.core.results import Result

    from .engine import Engine


def run_steady_state(engine: Engine, stats: dict[str, Any] | None = None) -> list[Individual]:
    """Run to the end of the budget (or ``generations``); the final population. ``stats``
    gets the wide breeder's counters (:func:`wide_breeder`) and the children bred here."""
    opts, evaluator = engine.options, engine.evaluator
    size = opts.population
    assert size is not None, "the engine runs on GAOptions.resolved()"
    stats = {} if stats is None else stats
    cap = None if opts.generations is None else size * (opts.generations + 1)
    target = opts.in_flight or evaluator.workers + reserve(evaluator.workers)
    earlier = engine.earlier()
    population: list[Individual] = earlier[:size]
    in_flight: dict[int, Individual] = {}
    state = {"random": len(population), "submitted": len(earlier), "arrived": len(earlier)}
    breeder = wide_breeder(engine, population)
    # a wide run keeps at least this many children out (half the reserve queued) with
    # unscreened children bred here when the breeder's stock runs short
    floor = evaluator.workers + reserve(evaluator.workers) // 2
    if breeder is not None and opts.in_flight is None:
        # and queues children from the stock deeper: taking one costs this thread nothing, and the
        # queue covers the stretches in which it waits for the interpreter lock or a core
        target = evaluator.workers + WIDE_QUEUE * reserve(evaluator.workers)
    stats.update(random=0, from_stock=0, unscreened=0)

    def breed(n: int) -> list[Individual]:
        randoms = max(min(n, size - state["random"]), n if len(population) < 2 else 0)
        state["random"] += randoms
        stats["random"] += randoms
        children = [Individual(engine.space.sample(engine.rng)) for _ in range(randoms)]
        if n <= randoms:
            return children
        if breeder is None:
            return children + engine.children(population, n - randoms)
        stocked = breeder.take(n - randoms)
        stats["from_stock"] += len(stocked)
        children += stocked
        short = min(n - len(children), floor - evaluator.pending - len(children))
        if short > 0:  # the workers would run out of children: bred here, unscreened
            children += breeder.unscreened(population, short, sigma_scale(opts, evaluator) * engine.step.scale)
            stats["unscreened"] += short
        return children

    try:
        return _loop(engine, population, in_flight, state, breed, breeder, target, cap)
    finally:
        if breeder is not None:
            breeder.close()
            stats.update(breeder.summary())


def _loop(
    engine: Engine,
    population: list[Individual],
    in_flight: dict[int, Individual],
    state: dict[str, int],
    breed: Any,
    breeder: WideBreeder | None,
    target: int,
    cap: int | None,
) -> list[Individual]:
    opts, evaluator = engine.options, engine.evaluator
    size = opts.population
    assert size is not None
    fitness = [member.fitness.wvalues for member in population]  # the members' own, kept beside them
    while True:
        room = evaluator.room(target)  # its capacity: a pool that joins after it wakes the get below
        want = room.propose
        if cap is not None:
            want = min(want, cap - state["submitted"])
        if want > 0:
            children = breed(want)
            for task_id, child in zip(evaluator.put([dict(c) for c in children]), children, strict=False):
                in_flight[task_id] = child
            state["submitted"] += len(children)  # a wide run's breed may hand out fewer
        if evaluator.pending == 0:
            return population
        scored = []
        for result in evaluator.get(1, more_room=room.capacity):  # or none, when a pool joined: breed for it
            arrived = in_flight.pop(result.id, None) or Individual(engine.space.validate(result.params))
            insert(engine, population, size, arrived, result, fitness)
            scored.append(arrived)
            state["arrived"] += 1
            if state["arrived"] % size == 0:
                engine.step.adapt()
                engine.record_population(population, state["arrived"] // size)
        if breeder is not None:
            breeder.tell(scored, sigma_scale(opts, evaluator) * engine.step.scale, evaluator.remaining)


#: from this many workers on, children are kept queued beyond one per worker (:func:`reserve`)
WIDE_WORKERS = 128
#: the queued children's share of the workers
RESERVE_FRACTION = 1 / 64
#: with the wide breeder (``_ga.wide``), this many reserves are queued: 1/16 of the workers (at
#: 100,000 workers on 60 s tasks, 3.75 s of the demand; under load 8-37 on the 2-core test
#: machine the optimizer thread stalled for seconds waiting for the interpreter lock and a core)
WIDE_QUEUE = 4


def reserve(workers: int) -> int:
    """Children kept queued beyond one per worker by default: none up to ``WIDE_WORKERS``;
    above, a worker that frees takes a queued child at once instead of waiting for its result to
    reach the GA and a child to be bred (at 100,000 workers on 60 s tasks, 1,562 children: a
    second of the demand, each bred from a population at most that much older)."""
    return int(workers * RESERVE_FRACTION) if workers > WIDE_WORKERS else 0


def wide_breeder(engine: Engine, population: list[Individual]) -> WideBreeder | None:
    """Above ``WIDE_WORKERS`` workers with the screen on, the breeder that breeds and screens
    children off the optimizer thread (``_ga.wide``); the engine's own screen then learns
    nothing. ``None`` otherwise: children are bred here, one batch per arrival, as always."""
    opts, evaluator = engine.options, engine.evaluator
    if evaluator.workers <= WIDE_WORKERS or not engine.screen.active:
        return None
    seed = evaluator.seed if opts.seed is None else opts.seed
    engine.screen = SurrogateScreen(1, engine.space)
    most = max(2 * reserve(evaluator.workers), 64)
    return WideBreeder(opts, engine.space, seed, population, most=most).start()


def insert(
    engine: Engine,
    population: list[Individual],
    size: int,
    ind: Individual,
    result: Result,
    fitness: list[tuple[float, ...]] | None = None,
) -> None:
    """Score ``ind`` and add it; drop one member when the population is over ``size``.

    ``fitness``: the members' weighted fitnesses, in their order, kept up to date here (a member's
    fitness never changes once it is in): the worst is found in one pass over a list of tuples
    instead of reading every member's fitness for every result (a quarter of the optimizer
    thread's time at 20,000 workers, ``bench/scale.py``)."""
    engine.policy.assign([ind], [result], cohort=population)
    engine.step.observe([ind])
    engine.record([ind], gen=None)
    population.append(ind)
    if fitness is None:
        fitness = [member.fitness.wvalues for member in population]
    else:
        fitness.append(ind.fitness.wvalues)
    if len(population) > size:
        if engine.options.replacement == "worst":
            loser = fitness.index(min(fitness))  # the first of the worst, as DEAP's comparisons order them
        else:
            loser = tournament_loser(population, engine.options.tournament, engine.rng)
        del population[loser]
        del fitness[loser]
