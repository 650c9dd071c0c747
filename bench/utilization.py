"""Worker utilization: synchronous GA vs asynchronous GA vs asynchronous Bayesian optimization.

    python bench/utilization.py [--workers 8] [--budget 200] [--repeats 3] [--median-ms 50] [--sigma 0.8]
                                [--only bayes,random]

Each contender runs as a real MPI job, as emews runs: the driver starts
``mpiexec -n WORKERS+1 python bench/utilization.py --child NAME ...`` with the
``mpiexec`` next to this Python; rank 0 runs the optimizer and the distributor
(``run_optimizer_rank``), the other ranks are workers (``run_worker_rank``,
inline objectives, no results store). Rank 0 prints one ``RESULT {json}`` line.
Repeats run the contenders in turn, so machine noise falls on all of them alike.

Every task sleeps for a log-normal duration (median ``--median-ms``, log-sd
``--sigma``; drawn from the task seed, so every optimizer meets the same
durations at the same repeat) and returns the Ackley value of its point. The
tasks sleep, so more ranks than cores is fine.

Contenders: GA ``strategy: simple`` (synchronous generations), GA
``strategy: async`` (steady state), ``bayes`` with its default options (the model
on a thread until fits get slow), ``bayes`` with ``model_process: true`` (the model
in a child process from the start), and random search (no model, always ahead:
what dispatch allows). ``--bayes-options`` passes options to both bayes contenders.

Prints medians over the repeats of
  * busy (run): sum over results of (finished - started) / (workers x wall time
    of the optimizer's ``run``);
  * busy (steady): the same, clipped to the steady-state window from the first
    task's start to the moment the last evaluation of the budget was submitted:
    neither the optimizer's one-time start-up nor the drain at the end of a
    finite budget (the last tasks finishing one by one) is in it;
  * idle: opt / dispatch: the steady window's idle worker-time (as a fraction of all
    worker-time) split by cause: no task was waiting to start (the optimizer had not
    submitted one yet), or one was (the time to reach the worker: dispatch latency);
  * start-up ms: from the start of ``run`` to the first task's start (building
    the model, the initial design), a one-time cost shown on its own;
  * opt ms/result: the optimizer's own time on its main thread (its ``run``
    minus the time it spent waiting in ``evaluator.get``/``map``) per result;
    ``model ms/result``: time of bayes's model thread (or process) per result
    (beside dispatch, not in its way);
  * wall: seconds of ``run``; best: best Ackley value found (optimum 0).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping

HERE = Path(__file__).resolve()
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")

CONTENDERS = {  # key -> label
    "ga-sync": "GA simple (sync)",
    "ga-async": "GA async (steady state)",
    "bayes": "Bayes async (defaults)",
    "bayes-process": "Bayes, model process (true)",
    "random": "random (reference)",
}


def sleepy(params: Mapping[str, Any], context: Any) -> float:
    """The objective: sleep a log-normal time, return Ackley over the ``x*`` parameters."""
    median, sigma = float(params.get("median_s", 0.05)), float(params.get("sigma", 0.8))
    time.sleep(random.Random(context.seed).lognormvariate(math.log(median), sigma))
    xs = [float(v) for k, v in sorted(params.items()) if k.startswith("x")]
    d = len(xs)
    return (-20.0 * math.exp(-0.2 * math.sqrt(sum(x * x for x in xs) / d))
            - math.exp(sum(math.cos(2 * math.pi * x) for x in xs) / d) + 20.0 + math.e)


# --- child (one MPI job) ----------------------------------------------------------------

def _factory(name: str, args: argparse.Namespace) -> Callable[[int], Any]:
    if name in ("ga-sync", "ga-async"):
        from emews.optimizers.ga import GeneticAlgorithm
        strategy = "simple" if name == "ga-sync" else "async"
        return lambda seed: GeneticAlgorithm(population=args.population, seed=seed, strategy=strategy)
    if name in ("bayes", "bayes-process"):
        from emews.optimizers.bayes import BayesianOptimizer
        options = dict(json.loads(args.bayes_options), seed=None)
        if name == "bayes-process":
            options["model_process"] = True
        return lambda seed: BayesianOptimizer(**dict(options, seed=seed))
    from emews.optimizers.random import RandomSearch
    return lambda seed: RandomSearch(seed=seed)


def child(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from emews.core.evaluator import Evaluator
    from emews.core.optimizer import Optimizer
    from emews.job.wiring import RunSpec, run_optimizer_rank, run_worker_rank
    from emews.objective.function import ObjectiveRef
    from emews.runtime.transport import MPITransport
    from emews.core.space import Constant, Float, Space

    comm = MPI.COMM_WORLD
    transport = MPITransport(comm)
    dims: dict[str, Any] = {f"x{i}": Float(-32.768, 32.768, sigma=3.0) for i in range(1, args.dims + 1)}
    dims["median_s"] = Constant(args.median_ms / 1000.0)
    dims["sigma"] = Constant(args.sigma)
    space = Space(dims)
    workers = comm.Get_size() - 1

    class Timed(Optimizer):
        """Wraps an optimizer: its time in ``run`` minus its time waiting on the evaluator,
        the results it received, and when the last evaluation of the budget was submitted."""

        def __init__(self, inner: Optimizer) -> None:
            self.inner, self.waited, self.ran, self.results = inner, 0.0, 0.0, []
            self.t_start = self.t_last_put = self.t_end = math.nan

        def run(self, evaluator: Evaluator) -> None:
            get, emap, put = evaluator.get, evaluator.map, evaluator.put

            def timed(fn: Callable[..., list]) -> Callable[..., list]:
                def call(*a: Any, **k: Any) -> list:
                    t = time.perf_counter()
                    try:
                        out = fn(*a, **k)
                    finally:
                        self.waited += time.perf_counter() - t
                    self.results.extend(out)
                    return out
                return call

            def put_stamped(points: Any) -> list[int]:
                ids = put(points)
                if evaluator.remaining == 0 and math.isnan(self.t_last_put):
                    self.t_last_put = time.time()
                return ids

            def map_stamped(points: Any) -> list:
                points = list(points)
                if len(points) == evaluator.remaining and math.isnan(self.t_last_put):
                    self.t_last_put = time.time()
                return emap(points)

            evaluator.get, evaluator.map, evaluator.put = timed(get), timed(map_stamped), put_stamped
            self.t_start = time.time()
            start = time.perf_counter()
            try:
                self.inner.run(evaluator)
            finally:
                self.ran = time.perf_counter() - start
                self.t_end = time.time()

    spec = RunSpec(space=space, make_optimizer=lambda: None,  # replaced on rank 0
                   objective=ObjectiveRef(str(HERE), "sleepy"), budget=args.budget, seed=args.seed,
                   isolation="inline", show_progress=False)
    if comm.Get_rank() != 0:
        run_worker_rank(spec, transport, [])
        return
    timed = Timed(_factory(args.child, args)(args.seed))
    spec.make_optimizer = lambda: timed
    summary = run_optimizer_rank(spec, transport, list(range(1, comm.Get_size())))
    if summary.error is not None:
        raise SystemExit(f"{args.child}: the run failed: {summary.error}")
    done = [r for r in timed.results if r.started is not None and r.finished is not None]
    t0, t1 = timed.t_start, timed.t_end
    t_first = min((r.started for r in done), default=t0)
    t_steady = timed.t_last_put if not math.isnan(timed.t_last_put) else t1

    def busy(lo: float, hi: float) -> float:
        used = sum(max(0.0, min(r.finished, hi) - max(r.started, lo)) for r in done)
        return used / (workers * max(hi - lo, 1e-9))

    idle_opt, idle_dispatch = idle_causes(done, workers, t_first, t_steady)
    stats = getattr(timed.inner, "stats", {}) or {}
    model = stats.get("model_time")
    report = {
        "busy_run": busy(t0, t1), "busy_steady": busy(t_first, t_steady), "steady_s": t_steady - t_first,
        "startup_ms": 1000.0 * (t_first - t0), "idle_opt": idle_opt, "idle_dispatch": idle_dispatch,
        "opt_ms": 1000.0 * (timed.ran - timed.waited) / max(len(timed.results), 1),
        "model_ms": None if model is None else 1000.0 * model / max(len(timed.results), 1),
        "wall": t1 - t0, "best": summary.best.objective if summary.best else math.nan,
        "results": len(timed.results),
        "stats": {k: v for k, v in stats.items() if isinstance(v, (int, float, str))},
    }
    print("RESULT " + json.dumps(report), flush=True)


def idle_causes(done: list[Any], workers: int, lo: float, hi: float) -> tuple[float, float]:
    """Idle worker-time in ``[lo, hi]`` as fractions of all worker-time, split into waiting for
    the optimizer (no submitted task was waiting to start) and dispatch (one was: the gap is
    the time it took to reach the worker)."""
    submits = sorted(r.submitted for r in done if r.submitted is not None)
    starts = sorted(r.started for r in done)

    def waiting(t: float) -> int:   # tasks submitted by ``t`` and not started by then
        return bisect.bisect_right(submits, t) - bisect.bisect_right(starts, t)

    by_rank: dict[Any, list[Any]] = {}
    for r in done:
        by_rank.setdefault(r.rank, []).append(r)
    opt = dispatch = 0.0
    for runs in by_rank.values():
        runs.sort(key=lambda r: r.started)
        free = lo
        for r in runs:
            a, b = max(free, lo), min(r.started, hi)
            if b > a:
                if waiting(a) > 0:
                    dispatch += b - a
                else:   # idle until a task was submitted, then in dispatch
                    nxt = submits[min(bisect.bisect_right(submits, a), len(submits) - 1)]
                    split = min(max(nxt, a), b)
                    opt += split - a
                    dispatch += b - split
            free = max(free, r.finished)
    total = workers * max(hi - lo, 1e-9)
    return opt / total, dispatch / total


# --- driver ---------------------------------------------------------------------------

def run_child(name: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [MPIEXEC, "-n", str(args.workers + 1), sys.executable, str(HERE), "--child", name,
           "--seed", str(seed), "--budget", str(args.budget), "--median-ms", str(args.median_ms),
           "--sigma", str(args.sigma), "--population", str(args.population), "--dims", str(args.dims),
           "--bayes-options", args.bayes_options]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{name} (seed {seed}) failed with exit status {proc.returncode}:\n{proc.stdout}")
    return json.loads(lines[-1][7:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--median-ms", type=float, default=50.0)
    parser.add_argument("--sigma", type=float, default=0.8)
    parser.add_argument("--population", type=int, default=16, help="GA population")
    parser.add_argument("--dims", type=int, default=4, help="Ackley dimensions")
    parser.add_argument("--bayes-options", default="{}",
                        help='options for the bayes contenders, as JSON (e.g. \'{"max_gp_points": 600}\')')
    parser.add_argument("--only", default=",".join(CONTENDERS),
                        help="contenders to run: " + ", ".join(CONTENDERS))
    parser.add_argument("-v", "--verbose", action="store_true", help="print every run")
    parser.add_argument("--child", choices=list(CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        raise SystemExit(f"--only: unknown {', '.join(unknown)}; use {', '.join(CONTENDERS)}")

    print(f"{args.workers} workers ({args.workers + 1} MPI ranks, {os.cpu_count()} cores), budget {args.budget}, "
          f"task time log-normal (median {args.median_ms:g} ms, sigma {args.sigma:g}), "
          f"{args.repeats} repeats, medians\n", flush=True)
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for repeat in range(args.repeats):
        for name in names:
            row = run_child(name, repeat, args)
            rows[name].append(row)
            if args.verbose:
                print(f"  repeat {repeat} {name:<9} busy {row['busy_run']:.3f} steady {row['busy_steady']:.3f} "
                      f"({row['steady_s']:.2f} s) idle opt {row['idle_opt']:.3f} dispatch {row['idle_dispatch']:.3f} opt {row['opt_ms']:.2f} ms wall {row['wall']:.2f} s "
                      f"best {row['best']:.2f} {row['stats']}", flush=True)

    header = (f"{'optimizer':<30}{'busy run':>9}{'busy steady':>12}{'idle: opt':>10}{'dispatch':>9}"
              f"{'start-up ms':>12}{'opt ms/result':>14}{'model ms/result':>16}{'wall s':>8}{'best':>7}")
    print(header)
    print("-" * len(header))
    for name in names:
        rs = rows[name]

        def med(key: str) -> float | None:
            vals = [r[key] for r in rs if r[key] is not None]
            return statistics.median(vals) if vals else None

        model = med("model_ms")
        print(f"{CONTENDERS[name]:<30}{med('busy_run'):>9.3f}{med('busy_steady'):>12.3f}"
              f"{med('idle_opt'):>10.3f}{med('idle_dispatch'):>9.3f}"
              f"{med('startup_ms'):>12.1f}{med('opt_ms'):>14.2f}"
              f"{'-' if model is None else f'{model:.2f}':>16}{med('wall'):>8.2f}{med('best'):>7.2f}")


if __name__ == "__main__":
    main()
