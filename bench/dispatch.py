"""Dispatch benchmark: emews against mpi4py.futures on the same rank count, in one process tree.

    python bench/dispatch.py [--workers 3] [--tasks 50000] [--cli-tasks 150000] [--repeats 5]

Prints, as medians over the repeats:
  * what a user gets: ``emews launch`` of a workflow with six parameters of every type,
    a no-op objective (``task.isolation: inline``, the only setting that is not a default),
    the progress line on, and the end of the run (CSV, summary) included: tasks/s of the
    whole command and of the run itself, and the time ``emews results`` takes to rewrite the
    CSV of that store;
  * end-to-end no-op tasks/s: random optimizer, inline objective, SQLite store on
    (emews) and ``MPIPoolExecutor.map(chunksize=1)`` (mpi4py.futures);
  * median round trip of one task at a time (emews ``evaluator.map([p])``,
    futures ``submit(f).result()``);
  * the CPU an idle rank burns (percent of one core) while the optimizer waits;
  * over the throughput phase, per task and summed over every thread of every rank: the CPU
    used and the time spent runnable but without a core (``/proc/.../schedstat``). emews is
    CPU-bound and mpi4py.futures sleep-bound, so on a loaded machine the tasks/s ratio drops
    while the CPU ratio holds far better (docs/benchmarks.md, "Machine sensitivity").
Each measurement runs under the ``mpiexec`` next to this Python, alternating the
two systems so machine noise falls on both alike, with Python's bytecode cache on (as in a
default environment) and after one uncounted warm-up launch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from procs import counters_between, pids_running, thread_counters

HERE = Path(__file__).resolve()
MPIEXEC = str(Path(sys.executable).parent / "mpiexec")


def noop(_: object = None) -> float:
    return 0.0


USER_WORKFLOW = """\
optimizer: {{name: random, options: {{seed: 1}}}}
objective: {{module: {module}, function: noop}}
space:
  x: {{type: float, lower: 0, upper: 1}}
  lr: {{type: float, lower: 1.0e-5, upper: 1.0e-1, log: true}}
  units: {{type: int, lower: 8, upper: 512}}
  act: {{type: categorical, values: [relu, tanh, sigmoid]}}
  batch: {{type: ordered, values: [16, 32, 64, 128]}}
  epochs: {{type: constant, value: 10}}
budget: {{evaluations: {tasks}}}
task: {{isolation: inline}}
"""


def user_environment() -> dict[str, str]:
    """This environment as a default Python has it: with the bytecode cache, which this
    benchmark's machine turns off (``PYTHONDONTWRITEBYTECODE``) and which would otherwise make
    every process of every run compile emews from source again."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_cli(args: argparse.Namespace, tasks: int | None = None) -> dict[str, float]:
    """``emews launch`` as a user runs it, then ``emews results`` on its store."""
    tasks = tasks or args.cli_tasks
    with tempfile.TemporaryDirectory() as tmp:
        wf = Path(tmp) / "noop.yaml"
        wf.write_text(USER_WORKFLOW.format(module=HERE, tasks=tasks))
        exp = Path(tmp) / "exp"
        emews = [sys.executable, "-m", "emews"]
        t0 = time.perf_counter()
        proc = subprocess.run([*emews, "launch", str(wf), "--workers", str(args.workers), "--exp-dir", str(exp)],
                              capture_output=True, text=True, timeout=1800, env=user_environment())
        whole = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"emews launch failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        elapsed = json.loads((exp / "summary.json").read_text())["elapsed"]
        t0 = time.perf_counter()
        subprocess.run([*emews, "results", str(exp)], check=True, capture_output=True, timeout=600,
                       env=user_environment())
        results = time.perf_counter() - t0
    return {"whole_per_s": tasks / whole, "in_run_per_s": tasks / elapsed,
            "results_s": results}


# --- children (run under mpiexec) -------------------------------------------------

