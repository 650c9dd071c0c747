"""Optimizer quality on public test functions, every optimizer with its defaults, through the
real emews runtime (worker threads, inline objective).

Problems: the project's four (Branin, Hartmann-6, Ackley-5, a mixed int/log/ordered/categorical
problem) and the COCO BBOB noiseless suite (``coco-experiment``: functions, dimensions and
instances to choose, budget 20 x D). Baselines: Optuna TPE (univariate and multivariate) and
CMA-ES (``emews.contrib.optuna``), random search. Every optimizer gets the same budget, workers
and seeds and runs with its defaults; ``--tuned`` adds labelled columns with tuned settings.

Per problem it prints each optimizer's median precision (best value found minus the optimum;
BBOB: over instances x seeds), then per optimizer its average rank over the problems and how
often it was at least 3x worse than the best optimizer of that problem.

    python bench/quality.py                                  # the four problems, free tasks
    python bench/quality.py --timed                          # tasks take 0.2-1 s
    python bench/quality.py --suite bbob --functions 1,8,15,21 --dims 2,5 --instances 1-2
    python bench/quality.py --suite bbob                     # f1,3,8,10,15,17,20,21 x 2,5,10-D x 5
    python bench/quality.py --suite mixint --dims 5,10       # COCO bbob-mixint, same functions
    python bench/quality.py --suite hpo --seeds 5            # two scikit-learn searches, 40 evaluations
    python bench/quality.py --timing                         # optimizer time per result at 1,000 obs.
    python bench/quality.py --optimizers ga --save ga.json   # then: --rank all.json ga.json [--markdown]

Run it under ``nice`` on a shared machine; the figures are medians, ranks need no timing.
Medians need runs: on Gallagher (f21) a run finds the global peak's basin or does not, and 5
runs per problem (instances 1-5, one seed) flagged 3x differences that 30 runs (``--seeds 6``,
the README's tables) do not show.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

from emews.core.evaluator import EvaluatorObserver
from emews.job.wiring import RunSpec, run_in_threads
from emews.objective.function import ObjectiveRef, import_objective_module
from emews.core.optimizer import Optimizer

PROBLEMS_FILE = str(Path(__file__).with_name("problems.py"))
problems = import_objective_module(PROBLEMS_FILE)

CLASSIC = {"branin": 40, "hartmann6": 80, "ackley5": 80, "mixed": 50}
#: evaluations of each scikit-learn search (``--suite hpo``)
HPO_BUDGET = 40
BBOB_FUNCTIONS = [1, 3, 8, 10, 15, 17, 20, 21]
#: the baselines the issue's targets compare with (the best of them per problem)
COMPETITORS = ("tpe", "tpe-mv", "cmaes")
#: precision below this counts as solved (ratios of two solved runs are not "3x worse")
SOLVED = 1e-8

Factory = Callable[[int], Optimizer]


def _factories(tuned: bool) -> dict[str, Factory]:
    """Optimizer name -> factory(seed), each with its defaults (tuned ones labelled)."""
    from emews.contrib.optuna import OptunaSampler
    from emews.optimizers.bayes import BayesianOptimizer
    from emews.optimizers.ga import GeneticAlgorithm
    from emews.optimizers.hyperspace import HyperSpace
    from emews.optimizers.random import RandomSearch

    table: dict[str, Factory] = {
        "random": lambda s: RandomSearch(seed=s),
        "bayes": lambda s: BayesianOptimizer(seed=s),
        "hyperspace": lambda s: HyperSpace(seed=s),
        "ga": lambda s: GeneticAlgorithm(seed=s),
        "tpe": lambda s: OptunaSampler(seed=s, sampler="TPESampler"),
        "tpe-mv": lambda s: OptunaSampler(seed=s, sampler="TPESampler", multivariate=True),
        "cmaes": lambda s: OptunaSampler(seed=s, sampler="CmaEsSampler"),
    }
    if tuned:
        table["bayes(tuned: speculate false)"] = lambda s: BayesianOptimizer(seed=s, speculate=False)
    return table


def _mbo(seed: int) -> Optimizer:
    from emews.optimizers.mbo import MBO
    return MBO(seed=seed)


class _Recorder(EvaluatorObserver):
    """The losses of a run, in the order the optimizer received them."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def received(self, results: Any) -> None:
        self.losses.extend(r.loss for r in results)


