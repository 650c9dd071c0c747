"""The wide GA's breeding and screening of a batch of children, apart from the optimizer thread.

Above ``steady_state.WIDE_WORKERS`` workers with the screen on, the steady-state GA hands its
breeding to :class:`Breeding`, in a model process (``_ga.breeding_process``; in the optimizer's own process
only if that cannot start): one call breeds ``screen`` times the children asked for from a
snapshot of the population, as :func:`~.engine.breed_child` breeds one, and lets the
surrogate (:class:`~.screen.SurrogateScreen`, one fit per batch) pick the ones to evaluate. The
optimizer thread only inserts results and hands children out (see ``_ga.wide``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from emews.core.space import Space

from .engine import DEFAULT_INDPB, PointSet
from .operators import Mutator
from .options import GAOptions
from .screen import WINDOW_HYPERFIT_GROWTH, SurrogateScreen

#: a population member as sent to the breeder: its point and DEAP's weighted fitness
Member = tuple[dict[str, Any], tuple[float, ...]]
#: an evaluation as the screen learns it: the point and the loss the GA selects on (a failure's:
#: its policy's; ``None`` or not finite: learned as the worst loss, see ``_ga.screen``)
Row = tuple[dict[str, Any], "float | None"]
#: a child bred: its point and the weighted fitness of the parent it was cloned from
Child = tuple[dict[str, Any], "tuple[float, ...] | None"]


class Breeding:
    """Batches of screened children (:meth:`breed`), from rows learned by :meth:`learn`."""

    def __init__(self, options: GAOptions, space: Space, seed: Any) -> None:
        self.options = options
        self.space = space
        self.rng = random.Random(f"{seed}-wide")
        self.scale = 1.0
        # the kernel re-optimized each time the evaluations doubled: they arrive by the thousand
        # between batches at width, and the first results come in slowly (a re-optimization at
        # each tenth more was 23 of 45 batches at 100,000 workers, seconds each on a busy node)
        self.screen = SurrogateScreen(options.screen, space, hyperfit_growth=WINDOW_HYPERFIT_GROWTH)
        indpb = options.indpb if options.indpb is not None else DEFAULT_INDPB
        self.mutate = Mutator(space, indpb, self.rng, lambda: self.scale)
        #: batches bred, children bred in all (``screen`` per child picked), children picked
        self.batches = 0
        self.bred = 0
        self.picked = 0

    def learn(self, rows: Sequence[Row]) -> None:
        """The evaluations since the last call, for the screen."""
        for point, loss in rows:
            self.screen.learn(point, loss)

    def breed(self, members: Sequence[Member], n: int, scale: float, factor: int | None = None) -> list[Child]:
        """``n`` children of ``members`` (at least two), the most promising of ``factor`` x ``n``
        (default ``screen`` x ``n``) bred with the mutation step's factor ``scale``.

        Each child as :func:`~.engine.breed_child` breeds one (two parents by tournament, the
        first cloned, uniform crossover with ``cxpb``, mutation with ``mutpb`` or when the child
        repeats a member), on plain dicts and drawn in another order (a wide run is not
        reproducible anyway: results arrive as the workers finish)."""
        self.scale = scale
        opts, rng = self.options, self.rng
        rnd, mutate, free = rng.random, self.mutate, list(self.space.free)
        points = [point for point, _ in members]
        fitness = [wvalues for _, wvalues in members]
        size, rounds = len(points), range(max(opts.tournament, 1))
        known = PointSet(points)

        def parent() -> int:
            return max((int(rnd() * size) for _ in rounds), key=fitness.__getitem__)

        bred: list[dict[str, Any]] = []
        parents: dict[int, tuple[float, ...]] = {}
        factor = self.screen.factor if factor is None else min(max(factor, 1), self.screen.factor)
        for _ in range(n * factor):
            first, second = parent(), parent()
            child = dict(points[first])
            if rnd() < opts.cxpb:
                other = points[second]
                for name in free:
                    if rnd() < opts.cx_indpb:
                        child[name] = other[name]
            if rnd() < opts.mutpb or child in known:
                mutate(child)  # type: ignore[arg-type]  # a plain dict: Mutator only sets keys
            bred.append(child)
            parents[id(child)] = fitness[first]
        picks = self.screen.pick(bred, n) if factor > 1 else bred[:n]  # type: ignore[arg-type]
        self.batches += 1
        self.bred += len(bred)
        self.picked += len(picks)
        return [(dict(child), parents[id(child)]) for child in picks]

    def counters(self) -> dict[str, int]:
        return {
            "batches": self.batches,
            "bred": self.bred,
            "screened": self.picked,
            "fits": self.screen.fits,
            "hyperfits": self.screen.hyperfits,
        }
