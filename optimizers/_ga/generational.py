"""The synchronous strategies: ``simple`` (DEAP ``eaSimple``) and ``mu_plus_lambda`` (``eaMuPlusLambda``).

Each generation is one batch through ``toolbox.map``, which is wired to
``evaluator.map`` (the EQ/Py seam of EMEWS). Budget: when the budget cannot
pay for a whole generation, the generation is *truncated*: its first
``remaining`` new children are evaluated, the others are dropped, and (in
``simple``) their places are kept by the best parents. The run then ends.

Screening (``screen``, see ``_ga.screen``): each generation's new children are the most
promising of ``screen`` breedings' (``screen: 1``: every child as bred).

Elitism (``elitism``, default 1): in ``simple`` the best individuals of a generation that
are not in the next one take the places of its worst (CANDLE's eaSimple: ``elitism: 0``).

Resuming: the initial population is the best ``population`` individuals of the earlier
runs (``evaluator.history``), topped up with random ones when there are fewer (drawn on from the
earlier runs' draws, so not their points again); the
generation count goes on from the generations those evaluations paid for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deap import tools

from .individual import Individual
from .operators import var_and, var_or

if TYPE_CHECKING:
    from .engine import Engine

#: consecutive generations without a single new child after which the run stops
MAX_EMPTY_GENERATIONS = 100


def run_generational(engine: Engine) -> list[Individual]:
    opts, toolbox, rng = engine.options, engine.toolbox, engine.rng
    size, lambda_ = opts.population, opts.lambda_
    assert size is not None and lambda_ is not None, "the engine runs on GAOptions.resolved()"
    earlier = engine.earlier()
    population = earlier[:size]
    fresh = [Individual(engine.space.sample(rng)) for _ in range(size - len(population))]
    population += evaluate_valid(engine, fresh, gen=0)
    gen = generations_done(len(earlier), size, size if opts.strategy == "simple" else lambda_)
    empty = 0
    while (
        (opts.generations is None or gen < opts.generations)
        and engine.evaluator.remaining > 0
        and empty < MAX_EMPTY_GENERATIONS
        and population
    ):
        gen += 1
        if opts.strategy == "simple":

            def breed(parents: list[Individual] = population) -> list[Individual]:
                return var_and(toolbox.select(parents, size), toolbox, opts.cxpb, opts.mutpb, rng)
        else:

            def breed(parents: list[Individual] = population) -> list[Individual]:
                return var_or(parents, toolbox, lambda_, opts.cxpb, opts.mutpb, rng)

        offspring = engine.screened(breed)
        before = engine.evaluator.submitted
        offspring = evaluate_valid(engine, offspring, gen=gen)
        engine.step.adapt()
        empty = empty + 1 if engine.evaluator.submitted == before else 0
        if opts.strategy == "simple":
            missing = size - len(offspring)
            elite = [toolbox.clone(ind) for ind in tools.selBest(population, opts.elitism)]
            population = offspring + (tools.selBest(population, missing) if missing > 0 else [])
            population = keep_elite(population, elite)
        else:
            population = toolbox.select(population + offspring, opts.mu)
    return population


def keep_elite(population: list[Individual], elite: list[Individual]) -> list[Individual]:
    """``population`` with its worst members replaced by the ``elite`` of the last generation
    that it lost (elitism; none lost: unchanged)."""
    lost = [e for e in elite if all(dict(e) != dict(ind) for ind in population)]
    if not lost:
        return population
    return tools.selBest(population, len(population) - len(lost)) + lost


def generations_done(evaluated: int, population: int, per_generation: int) -> int:
    """Generations after the initial population that ``evaluated`` earlier evaluations paid for."""
    return max(-(-(evaluated - population) // max(per_generation, 1)), 0)


def evaluate_valid(engine: Engine, individuals: list[Individual], gen: int) -> list[Individual]:
    """Evaluate the individuals without a fitness (as many as the budget allows); keep the scored ones."""
    invalid = [ind for ind in individuals if not ind.fitness.valid]
    batch = invalid[: max(engine.evaluator.remaining, 0)]
    if batch:
        results = engine.toolbox.map(engine.toolbox.evaluate, batch)
        engine.policy.assign(batch, results)
        engine.step.observe(batch)
        engine.record(batch, gen)
    return [ind for ind in individuals if ind.fitness.valid]
