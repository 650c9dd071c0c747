"""Worker utilization: synchronous GA vs asynchronous GA vs asynchronous Bayesian optimization.

    python bench/utilization.py [--workers 8] [--budget 160] [--repeats 3] [--median-ms 50] [--sigma 0.8]

Every task sleeps for a log-normal duration (median ``--median-ms``, log-sd
``--sigma``; drawn from the task seed, so every optimizer meets the same
durations at the same repeat) and returns the Ackley value of its point. The
whole runtime runs in one process (``run_in_threads``, inline objectives).

Prints medians over the repeats of
  * busy: sum over results of (finished - started) / (workers * wall time);
  * opt ms/result: the optimizer's own time (its ``run`` minus the time it
    spent waiting in ``evaluator.get``/``map``) per result;
  * wall: seconds per run; best: best Ackley value found.
Random search (no model, always ahead) is the reference for what dispatch allows.
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any, Mapping

HERE = Path(__file__).resolve()


def sleepy(params: Mapping[str, Any], context: Any) -> float:
    """The objective: sleep a log-normal time, return Ackley over the ``x*`` parameters."""
    median, sigma = float(params.get("median_s", 0.05)), float(params.get("sigma", 0.8))
    time.sleep(random.Random(context.seed).lognormvariate(math.log(median), sigma))
    xs = [float(v) for k, v in sorted(params.items()) if k.startswith("x")]
    d = len(xs)
    return (-20.0 * math.exp(-0.2 * math.sqrt(sum(x * x for x in xs) / d))
            - math.exp(sum(math.cos(2 * math.pi * x) for x in xs) / d) + 20.0 + math.e)


def main(argv: list[str] | None = None) -> None:
    import argparse
    import importlib
    import statistics

    from emews.evaluator import Evaluator
    from emews.optimizer import Optimizer
    from emews.runtime.job import RunSpec, run_in_threads
    from emews.runtime.objective import ObjectiveRef
    from emews.space import Constant, Float, Space

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--budget", type=int, default=160)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--median-ms", type=float, default=50.0)
    parser.add_argument("--sigma", type=float, default=0.8)
    parser.add_argument("--population", type=int, default=16)
    parser.add_argument("--dims", type=int, default=4)
    args = parser.parse_args(argv)

    dims: dict[str, Any] = {f"x{i}": Float(-32.768, 32.768, sigma=3.0) for i in range(1, args.dims + 1)}
    dims["median_s"] = Constant(args.median_ms / 1000.0)
    dims["sigma"] = Constant(args.sigma)
    space = Space(dims)

    def ga(strategy: str):
        from emews.optimizers.ga import GeneticAlgorithm
        return lambda seed: GeneticAlgorithm(population=args.population, seed=seed, strategy=strategy)

    def optional(ref: str):
        module, _, name = ref.partition(":")
        try:
            cls = getattr(importlib.import_module(module), name)
        except Exception as exc:  # being written elsewhere, or its dependencies missing
            return None, f"{type(exc).__name__}: {exc}"
        return (lambda seed: cls(seed=seed)), None

    bayes, bayes_error = optional("emews.optimizers.bayes:BayesianOptimizer")
    rand, _ = optional("emews.optimizers.random:RandomSearch")
    contenders = [("GA simple (sync)", ga("simple")), ("GA async (steady state)", ga("async")),
                  ("Bayes async", bayes), ("random (reference)", rand)]

    class Timed(Optimizer):
        """Wraps an optimizer: time inside ``run`` minus time waiting on the evaluator."""

        def __init__(self, inner: Optimizer) -> None:
            self.inner, self.waited, self.ran, self.results = inner, 0.0, 0.0, []

        def run(self, evaluator: Evaluator) -> None:
            get, emap = evaluator.get, evaluator.map

            def timed(fn):
                def call(*a: Any, **k: Any):
                    t = time.perf_counter()
                    try:
                        out = fn(*a, **k)
                    finally:
                        self.waited += time.perf_counter() - t
                    self.results.extend(out)
                    return out
                return call

            evaluator.get, evaluator.map = timed(get), timed(emap)
            start = time.perf_counter()
            try:
                self.inner.run(evaluator)
            finally:
                self.ran = time.perf_counter() - start

    print(f"{args.workers} workers, budget {args.budget}, task time log-normal "
          f"(median {args.median_ms:g} ms, sigma {args.sigma:g}), {args.repeats} repeats, medians\n")
    header = f"{'optimizer':<26}{'busy':>7}{'opt ms/result':>15}{'wall s':>9}{'best':>8}"
    print(header)
    print("-" * len(header))
    for label, factory in contenders:
        if factory is None:
            print(f"{label:<26}{'n/a':>7}{'n/a':>15}{'n/a':>9}{'n/a':>8}")
            continue
        busy, per_result, wall, best = [], [], [], []
        for repeat in range(args.repeats):
            box: dict[str, Timed] = {}

            def make(factory=factory, seed=repeat) -> Optimizer:
                box["t"] = Timed(factory(seed))
                return box["t"]

            spec = RunSpec(space=space, make_optimizer=make, objective=ObjectiveRef(str(HERE), "sleepy"),
                           budget=args.budget, seed=repeat, isolation="inline", show_progress=False)
            summary = run_in_threads(spec, workers=args.workers)
            if summary.error is not None:
                raise SystemExit(f"{label}: the run failed: {summary.error}")
            timed = box["t"]
            done = [r for r in timed.results if r.started is not None and r.finished is not None]
            busy.append(sum(r.finished - r.started for r in done) / (args.workers * summary.elapsed))
            per_result.append(1000.0 * (timed.ran - timed.waited) / max(len(timed.results), 1))
            wall.append(summary.elapsed)
            best.append(summary.best.objective if summary.best else math.nan)
        med = statistics.median
        print(f"{label:<26}{med(busy):>7.2f}{med(per_result):>15.2f}{med(wall):>9.2f}{med(best):>8.2f}")
    if bayes_error:
        print(f"\nBayes: n/a ({bayes_error})")


if __name__ == "__main__":
    main()
