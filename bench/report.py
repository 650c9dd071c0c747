"""Report benchmark: ``emews report`` of a large store, beside ``emews results`` of the same store.

    nice -n 19 python bench/report.py [--evaluations 100000] [--workers 64] [--repeats 3]

Builds an experiment synthetically through the real APIs (``create_experiment`` with the
``digits`` workflow, then ``ResultsStore.commit`` of every task and result: log-normal task
times on ``--workers`` workers, 5% failed, 1% crashed, 1% timeout), then times, as a user runs
them, ``emews report DIR`` (HTML + PNGs, default options) and ``emews results DIR`` (the CSV
export, for scale), alternating the two, and prints the medians over ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from emews.experiment import create_experiment
from emews.results import Result, Status, Task
from emews.runtime.store import ResultsStore
from emews.workflow import load_workflow

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


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


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
        times: dict[str, list[float]] = {"emews report": [], "emews results": []}
        for _ in range(args.repeats):
            times["emews report"].append(timed([sys.executable, "-m", "emews", "report", str(exp)]))
            times["emews results"].append(timed([sys.executable, "-m", "emews", "results", str(exp)]))
        size = (exp / "report.html").stat().st_size
        figures = {name: round(statistics.median(t), 2) for name, t in times.items()}
        for name, t in times.items():
            print(f"{name:>14}: median {statistics.median(t):.2f} s over {len(t)} runs "
                  f"({', '.join(f'{x:.2f}' for x in t)})")
        print(f"report.html: {size / 2**20:.1f} MiB, plots: "
              f"{', '.join(sorted(p.name for p in (exp / 'report-plots').iterdir()))}")
        print("RESULT " + json.dumps({"evaluations": args.evaluations, "workers": args.workers, **figures}))


if __name__ == "__main__":
    main()