def run_one(name: str, factory: Factory, seed: int, budget: int, workers: int, timed: bool) -> dict[str, Any]:
    """One run of ``factory(seed)`` on problem ``name``: its precision and wall time."""
    problem = problems.problem(name)
    recorder = _Recorder()
    spec = RunSpec(space=problem.space, make_optimizer=lambda: factory(seed),
                   objective=ObjectiveRef(PROBLEMS_FILE, "timed" if timed else "free"),
                   budget=budget, seed=seed, isolation="inline", show_progress=False, observers=(recorder,))
    t0 = time.perf_counter()
    summary = run_in_threads(spec, workers)
    if summary.error is not None:
        raise RuntimeError(f"{name} seed {seed}: {summary.error}") from summary.error
    best = min(recorder.losses, default=math.inf)
    return {"precision": max(best - problem.optimum(), 0.0), "time": time.perf_counter() - t0}


def _instances(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def benchmark(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Problem -> optimizer -> median precision; prints one row per optimizer and problem."""
    table = _factories(args.tuned)
    if args.mbo:
        table["mbo"] = _mbo
    names = [n for n in args.optimizers.split(",") if n] if args.optimizers else list(table)
    if args.suite in ("bbob", "mixint"):
        suite, prefix = ("bbob", "") if args.suite == "bbob" else ("bbob-mixint", "mixint-")
        groups = {f"{prefix}f{f}-{d}d": (problems.bbob_names([f], [d], _instances(args.instances), suite), 20 * d)
                  for f in [int(v) for v in args.functions.split(",")] for d in [int(v) for v in args.dims.split(",")]}
    elif args.suite == "hpo":
        groups = {p: ([p], HPO_BUDGET) for p in problems.HPO}
    else:
        groups = {p: ([p], CLASSIC[p]) for p in args.problems.split(",")}
    print(f"# {args.suite}: {len(groups)} problems, seeds {args.seeds} per instance, {args.workers} workers, "
          f"{'tasks of 0.2-1 s' if args.timed else 'free tasks'}; defaults only"
          + ("; tuned columns labelled" if args.tuned else ""))
    print(f"{'problem':<12} {'optimizer':<30} {'median precision':>16} {'s/run':>7}")
    medians: dict[str, dict[str, float]] = {}
    for group, (instances, budget) in groups.items():
        medians[group] = {}
        for name in names:
            runs = [run_one(inst, table[name], seed, budget, args.workers, args.timed)
                    for inst in instances for seed in range(args.seeds)]
            medians[group][name] = statistics.median(r["precision"] for r in runs)
            print(f"{group:<12} {name:<30} {medians[group][name]:>16.4g} "
                  f"{statistics.median(r['time'] for r in runs):>7.1f}", flush=True)
    return medians


def ranks(medians: dict[str, dict[str, float]]) -> None:
    """Average rank (1 = best; ties share) and the count of problems >= 3x worse than the best."""
    names = list(next(iter(medians.values())))
    rank_sum = dict.fromkeys(names, 0.0)
    worse = dict.fromkeys(names, 0)
    for row in medians.values():
        values = sorted(row.values())
        best = max(values[0], SOLVED)
        for name, value in row.items():
            below, ties = sum(v < value for v in values), sum(v == value for v in values)
            rank_sum[name] += below + (ties + 1) / 2
            worse[name] += max(value, SOLVED) >= 3 * best
    print(f"\n{'optimizer':<30} {'average rank':>12} {'>=3x worse than best':>21}  (of {len(medians)} problems)")
    for name in sorted(names, key=lambda n: rank_sum[n]):
        print(f"{name:<30} {rank_sum[name] / len(medians):>12.2f} {worse[name]:>21}")
    if "bayes" in names and "tpe" in names:
        far = [p for p, row in medians.items() if max(row["bayes"], SOLVED) >= 3 * max(row["tpe"], SOLVED)]
        print(f"bayes >= 3x worse than TPE's median on: {', '.join(far) or 'none'}")
    rivals = [n for n in COMPETITORS if n in names]
    for name in (n for n in names if rivals and n not in COMPETITORS and n != "random"):
        far = [p for p, row in medians.items()
               if max(row[name], SOLVED) >= 3 * max(min(row[r] for r in rivals), SOLVED)]
        print(f"{name} within 3x of the best competitor ({', '.join(rivals)}) on "
              f"{len(medians) - len(far)} of {len(medians)}; not on: {', '.join(far) or 'none'}")
    if "random" in names:
        for name in (n for n in names if n != "random"):
            lost = [p for p, row in medians.items() if row[name] > row["random"]]
            print(f"{name} worse than random on: {', '.join(lost) or 'none'}")


def markdown(medians: dict[str, dict[str, float]]) -> None:
    """The medians as a Markdown table (bold: best of the row), for the README."""
    names = list(next(iter(medians.values())))
    print("| problem | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for group, row in medians.items():
        best = min(row.values())
        cells = [f"**{v:.3g}**" if v == best else f"{v:.3g}" for v in (row[n] for n in names)]
        print(f"| {group} | " + " | ".join(cells) + " |")


def _cpu_seconds() -> float:
    """CPU seconds of this process (all threads) and of its live children (a model process),
    the children counted only where ``psutil`` is installed."""
    total = time.process_time()
    try:
        import psutil
    except ImportError:
        return total
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def timing(n: int = 1000, workers: int = 4, mbo: bool = False) -> None:
    """Optimizer time per result around ``n`` observations (free objective, defaults): the wall
    time between results ``n - 100`` and ``n + 100`` (the objective costs nothing, so it is all
    the optimizer's and the runtime's), and the CPU time spent meanwhile (this process and its
    model process: what a loaded machine does not inflate), for every model-based optimizer
    (the GA's children are screened by a model)."""
    from emews.optimizers.bayes import BayesianOptimizer
    from emews.optimizers.ga import GeneticAlgorithm
    from emews.optimizers.hyperspace import HyperSpace

    lo, hi = n - 100, n + 99
    makers: list[tuple[str, Callable[[], Optimizer]]] = [("bayes", lambda: BayesianOptimizer(seed=0)),
                                                         ("hyperspace", lambda: HyperSpace(seed=0)),
                                                         ("ga", lambda: GeneticAlgorithm(seed=0))]
    if mbo:
        makers.append(("mbo", lambda: _mbo(0)))
    for label, make in makers:
        stamps: list[float] = []
        cpu: dict[int, float] = {}

        class _Stamp(EvaluatorObserver):
            def received(self, results: Any) -> None:
                for _ in results:
                    stamps.append(time.perf_counter())
                    if len(stamps) - 1 in (lo, hi):
                        cpu[len(stamps) - 1] = _cpu_seconds()

        problem = problems.problem("hartmann6")
        spec = RunSpec(space=problem.space, make_optimizer=make, objective=ObjectiveRef(PROBLEMS_FILE, "free"),
                       budget=n + 100, isolation="inline", show_progress=False, observers=(_Stamp(),))
        t0 = time.perf_counter()
        run_in_threads(spec, workers)
        total = time.perf_counter() - t0
        print(f"{label} (defaults) on hartmann6, {workers} workers, free objective, observations {lo} to {hi}: "
              f"{1000 * (stamps[hi] - stamps[lo]) / (hi - lo):.1f} ms wall per result, "
              f"{1000 * (cpu[hi] - cpu[lo]) / (hi - lo):.1f} ms CPU per result; "
              f"{1000 * total / (n + 100):.1f} ms wall per result over the run; "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", choices=("classic", "bbob", "mixint", "hpo"), default="classic",
                    help="the project's four problems, COCO bbob, COCO bbob-mixint (dims 5, 10, ...), "
                         "or two scikit-learn searches")
    ap.add_argument("--problems", default=",".join(CLASSIC), help="classic problems")
    ap.add_argument("--functions", default=",".join(map(str, BBOB_FUNCTIONS)), help="BBOB function numbers")
    ap.add_argument("--dims", default="2,5,10", help="BBOB dimensions")
    ap.add_argument("--instances", default="1-5", help="BBOB instances, e.g. 1-5")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per problem instance (3; the README's BBOB table: 6)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--optimizers", help="comma-separated subset (default: all)")
    ap.add_argument("--timed", action="store_true", help="tasks take 0.2-1 s instead of nothing")
    ap.add_argument("--tuned", action="store_true", help="add labelled tuned variants")
    ap.add_argument("--mbo", action="store_true", help="add the R-based mbo (slow to start)")
    ap.add_argument("--timing", action="store_true", help="only: optimizer time per result at 1,000 observations")
    ap.add_argument("--save", help="also write the medians to this JSON file")
    ap.add_argument("--markdown", action="store_true", help="also print the medians as a Markdown table")
    ap.add_argument("--rank", nargs="+", metavar="JSON", help="only: rank the optimizers of saved runs together")
    args = ap.parse_args(argv)
    if args.timing:
        timing(mbo=args.mbo)
        return 0
    if args.rank:
        merged: dict[str, dict[str, float]] = {}
        for path in args.rank:
            for group, row in json.loads(Path(path).read_text()).items():
                merged.setdefault(group, {}).update(row)
        ranks(merged)
        if args.markdown:
            markdown(merged)
        return 0
    medians = benchmark(args)
    if args.save:
        Path(args.save).write_text(json.dumps(medians, indent=1) + "\n")
    ranks(medians)
    if args.markdown:
        markdown(medians)
    return 0


if __name__ == "__main__":
    sys.exit(main())
