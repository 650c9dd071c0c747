"""One GA run's state: the DEAP toolbox wired to the evaluator, the policy, the hall of fame, the log."""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from statistics import fmean
from typing import TYPE_CHECKING, Any

from deap import base, tools

from .failure_policy import FailurePolicy
from .individual import Individual
from .operators import Mutator, cx_uniform, sel_tournament
from .options import GAOptions
from .screen import SurrogateScreen
from .step import StepAdaptation

if TYPE_CHECKING:
    from emews.core.evaluator import Evaluator
    from emews.core.results import Result


class Engine:
    def __init__(self, options: GAOptions, evaluator: Evaluator) -> None:
        self.options = options
        self.evaluator = evaluator
        self.space = evaluator.space
        self.rng = random.Random(evaluator.seed if options.seed is None else options.seed)
        for _ in range(evaluator.earlier_points):  # resumed: draw on, not the earlier runs' first points again
            self.space.sample(self.rng)
        self.policy = FailurePolicy(options.failure, options.penalty)
        self.hall_of_fame = tools.HallOfFame(options.hall_of_fame)
        self.logbook = tools.Logbook()
        self.logbook.header = ["gen", "nevals", "failed", "min", "mean", "best"]
        self.step = StepAdaptation(options.sigma_adapt)
        self.screen = SurrogateScreen(options.screen, self.space)
        self.toolbox = make_toolbox(options, evaluator, self.rng, self.step)

    def earlier(self) -> list[Individual]:
        """The earlier runs' evaluations (``evaluator.history``) as scored individuals, best first.

        Failures get the failure policy's fitness; all of them enter the hall of fame's pool.
        Results whose point is not in the space (the space changed) are left out.
        """
        results = [r for r in self.evaluator.history if self.space.contains(r.params)]
        individuals = [Individual(self.space.validate(r.params)) for r in results]
        self.policy.assign(individuals, results)
        self.record(individuals, gen=None)
        return sorted(individuals, key=lambda ind: ind.fitness, reverse=True)

    def record(self, scored: Sequence[Individual], gen: int | None) -> None:
        """Hall of fame update for newly scored individuals; a log line per generation."""
        self.hall_of_fame.update([ind for ind in scored if ind.ok])
        self.screen.observe(scored)
        if gen is not None:
            self._log(gen, scored, len(scored))

    def screened(self, breed: Callable[[], list[Individual]]) -> list[Individual]:
        """One generation's offspring from ``breed``; with screening, its new children replaced by
        the most promising of ``screen`` breedings' new children (see ``_ga.screen``)."""
        offspring = breed()
        new = [i for i, ind in enumerate(offspring) if not ind.fitness.valid]
        if not self.screen.active or not new:
            return offspring
        pool = [offspring[i] for i in new]
        for _ in range(self.screen.factor - 1):
            pool += [ind for ind in breed() if not ind.fitness.valid]
        picks = self.screen.pick(pool, len(new))
        for i, child in zip(new, picks, strict=False):
            offspring[i] = child
        return offspring

    def children(self, population: Sequence[Individual], n: int) -> list[Individual]:
        """Steady-state breeding of ``n`` children (:meth:`child`), screened like :meth:`screened`."""
        members = PointSet(population)  # once per batch, not once per child bred
        if not self.screen.active:
            return [self.child(population, members) for _ in range(n)]
        return self.screen.pick([self.child(population, members) for _ in range(n * self.screen.factor)], n)

    def record_population(self, population: Sequence[Individual], gen: int) -> None:
        """Steady-state mode: a log line each ``population`` results, over the current population."""
        size = self.options.population
        assert size is not None, "the engine runs on GAOptions.resolved()"
        self._log(gen, population, size)

    def child(self, population: Sequence[Individual], members: PointSet | None = None) -> Individual:
        """Steady-state breeding: tournament parents, crossover with ``cxpb``, mutation with ``mutpb``
        (and whenever the child repeats a member of ``population``; ``members``: its points, if known)."""
        return breed_child(self.options, self.toolbox, self.rng, population, members)

    def _log(self, gen: int, individuals: Sequence[Individual], nevals: int) -> None:
        losses = [loss for ind in individuals if ind.ok and (loss := ind.loss) is not None]
        best = self.hall_of_fame[0].loss if len(self.hall_of_fame) else None
        self.logbook.record(
            gen=gen,
            nevals=nevals,
            failed=sum(not ind.ok for ind in individuals),
            min=min(losses) if losses else math.inf,
            mean=fmean(losses) if losses else math.inf,
            best=math.inf if best is None else best,
        )