def child_emews(tasks: int, latency_tasks: int, idle_seconds: float) -> None:
    from mpi4py import MPI

    from emews.core.optimizer import Optimizer
    from emews.runtime.backoff import Backoff, spin_seconds
    from emews.optimizers.random import RandomSearch
    from emews.job.wiring import RunSpec, run_optimizer_rank, run_worker_rank
    from emews.objective.function import ObjectiveRef
    from emews.runtime.transport import MPITransport
    from emews.core.space import Float, Space

    comm = MPI.COMM_WORLD
    pids = comm.allgather(os.getpid())  # each rank's threads are counted over the throughput phase
    # idle ranks poll for 1 ms (``DEFAULT_SPIN``), unlike ``emews launch`` on an oversubscribed
    # node, which does not poll; ``EMEWS_SPIN_SECONDS`` sets the window here as there
    Backoff.spin_default = spin_seconds()
    transport = MPITransport(comm)
    space = Space({"x": Float(0.0, 1.0)})
    objective = ObjectiveRef(str(HERE), function="noop")
    report: dict[str, float] = {}

    class Phases(Optimizer):
        """Throughput, then one-at-a-time latency, then idle (workers waiting)."""

        def run(self, evaluator):  # type: ignore[override]
            start = time.perf_counter()
            cpu_start = time.process_time()
            inner = RandomSearch(seed=1)
            evaluator.budget = tasks  # phase 1 uses the first `tasks` evaluations
            threads = thread_counters(pids)
            inner.run(evaluator)
            report["tasks_per_s"] = tasks / (time.perf_counter() - start)
            report["threads"] = counters_between(threads, thread_counters(pids))
            report["main_thread"] = f"{os.getpid()}/{threading.get_native_id()}"
            report["rank0_cpu_us_per_task"] = 1e6 * (time.process_time() - cpu_start) / tasks
            evaluator.budget = tasks + latency_tasks
            trips = []
            for _ in range(latency_tasks):
                t0 = time.perf_counter()
                evaluator.map([{"x": 0.5}])
                trips.append(time.perf_counter() - t0)
            report["round_trip_us"] = statistics.median(trips) * 1e6
            cpu0 = time.process_time()
            time.sleep(idle_seconds)
            report["rank0_idle_cpu_pct"] = 100 * (time.process_time() - cpu0) / max(idle_seconds, 1e-9)

    with tempfile.TemporaryDirectory() as tmp:
        exp_dir = Path(tmp) if comm.Get_rank() == 0 else None
        spec = RunSpec(space, Phases, objective, budget=tasks + latency_tasks, isolation="inline",
                       exp_dir=exp_dir, show_progress=False)
        if comm.Get_rank() == 0:
            summary = run_optimizer_rank(spec, transport, list(range(1, comm.Get_size())))
            if summary.error:
                raise summary.error
            print("RESULT " + json.dumps(report), flush=True)
        else:
            spec.exp_dir = None
            run_worker_rank(spec, transport, [])


def child_futures(tasks: int, latency_tasks: int) -> None:
    from mpi4py.futures import MPIPoolExecutor

    with MPIPoolExecutor() as pool:
        list(pool.map(noop, range(200)))  # start the workers
        pids = [os.getpid(), *set(pool.map(_pid, range(200)))]
        threads = thread_counters(pids)
        start = time.perf_counter()
        list(pool.map(noop, range(tasks), chunksize=1))
        rate = tasks / (time.perf_counter() - start)
        threads = counters_between(threads, thread_counters(pids))
        trips = []
        for _ in range(latency_tasks):
            t0 = time.perf_counter()
            pool.submit(noop).result()
            trips.append(time.perf_counter() - t0)
    print("RESULT " + json.dumps({"tasks_per_s": rate, "round_trip_us": statistics.median(trips) * 1e6,
                                  "threads": threads, "main_thread": f"{os.getpid()}/{threading.get_native_id()}"}),
          flush=True)


def _pid(_: object = None) -> int:
    return os.getpid()


# --- driver ---------------------------------------------------------------------------

def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rank_pids(tag: str) -> list[int]:
    return pids_running(str(HERE), tag)


def run_child(kind: str, args: argparse.Namespace, idle: float = 0.0) -> tuple[dict, float | None]:
    ranks = str(args.workers + 1)
    tag = f"--tag={os.getpid()}-{time.monotonic_ns()}"
    cmd = [MPIEXEC, "-n", ranks, sys.executable]
    if kind == "futures":
        cmd += ["-m", "mpi4py.futures"]
    cmd += [str(HERE), "--child", kind, "--tasks", str(args.tasks), "--latency-tasks", str(args.latency_tasks),
            "--idle", str(idle), tag]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=user_environment())
    idle_pct = None
    if idle:
        idle_pct = _measure_idle_workers(proc, tag, idle)
    out, _ = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{kind} run failed with exit status {proc.returncode}")
    line = next(l for l in out.splitlines() if l.startswith("RESULT "))
    result = json.loads(line[7:])
    result.update(cpu_per_task(result.pop("threads"), args.tasks))
    return result, idle_pct


def cpu_per_task(threads: dict[str, dict[str, int]], tasks: int) -> dict[str, float]:
    """Over the throughput phase, per task and summed over every thread of every rank: the CPU
    used and the time spent runnable without a core (us). The first travels between machines of
    one CPU model; the second is what a loaded or smaller machine adds."""
    return {
        "cpu_us": sum(t["run_ns"] for t in threads.values()) / tasks / 1e3,
        "wait_us": sum(t["wait_ns"] for t in threads.values()) / tasks / 1e3,
    }


