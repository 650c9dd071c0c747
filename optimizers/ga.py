"""Genetic algorithm on DEAP, with CANDLE Supervisor semantics, plus an asynchronous steady-state mode.

Options (``optimizer: {name: ga, options: {...}}``): see :class:`GeneticAlgorithm`.

Mutation is type-aware: Gaussian with the dimension's ``sigma`` (default 10%
of its range, in decades for log dimensions, at least 1 for ints), clipped
and rounded; a different value for categorical; a neighbour for ordered;
never for constants. Crossover is uniform.

Budget: the synchronous strategies truncate the generation the budget cannot
pay for in full (its first ``remaining`` new children are evaluated, the rest
dropped) and then end; ``async`` stops submitting when the budget is spent.

After ``run`` the optimizer has ``population`` and ``hall_of_fame`` (lists of
dict individuals with ``.loss``/``.result``) and ``logbook``; in a run with an
experiment directory (``evaluator.exp_dir``) they are also written there as
``ga_population.json`` and ``ga_hall_of_fame.json``.

Resuming (``evaluator.history``): the GA starts from the best individuals of the
earlier runs instead of a random population (see ``_ga.generational`` and
``_ga.steady_state``).
"""

from __future__ import annotations

import math
from typing import Any

from emews.core.evaluator import Evaluator
from emews.core.optimizer import Optimizer

from ._ga import archive
from ._ga.individual import Individual
from ._ga.operators import mutate_value, mutation_sigma
from ._ga.options import GAOptions

__all__ = ["GeneticAlgorithm", "GAOptions", "Individual", "mutate_value", "mutation_sigma"]


class GeneticAlgorithm(Optimizer):
    """DEAP GA: ``simple`` (eaSimple), ``mu_plus_lambda`` (eaMuPlusLambda) or ``async`` (steady state).

    Options (workflow ``optimizer.options``):

    population    individuals per generation (None: about a 25th of the budget, 8 to 100, a
                  multiple of the workers)
    generations   generations after the initial population, DEAP's ``ngen`` (None: until the
                  budget ends)
    cxpb, mutpb   crossover and mutation probabilities (0.5, 0.5)
    indpb         per-gene mutation probability (None: 0.5, as EMEWS/CANDLE's ``deap_ga.py``)
    cx_indpb      per-gene swap probability of uniform crossover (0.5)
    tournament    tournament size (3)
    seed          random seed (None: the run's seed)
    strategy      simple | mu_plus_lambda | async (None: ``simple``, CANDLE's eaSimple; ``async``
                  from 8 workers on)
    mu, lambda_   ``mu_plus_lambda``'s parents and children per generation (default: population)
    elitism       the best individuals of a generation that ``simple`` keeps (1; 0 is CANDLE's
                  eaSimple exactly)
    sigma_decay   1: ``sigma`` fixed, as CANDLE; below 1 the Gaussian mutation step shrinks
                  geometrically with the budget spent, to this fraction of ``sigma`` at its end
                  (it helps on smooth unimodal problems and hurt on Ackley-4, median of 7
                  seeds 11.9 against 6.4 fixed)
    sigma_adapt   true: the step adapts by the 1/5th success rule between a thousandth of
                  ``sigma`` and ``sigma`` (see ``_ga.step``); false: ``sigma`` fixed, as CANDLE (true)
    screen        each generation (in ``async`` each batch of children) is bred this many times
                  over and a Gaussian process fitted on the evaluations so far (failures as
                  ``failure`` scores them, an infinite loss as the worst loss seen) picks the
                  children to evaluate, by lower confidence bound (see ``_ga.screen``); 1: every
                  child as bred, as CANDLE (10)
    failure       what a failed evaluation scores: penalty | worst | mean (penalty)
    penalty       the loss of a failed evaluation under ``failure: penalty`` (inf)
    hall_of_fame  how many of the best individuals are kept (10)
    replacement   ``async``: the individual a child replaces, worst | tournament (worst)
    in_flight     ``async``: evaluations kept outstanding (default: one per worker; above 128
                  workers 1/64 more, queued for the workers that free next; there, with the
                  screen on, children are bred and screened ahead in a model process, see
                  ``_ga.wide``)

    CANDLE Supervisor's GA exactly: ``strategy: simple, elitism: 0, sigma_adapt: false, screen: 1``.
    """

    def __init__(
        self,
        population: int | None = None,
        generations: int | None = None,
        cxpb: float = 0.5,
        mutpb: float = 0.5,
        indpb: float | None = None,
        cx_indpb: float = 0.5,
        tournament: int = 3,
        seed: int | None = None,
        strategy: str | None = None,
        mu: int | None = None,
        lambda_: int | None = None,
        failure: str = "penalty",
        penalty: float = math.inf,
        hall_of_fame: int = 10,
        replacement: str = "worst",
        in_flight: int | None = None,
        elitism: int = 1,
        sigma_decay: float = 1.0,
        sigma_adapt: bool = True,
        screen: int = 10,
    ) -> None:
        self.options = GAOptions(
            population,
            generations,
            cxpb,
            mutpb,
            indpb,
            cx_indpb,
            tournament,
            seed,
            strategy,
            mu,
            lambda_,
            failure,
            penalty,
            hall_of_fame,
            replacement,
            in_flight,
            elitism,
            sigma_decay,
            sigma_adapt,
            screen,
        )
        self.population: list[Individual] = []
        self.hall_of_fame: list[Individual] = []
        self.logbook: Any = None
        #: the mutation step's factor after each generation (``sigma_adapt``; 1 throughout when off)
        self.step_scales: list[float] = []
        #: counters of the last run: the screen's model fits; in a wide ``async`` run (above 128
        #: workers, the screen on) also the breeder's batches, children bred and screened there,
        #: children bred unscreened on the optimizer thread when its stock ran short, where the
        #: model ran (``model_process``) and its time (see ``_ga.wide``)
        self.stats: dict[str, Any] = {}

    def run(self, evaluator: Evaluator) -> None:
        # here, not at the top: ``emews check`` and ``emews launch`` load this class for its
        # options; the engine loads DEAP's tools, numpy and moocore (0.2 s of CPU, 16 MB)
        from ._ga.engine import Engine
        from ._ga.generational import run_generational
        from ._ga.steady_state import run_steady_state

        #: the options this run used, the run-dependent defaults filled in
        self.resolved = self.options.resolved(evaluator.submitted + evaluator.remaining, evaluator.workers)
        engine = Engine(self.resolved, evaluator)
        self.logbook = engine.logbook
        self.stats = {}
        try:
            if self.resolved.strategy == "async":
                self.population = run_steady_state(engine, self.stats)
            else:
                self.population = run_generational(engine)
        finally:
            self.stats.setdefault("fits", engine.screen.fits)
            self.stats.setdefault("hyperfits", engine.screen.hyperfits)
            self.hall_of_fame = list(engine.hall_of_fame)
            self.step_scales = engine.step.history
            archive.save(self.population, self.hall_of_fame, evaluator.exp_dir)

    @property
    def best(self) -> Individual | None:
        """The best successful individual found (``None`` if none succeeded)."""
        return self.hall_of_fame[0] if self.hall_of_fame else None