def breed_child(
    opts: GAOptions,
    toolbox: base.Toolbox,
    rng: random.Random,
    population: Sequence[Individual],
    members: PointSet | None = None,
) -> Individual:
    """One steady-state child (:meth:`Engine.child`; also the wide breeder's, ``_ga.breeding``)."""
    members = PointSet(population) if members is None else members
    first, second = (toolbox.clone(p) for p in toolbox.select(population, 2))
    first.bred()
    child = first
    if rng.random() < opts.cxpb:
        child, _ = toolbox.mate(first, second)
    if rng.random() < opts.mutpb or child in members:
        (child,) = toolbox.mutate(child)
    child.result = None
    return child


class PointSet:
    """The points of a population (individuals, or plain dicts as the wide breeder keeps them), for
    membership tests in constant time (a linear scan when a point holds an unhashable value)."""

    def __init__(self, population: Sequence[Mapping[str, Any]]) -> None:
        self._population = population
        try:
            self._keys: set[frozenset[tuple[str, Any]]] | None = {frozenset(p.items()) for p in population}
        except TypeError:
            self._keys = None

    def __contains__(self, point: object) -> bool:
        assert isinstance(point, dict)
        if self._keys is not None:
            try:
                return frozenset(point.items()) in self._keys
            except TypeError:
                pass
        return any(point == dict(p) for p in self._population)


#: per-gene mutation probability unless ``indpb`` is set: EMEWS/CANDLE's ``deap_ga.py`` value
#: (``custom_mutate, indpb=0.5``). The earlier default, 1 / free parameters, mutated one gene per
#: child in 10-D: BBOB f1,3,8,10,15,17,20,21 in 2/5/10-D, 3 instances x 3 seeds, budget 20 x D, it was >= 3x worse
#: than the best competitor on 12 of 24 problems (mean log10 ratio to the best 0.95), 0.5 on 10 (0.76)
DEFAULT_INDPB = 0.5


def make_toolbox(
    options: GAOptions, evaluator: Evaluator, rng: random.Random, step: StepAdaptation | None = None
) -> base.Toolbox:
    """The DEAP toolbox; ``map`` sends a whole batch through ``evaluator.map`` (as EMEWS did)."""
    space = evaluator.space
    free = list(space.free)
    indpb = options.indpb if options.indpb is not None else DEFAULT_INDPB
    toolbox = base.Toolbox()
    toolbox.register("clone", Individual.clone)
    toolbox.register("mate", cx_uniform, indpb=options.cx_indpb, names=free, rng=rng)
    step = step or StepAdaptation(enabled=False)
    toolbox.register("mutate", Mutator(space, indpb, rng, lambda: sigma_scale(options, evaluator) * step.scale))
    toolbox.register("select", sel_tournament, tournsize=options.tournament, rng=rng)
    toolbox.register("evaluate", _evaluated_remotely)
    toolbox.register("map", functools.partial(_queue_map, evaluator))
    return toolbox


def sigma_scale(options: GAOptions, evaluator: Evaluator) -> float:
    """The mutation step's factor now: ``sigma_decay`` to the fraction of the budget spent
    (1 at the start, ``sigma_decay`` at the end)."""
    total = evaluator.submitted + evaluator.remaining
    return options.sigma_decay ** (evaluator.submitted / total) if total else 1.0


def _queue_map(evaluator: Evaluator, func: Any, individuals: Sequence[Individual]) -> list[Result]:
    """``toolbox.map``: one batch out through the evaluator, results back in order (``func`` unused)."""
    return evaluator.map([dict(ind) for ind in individuals])


def _evaluated_remotely(individual: Individual) -> None:
    raise RuntimeError("GA individuals are evaluated by the workers through toolbox.map")
