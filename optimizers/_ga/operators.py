"""Variation and selection, type-aware and driven by a ``random.Random`` instance.

DEAP's own operators (``tools.cxUniform``, ``tools.selTournament``,
``algorithms.varAnd`` / ``varOr``) draw from the global ``random`` module and
index individuals by position; these keep DEAP's semantics but work on
dict individuals and on an explicit generator, so a run is reproducible
under its seed without touching global state.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from typing import Any

from deap import base

from emews.core.space import Dimension, Float, Int, Space

from .individual import Individual


def mutation_sigma(dim: Int | Float) -> float:
    """The Gaussian step of ``dim``: its ``sigma``, else 10% of its range (ints: at least 1).

    For ``log`` dimensions the step is taken in log10 units (decades).
    """
    return dim.mutation_sigma()


def mutate_value(dim: Dimension, value: Any, rng: random.Random) -> Any:
    """One mutated value of ``dim``, always inside it (each dimension type's ``mutate``).

    int/float: Gaussian step (``sigma``), clipped to the bounds, ints rounded;
    ordered: one step to a neighbour; categorical: a different value at random;
    constant: unchanged.
    """
    return dim.mutate(value, rng)


def scaled_step(dim: Dimension, scale: float) -> Dimension:
    """``dim`` with its Gaussian mutation step times ``scale`` (linear ints: at least 1);
    other dimension types unchanged."""
    if scale == 1.0 or not isinstance(dim, (Int, Float)):
        return dim
    sigma = dim.mutation_sigma() * scale
    if isinstance(dim, Int) and not dim.log:
        sigma = max(sigma, 1.0)
    return dataclasses.replace(dim, sigma=sigma)


class Mutator:
    """``toolbox.mutate``: each free gene mutates with probability ``indpb``, numeric ones by a
    Gaussian step of ``sigma`` times ``step_scale()`` (the decay and the adaptation of the run,
    1 for CANDLE's)."""

    def __init__(
        self, space: Space, indpb: float, rng: random.Random, step_scale: Callable[[], float] = lambda: 1.0
    ) -> None:
        self.free = space.free
        self.indpb = indpb
        self.rng = rng
        self.step_scale = step_scale
        self._scaled: tuple[float, dict[str, Dimension]] = (1.0, dict(self.free))

    def __call__(self, ind: Individual) -> tuple[Individual]:
        dims = self._dimensions(self.step_scale())
        for name in self.free:
            if self.rng.random() < self.indpb:
                ind[name] = mutate_value(dims[name], ind[name], self.rng)
        return (ind,)

    def _dimensions(self, scale: float) -> dict[str, Dimension]:
        """The free dimensions with their steps scaled, made again only when the scale changed
        (it moves once per adaptation, not per child)."""
        if self._scaled[0] != scale:
            self._scaled = (scale, {name: scaled_step(dim, scale) for name, dim in self.free.items()})
        return self._scaled[1]


def cx_uniform(
    ind1: Individual, ind2: Individual, indpb: float, names: Sequence[str], rng: random.Random
) -> tuple[Individual, Individual]:
    """``tools.cxUniform`` for dict individuals: swap each gene in ``names`` with probability ``indpb``."""
    for name in names:
        if rng.random() < indpb:
            ind1[name], ind2[name] = ind2[name], ind1[name]
    return ind1, ind2


def sel_tournament(individuals: Sequence[Individual], k: int, tournsize: int, rng: random.Random) -> list[Individual]:
    """``tools.selTournament``: ``k`` times, the fittest of ``tournsize`` drawn with replacement."""
    return [max((rng.choice(individuals) for _ in range(tournsize)), key=_weighted) for _ in range(k)]


def _weighted(individual: Individual) -> tuple[float, ...]:
    """The order DEAP's ``Fitness`` comparisons define (its weighted values), without their Python calls."""
    return individual.fitness.wvalues


def tournament_loser(individuals: Sequence[Individual], tournsize: int, rng: random.Random) -> int:
    """Index of the least fit of ``tournsize`` distinct members drawn at random."""
    drawn = rng.sample(range(len(individuals)), min(tournsize, len(individuals)))
    return min(drawn, key=lambda i: individuals[i].fitness.wvalues)


def var_and(
    population: Sequence[Individual], toolbox: base.Toolbox, cxpb: float, mutpb: float, rng: random.Random
) -> list[Individual]:
    """``algorithms.varAnd``: clone, mate neighbours with ``cxpb``, then mutate each with ``mutpb``."""
    offspring = [toolbox.clone(ind) for ind in population]
    for i in range(1, len(offspring), 2):
        if rng.random() < cxpb:
            offspring[i - 1].bred()
            offspring[i].bred()
            offspring[i - 1], offspring[i] = toolbox.mate(offspring[i - 1], offspring[i])
    for i in range(len(offspring)):
        if rng.random() < mutpb:
            offspring[i].bred()
            (offspring[i],) = toolbox.mutate(offspring[i])
    return offspring


def var_or(
    population: Sequence[Individual], toolbox: base.Toolbox, lambda_: int, cxpb: float, mutpb: float, rng: random.Random
) -> list[Individual]:
    """``algorithms.varOr``: ``lambda_`` children, each from crossover, mutation or reproduction."""
    offspring = []
    for _ in range(lambda_):
        choice = rng.random()
        if choice < cxpb and len(population) >= 2:
            ind1, ind2 = (toolbox.clone(i) for i in rng.sample(list(population), 2))
            ind1.bred()
            ind1, _ = toolbox.mate(ind1, ind2)
            offspring.append(ind1)
        elif choice < cxpb + mutpb:
            ind = toolbox.clone(rng.choice(population))
            ind.bred()
            (ind,) = toolbox.mutate(ind)
            offspring.append(ind)
        else:
            offspring.append(toolbox.clone(rng.choice(population)))
    return offspring
