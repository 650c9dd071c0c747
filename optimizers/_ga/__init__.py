"""Private pieces of the genetic algorithm; the public class is :class:`emews.optimizers.ga.GeneticAlgorithm`.

individual   the dict individual and its DEAP fitness
operators    type-aware mutation, uniform crossover, tournaments, varAnd/varOr (seeded)
failures     the fitness a failed evaluation gets
options      option checking
engine       the DEAP toolbox wired to the evaluator, hall of fame, logbook
generational ``simple`` and ``mu_plus_lambda``: one batch per generation
steady_state ``async``: results inserted as they arrive, workers never wait
archive      JSON output in the experiment directory
"""