def _measure_idle_workers(proc: subprocess.Popen, tag: str, idle: float) -> float | None:
    """Wait until the job's workers sit idle, then sample their CPU use over a window."""
    time.sleep(0.2)
    while proc.poll() is None:
        pids = _rank_pids(tag)
        if pids:
            break
        time.sleep(0.05)
    # the throughput and latency phases come first; wait for the idle phase by watching CPU go quiet
    prev = {p: _cpu_seconds(p) for p in pids}
    while proc.poll() is None:
        time.sleep(0.5)
        now = {p: _cpu_seconds(p) for p in pids if Path(f"/proc/{p}").exists()}
        busy = sum(now[p] - prev.get(p, 0) for p in now)
        prev = now
        if busy < 0.25 * 0.5 * len(pids):
            break
    window = max(1.0, idle - 2.5)
    start = {p: _cpu_seconds(p) for p in pids}
    t0 = time.monotonic()
    time.sleep(window)
    end = {p: _cpu_seconds(p) for p in pids if Path(f"/proc/{p}").exists()}
    elapsed = time.monotonic() - t0
    # the busiest process is rank 0 (its own figure comes from inside); the others are workers
    per_proc = sorted(100 * (end[p] - start[p]) / elapsed for p in end)
    workers = per_proc[:-1] if len(per_proc) > 1 else per_proc
    return max(workers) if workers else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--cli-tasks", type=int, default=150_000, help="evaluations of the emews launch run")
    parser.add_argument("--latency-tasks", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--idle", type=float, default=6.0, help="seconds of the idle phase (emews)")
    parser.add_argument("--child", choices=["emews", "futures"], help=argparse.SUPPRESS)
    parser.add_argument("--tag", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "emews":
        child_emews(args.tasks, args.latency_tasks, args.idle)
        return
    if args.child == "futures":
        child_futures(args.tasks, args.latency_tasks)
        return

    print(f"{args.workers} workers ({args.workers + 1} ranks) on {os.cpu_count()} cores; "
          f"{args.tasks} no-op tasks, {args.latency_tasks} round trips; {args.repeats} repeats", flush=True)
    rows: dict[str, list[dict]] = {"emews": [], "futures": [], "cli": []}
    idles: list[float] = []
    run_cli(args, tasks=1_000)  # warm-up, not counted: a user's second run finds the bytecode cached
    for i in range(args.repeats):
        cli_row = run_cli(args)
        emews_row, idle_pct = run_child("emews", args, idle=args.idle)
        futures_row, _ = run_child("futures", args)
        rows["cli"].append(cli_row)
        rows["emews"].append(emews_row)
        rows["futures"].append(futures_row)
        if idle_pct is not None:
            idles.append(idle_pct)
        print(f"  repeat {i + 1}: launch {cli_row['whole_per_s']:,.0f}/s whole, {cli_row['in_run_per_s']:,.0f}/s "
              f"in run, results {cli_row['results_s']:.2f} s | runtime {emews_row['tasks_per_s']:,.0f}/s "
              f"{emews_row['round_trip_us']:.0f} us {emews_row['cpu_us']:.1f}/{emews_row['wait_us']:.1f} cpu/wait us"
              f" | futures {futures_row['tasks_per_s']:,.0f}/s {futures_row['round_trip_us']:.0f} us "
              f"{futures_row['cpu_us']:.1f}/{futures_row['wait_us']:.1f} cpu/wait us", flush=True)

    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[kind])

    print()
    print(f"emews launch, {args.cli_tasks:,} evaluations (progress on, CSV and summary included):")
    print(f"  whole command {med('cli', 'whole_per_s'):,.0f} tasks/s, in run {med('cli', 'in_run_per_s'):,.0f}"
          f" tasks/s ({med('cli', 'whole_per_s') / med('futures', 'tasks_per_s'):.1f}x mpi4py.futures); "
          f"emews results of that store: {med('cli', 'results_s'):.2f} s")
    print("runtime called directly (no CLI), and mpi4py.futures:")
    print(f"{'system':<22}{'tasks/s':>12}{'round trip (us)':>18}{'CPU us/task':>14}{'waited us/task':>16}")
    for kind, label in (("emews", "emews"), ("futures", "mpi4py.futures")):
        print(f"{label:<22}{med(kind, 'tasks_per_s'):>12,.0f}{med(kind, 'round_trip_us'):>18.0f}"
              f"{med(kind, 'cpu_us'):>14.1f}{med(kind, 'wait_us'):>16.1f}")
    print(f"speed-up (tasks/s): {med('emews', 'tasks_per_s') / med('futures', 'tasks_per_s'):.1f}x; "
          f"CPU per task (all ranks; load moves it far less than tasks/s): "
          f"{med('futures', 'cpu_us') / med('emews', 'cpu_us'):.1f}x less; load {os.getloadavg()[0]:.2f}")
    print("  (CPU: every thread of every rank over the throughput phase; waited: runnable without a core)")
    if idles:
        print(f"idle worker rank CPU: {statistics.median(idles):.1f}% of a core (median of the busiest worker); "
              f"idle optimizer rank: {med('emews', 'rank0_idle_cpu_pct'):.1f}%")


if __name__ == "__main__":
    main()
