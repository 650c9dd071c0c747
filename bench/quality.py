"""Optimizer quality on standard test functions, through the real emews runtime.

Every optimizer gets the same budget, the same number of workers (the batch size) and the same
seeds on Branin (2-d), Hartmann-6, Ackley-5 and a mixed int/log-float/ordered/categorical
problem (``emews.objectives.benchmarks``). Optuna's TPE runs through the same runtime as an
``AskTellOptimizer`` (``emews.contrib.optuna``). Prints, per problem, the median best value and
the median number of evaluations to reach the problem's target (over runs that reached it;
``hits`` says how many did), then which optimizer wins per problem.

    python bench/quality.py            # 5 seeds, 4 workers, a few minutes on 2 cores
    python bench/quality.py --quick    # 2 seeds, smaller budgets
    python bench/quality.py --no-mbo --optimizers bayes,tpe,random
    python bench/quality.py --timing   # also: bayes optimizer time per result at 1,000 observations

The objectives cost nothing here, so ``bayes`` runs with ``lookahead: 0, speculate: false``:
each batch is chosen with every result back so far, as with a costly objective (its defaults
trade some of that for throughput when results arrive faster than the model refits).
"""

from __future__ import annotations

import argparse
import importlib
import math
import statistics
import sys
import time
from typing import Any, Callable

from emews.evaluator import EvaluatorObserver
from emews.objectives.benchmarks import PROBLEMS
from emews.optimizer import Optimizer
from emews.job import RunSpec, run_in_threads
from emews.objective import ObjectiveRef

BUDGETS = {"branin": 40, "hartmann6": 80, "ackley5": 80, "mixed": 50}
QUICK_BUDGETS = {"branin": 30, "hartmann6": 50, "ackley5": 50, "mixed": 30}


