"""Report benchmark: ``emews report`` of a large store, beside ``emews results`` of the same store.

    nice -n 19 python bench/report.py [--evaluations 100000] [--workers 64] [--repeats 3]

Builds an experiment synthetically through the real APIs (``create_experiment`` with the
``digits`` workflow, then ``ResultsStore.commit`` of every task and result: log-normal task
times on ``--workers`` workers, 5% failed, 1% crashed, 1% timeout), then times, as a user runs
them, ``emews report DIR`` (HTML + PNGs, default options) and ``emews results DIR`` (the CSV
export, for scale), alternating the two, and prints the medians over ``--repeats`` of the
wall-clock time and of the CPU time (user + system) of each command.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from emews.config.experiment import create_experiment
from emews.core.results import Result, Status, Task
from emews.store.results_store import ResultsStore
from emews.config.workflow import load_workflow

FAILURES = ((Status.FAILED, 0.05, "Traceback (most recent call last):\n  File \"model.py\", line 3\n"
                                   "ValueError: diverged at epoch {epoch}"),
            (Status.CRASHED, 0.01, "objective process died of signal SIGSEGV (segmentation fault)"),
            (Status.TIMEOUT, 0.01, "ran past the task timeout of 120 s; its process was killed"))


def build(exp_parent: Path, evaluations: int, workers: int, seed: int = 1) -> Path:
    """An experiment of ``evaluations`` finished evaluations on ``workers`` workers."""
    workflow = load_workflow("digits", {"budget.evaluations": evaluations})
    exp = create_experiment(exp_parent / "exp", name="digits", workflow=workflow.to_dict(),
                            site={"name": "local"}, info={"workers": workers, "site": "local"})
    rng = random.Random(seed)
    free = [(0.0, rank) for rank in range(1, workers + 1)]  # (time the worker is free, rank)
    t0 = time.time() - 3600.0
    tasks, results = [], []
    for i in range(evaluations):
        free.sort()
        at, rank = free[0]
        params = workflow.space.sample(rng)
        submitted = t0 + max(at - 0.002, 0.0)
        started = t0 + at + 0.0005
        finished = started + rng.lognormvariate(-1.0, 0.8)
        free[0] = (finished - t0, rank)
        status, error, value = Status.OK, None, abs(rng.gauss(0.2, 0.1)) + params["lr"]
        roll = rng.random()
        for kind, share, message in FAILURES:
            if roll < share:
                status, error, value = kind, message.format(epoch=rng.randrange(20)), None
                break
            roll -= share
        task = Task(i, params, seed=i, submitted=submitted)
        tasks.append(task)
        results.append(Result(id=i, params=params, status=status, objective=value,
                              loss=value if value is not None else float("inf"), error=error, rank=rank,
                              host="node0", submitted=submitted, started=started, finished=finished))
    with ResultsStore(exp / "results.db") as store:
        for lo in range(0, evaluations, 10_000):
            store.commit(tasks[lo:lo + 10_000], results[lo:lo + 10_000])
    return exp


def timed(command: list[str]) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        exp = build(Path(tmp), args.evaluations, args.workers)
        print(f"built a store of {args.evaluations:,} evaluations on {args.workers} workers "
              f"in {time.perf_counter() - start:.1f} s")
        commands = {"emews report": "report", "emews results": "results"}
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.repeats):
            for name, sub in commands.items():
                times[name].append(timed([sys.executable, "-m", "emews", sub, str(exp)]))
        size = (exp / "report.html").stat().st_size
        figures = {}
        for name, runs in times.items():
            wall, cpu = (statistics.median(t[i] for t in runs) for i in (0, 1))
            figures[name] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2)}
            print(f"{name:>14}: median {wall:.2f} s wall, {cpu:.2f} s CPU over {len(runs)} runs "
                  f"(wall {', '.join(f'{w:.2f}' for w, _ in runs)})")
        print(f"report.html: {size / 2**20:.1f} MiB, plots: "
              f"{', '.join(sorted(p.name for p in (exp / 'report-plots').iterdir()))}")
        print("RESULT " + json.dumps({"evaluations": args.evaluations, "workers": args.workers, **figures}))


if __name__ == "__main__":
    main()