def _load(ref: str) -> type | None:
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except Exception as exc:  # noqa: BLE001 - an optimizer still being written: report n/a
        print(f"# {ref}: not available ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def optimizers(names: list[str], workers: int) -> dict[str, Callable[[int, int], Optimizer] | None]:
    """name -> factory(seed, budget), or None where the optimizer cannot be imported."""
    table: dict[str, Any] = {}
    for name in names:
        if name == "random":
            cls = _load("emews.optimizers.random:RandomSearch")
            table[name] = cls and (lambda s, b, cls=cls: cls(seed=s, backlog=1))
        elif name == "bayes":
            cls = _load("emews.optimizers.bayes:BayesianOptimizer")
            table[name] = cls and (lambda s, b, cls=cls: cls(seed=s, n_initial_points=10, lookahead=0,
                                                            speculate=False))
        elif name == "tpe":
            cls = _load("emews.contrib.optuna:OptunaSampler")
            table[name] = cls and (lambda s, b, cls=cls: cls(seed=s, sampler="TPESampler",
                                                            n_startup_trials=10))
        elif name == "ga":
            cls = _load("emews.optimizers.ga:GeneticAlgorithm")
            # steady state, population ~ budget/5: the GA's best setting for small budgets
            table[name] = cls and (lambda s, b, cls=cls: cls(seed=s, population=max(8, b // 5),
                                                            strategy="async", in_flight=workers))
        elif name == "mbo":
            cls = _load("emews.optimizers.mbo:MBO")
            table[name] = cls and (lambda s, b, cls=cls: cls(seed=s, n_initial=10))
        else:
            raise SystemExit(f"unknown optimizer {name!r}; use random, bayes, tpe, ga, mbo")
    return table


class _Recorder(Optimizer):
    """Runs ``inner`` and keeps the losses in the order results reached the optimizer."""

    def __init__(self, inner: Optimizer) -> None:
        self.inner, self.losses = inner, []

    def run(self, evaluator: Any) -> None:
        get, emap = evaluator.get, evaluator.map

        def traced_get(*a: Any, **k: Any) -> list:
            out = get(*a, **k)
            self.losses.extend(r.loss for r in out)
            return out

        def traced_map(points: Any) -> list:
            out = emap(points)
            self.losses.extend(r.loss for r in out)
            return out

        evaluator.get, evaluator.map = traced_get, traced_map
        self.inner.run(evaluator)


def run_one(problem: str, factory: Callable[[int, int], Optimizer], seed: int, budget: int,
            workers: int) -> dict[str, Any]:
    p = PROBLEMS[problem]
    rec = _Recorder(factory(seed, budget))
    spec = RunSpec(space=p["space"], make_optimizer=lambda: rec,
                   objective=ObjectiveRef("emews.objectives.benchmarks", problem),
                   budget=budget, seed=seed, isolation="inline", show_progress=False)
    t0 = time.perf_counter()
    summary = run_in_threads(spec, workers)
    elapsed = time.perf_counter() - t0
    if summary.error is not None:
        raise RuntimeError(f"{problem} seed {seed}: {summary.error}") from summary.error
    best, reached = math.inf, None
    for i, loss in enumerate(rec.losses, 1):
        best = min(best, loss)
        if reached is None and loss <= p["target"]:
            reached = i
    return {"best": best, "reached": reached, "time": elapsed, "n": len(rec.losses)}


def _fmt(x: float | None, digits: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{digits}g}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 seeds and smaller budgets")
    ap.add_argument("--seeds", type=int, help="seeds per optimizer and problem (5; 2 with --quick)")
    ap.add_argument("--workers", type=int, default=4, help="workers = batch size (4)")
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--optimizers", default="random,bayes,tpe,ga,mbo")
    ap.add_argument("--no-mbo", action="store_true", help="skip the R-based mbo (slow to start)")
    ap.add_argument("--timing", action="store_true",
                    help="also measure bayes optimizer time per result at 1,000 observations")
    args = ap.parse_args(argv)
    seeds = args.seeds or (2 if args.quick else 5)
    budgets = QUICK_BUDGETS if args.quick else BUDGETS
    names = [n for n in args.optimizers.split(",") if n and not (args.no_mbo and n == "mbo")]
    problems = args.problems.split(",")
    table = optimizers(names, args.workers)

    print(f"# {seeds} seeds, {args.workers} workers; budgets: "
          + ", ".join(f"{p} {budgets[p]}" for p in problems))
    header = f"{'problem':<10} {'optimizer':<8} {'median best':>12} {'optimum':>9} {'target':>7} " \
             f"{'evals to target':>15} {'hits':>5} {'s/run':>6}"
    print(header)
    print("-" * len(header))
    medians: dict[tuple[str, str], float] = {}
    for problem in problems:
        p = PROBLEMS[problem]
        for name in names:
            factory = table[name]
            if factory is None:
                print(f"{problem:<10} {name:<8} {'n/a':>12}")
                continue
            runs = [run_one(problem, factory, seed, budgets[problem], args.workers) for seed in range(seeds)]
            best = statistics.median(r["best"] for r in runs)
            hit = [r["reached"] for r in runs if r["reached"] is not None]
            # median over all runs, counting a miss as "more than the budget"
            evals = statistics.median([r["reached"] or math.inf for r in runs])
            evals_txt = f">{budgets[problem]}" if math.isinf(evals) else f"{evals:g}"
            medians[(problem, name)] = best
            print(f"{problem:<10} {name:<8} {best:>12.4f} {p['optimum']:>9.4g} {p['target']:>7g} "
                  f"{evals_txt:>15} {len(hit):>2}/{len(runs):<2} {statistics.mean(r['time'] for r in runs):>6.1f}",
                  flush=True)
        print()
    if "bayes" in names:
        for rival in ("random", "tpe", "ga", "mbo"):
            if rival not in names or table.get(rival) is None or table.get("bayes") is None:
                continue
            wins = [pr for pr in problems if medians[(pr, "bayes")] <= medians[(pr, rival)]]
            print(f"bayes matches or beats {rival} (median best) on {len(wins)}/{len(problems)}: "
                  + (", ".join(wins) or "none"))
    if args.timing:
        timing()
    return 0


def timing(n: int = 1000, workers: int = 4) -> None:
    """Wall time per result around ``n`` observations with a free objective (bayes defaults)."""
    from emews.optimizers.bayes import BayesianOptimizer

    stamps: list[float] = []
    budget = n + 100
    opt = BayesianOptimizer(seed=0)

    class _Stamp(EvaluatorObserver):
        def received(self, results: Any) -> None:
            stamps.extend(time.perf_counter() for _ in results)

    spec = RunSpec(space=PROBLEMS["hartmann6"]["space"], make_optimizer=lambda: opt,
                   objective=ObjectiveRef("emews.objectives.benchmarks", "hartmann6"),
                   budget=budget, isolation="inline", show_progress=False, observers=(_Stamp(),))
    t0 = time.perf_counter()
    run_in_threads(spec, workers)
    total = time.perf_counter() - t0
    lo, hi = n - 100, min(n + 99, len(stamps) - 1)
    per = (stamps[hi] - stamps[lo]) / (hi - lo)
    print(f"\nbayes (defaults, GP) on hartmann6, {workers} workers, free objective: "
          f"{1000 * per:.1f} ms per result between observations {lo} and {hi}; "
          f"{1000 * total / budget:.1f} ms per result over all {budget}; "
          f"{opt.stats['fits']} fits, {opt.stats['hyperfits']} hyperparameter fits, "
          f"model thread busy {opt.stats['model_time']:.0f} s of {total:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
