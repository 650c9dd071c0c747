"""What one dispatched task costs each process, in counts that do not depend on the machine's speed.

    python bench/dispatch_counters.py [--workers 3] [--small 5000] [--large 50000] [--repeats 2]

Runs ``bench/dispatch.py``'s two children (the emews runtime called directly, and
``mpi4py.futures``' ``map(chunksize=1)``) under ``mpiexec``, each rank wrapped so that its own
counters are kept: CPU (user, system), voluntary and involuntary context switches
(``getrusage``), and, where ``perf`` can count them, system calls, wake-ups the rank gave
(``sched:sched_wakeup``) and CPU migrations. Each system runs with ``--small`` and ``--large``
no-op tasks; the difference divided by the difference of tasks is the cost of one task, start-up
and teardown subtracted. Runs alternate between the two systems. Per task, rank 0 and the mean
worker rank are printed side by side; wall time per task shows how far each system is from
being CPU-bound (CPU per task x tasks/s = cores busy).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
DISPATCH = HERE.parent / "dispatch.py"
sys.path.insert(0, str(HERE.parent))
from procs import THREAD_FIELDS  # noqa: E402

MPIEXEC = str(Path(sys.executable).parent / "mpiexec")
#: software events ``perf stat`` counts per rank (no hardware counters needed: they work in a VM)
PERF_EVENTS = ("raw_syscalls:sys_enter", "sched:sched_wakeup", "cpu-migrations", "context-switches")
#: what ``getrusage`` gives every rank
USAGE = ("cpu_us", "user_us", "sys_us", "vcsw", "ivcsw")
#: ``--syscalls``: the system calls a polling, sleeping or messaging rank may make, counted one by one
SYSCALLS = (
    "sched_yield",
    "clock_nanosleep",
    "nanosleep",
    "futex",
    "read",
    "write",
    "poll",
    "ppoll",
    "epoll_wait",
    "select",
    "pselect6",
    "process_vm_readv",
    "sendmsg",
    "recvmsg",
    "pwrite64",
    "pread64",
    "fdatasync",
    "getpid",
    "mmap",
    "munmap",
    "brk",
    "madvise",
)


def perf_works(events: tuple[str, ...]) -> bool:
    """Whether ``perf stat`` counts ``events`` here (a container may forbid it)."""
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(events), "true"], capture_output=True, text=True)
    return probe.returncode == 0 and "not supported" not in probe.stderr and "nvalid" not in probe.stderr


def wrap(out_dir: Path, events: tuple[str, ...], command: list[str]) -> int:
    """One rank: run ``command`` (the rank's real process, which inherits the PMI connection), then
    write its counters to ``out_dir/rank<R>.json``."""
    rank = os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or str(os.getpid())
    perf_file = out_dir / f"rank{rank}.perf"
    if events:
        command = ["perf", "stat", "-x,", "-o", str(perf_file), "-e", ",".join(events), "--", *command]
    status = subprocess.run(command, close_fds=False).returncode
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    counters = {
        "user_us": usage.ru_utime * 1e6,
        "sys_us": usage.ru_stime * 1e6,
        "cpu_us": (usage.ru_utime + usage.ru_stime) * 1e6,
        "vcsw": usage.ru_nvcsw,
        "ivcsw": usage.ru_nivcsw,
    }
    if events and perf_file.exists():
        for line in perf_file.read_text().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2] in events and fields[0].strip().isdigit():
                counters[fields[2]] = int(fields[0])
    (out_dir / f"rank{rank}.json").write_text(json.dumps(counters))
    return status


def run(kind: str, tasks: int, args: argparse.Namespace, events: tuple[str, ...]) -> dict:
    """One job of ``kind`` with ``tasks`` no-op tasks: its own throughput and each rank's counters."""
    with tempfile.TemporaryDirectory() as tmp:
        child = [sys.executable, *(["-m", "mpi4py.futures"] if kind == "futures" else []), str(DISPATCH)]
        child += ["--child", kind, "--tasks", str(tasks), "--latency-tasks", "1", "--idle", "0"]
        wrapper = [
            sys.executable,
            str(HERE),
            "--wrap",
            tmp,
            *(["--events", ",".join(events)] if events else []),
            "--",
            *child,
        ]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        proc = subprocess.run(
            [MPIEXEC, "-n", str(args.workers + 1), *wrapper], capture_output=True, text=True, env=env, timeout=900
        )
        if proc.returncode != 0:
            raise SystemExit(f"{kind} run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        result = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])
        ranks = {int(p.stem[4:]): json.loads(p.read_text()) for p in Path(tmp).glob("rank*.json")}
    return {
        "tasks": tasks,
        "tasks_per_s": result["tasks_per_s"],
        "ranks": ranks,
        "threads": by_thread(result["threads"], result["main_thread"], tasks),
    }


def by_thread(threads: dict[str, dict[str, int]], main: str, tasks: int) -> dict[str, dict[str, float]]:
    """The throughput phase seen from inside, per task: rank 0's main thread, its other threads
    together (the distributor; mpi4py.futures' manager), and the mean worker rank: CPU and time
    runnable but without a core (us), timeslices, voluntary and involuntary switches."""
    rank0 = main.split("/")[0]
    groups: dict[str, list[dict[str, int]]] = {"rank 0 main": [], "rank 0 others": [], "workers": []}
    for name, counters in threads.items():
        pid = name.split("/")[0]
        groups["rank 0 main" if name == main else "rank 0 others" if pid == rank0 else "workers"].append(counters)
    workers = len({n.split("/")[0] for n in threads if n.split("/")[0] != rank0}) or 1
    out = {}
    for group, rows in groups.items():
        share = workers if group == "workers" else 1
        out[group] = {
            k: sum(r[k] for r in rows) / tasks / share / (1e3 if k.endswith("_ns") else 1) for k in THREAD_FIELDS
        }
    return out


def per_task(small: dict, large: dict, keys: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Counters per task for rank 0 and the mean worker: (large - small) / (tasks difference)."""
    n = large["tasks"] - small["tasks"]
    workers = sorted(r for r in large["ranks"] if r != 0)

    def diff(rank: int, key: str) -> float:
        return (large["ranks"][rank].get(key, 0) - small["ranks"][rank].get(key, 0)) / n

    return {
        "rank 0": {k: diff(0, k) for k in keys},
        "worker": {k: statistics.mean(diff(r, k) for r in workers) for k in keys},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--systems", default="emews,futures")
    parser.add_argument("--json", type=Path, help="also save the per-task figures here")
    parser.add_argument("--wrap", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--syscalls", action="store_true", help="count each system call instead of the events")
    parser.add_argument("--events", default="", help=argparse.SUPPRESS)
    parser.add_argument("command", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.wrap is not None:
        raise SystemExit(wrap(args.wrap, tuple(e for e in args.events.split(",") if e), args.command))

    wanted = tuple(f"syscalls:sys_enter_{name}" for name in SYSCALLS) if args.syscalls else PERF_EVENTS
    events = tuple(e for e in wanted if perf_works((e,)))
    keys = (*USAGE, *events)
    systems = args.systems.split(",")
    print(
        f"{args.workers} workers on {os.cpu_count()} cores; {args.small} and {args.large} no-op tasks; "
        f"perf events: {len(events)} of {len(wanted)}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    figures: dict[str, list[dict]] = {s: [] for s in systems}
    inside: dict[str, list[dict]] = {s: [] for s in systems}
    rates: dict[str, list[float]] = {s: [] for s in systems}
    for _ in range(args.repeats):
        for kind in systems:  # alternating: the machine's noise falls on both alike
            small, large = run(kind, args.small, args, events), run(kind, args.large, args, events)
            figures[kind].append(per_task(small, large, keys))
            inside[kind].append(large["threads"])
            rates[kind].append(large["tasks_per_s"])
    summary = {}
    for kind in systems:
        rate = statistics.median(rates[kind])
        rows = {
            role: {k: statistics.median(f[role][k] for f in figures[kind]) for k in keys}
            for role in ("rank 0", "worker")
        }
        summary[kind] = {"tasks_per_s": rate, **rows}
        print(
            f"\n{kind}: {rate:,.0f} tasks/s, wall {1e6 / rate:.1f} us per task; "
            f"CPU of all ranks {rows['rank 0']['cpu_us'] + args.workers * rows['worker']['cpu_us']:.1f} us per task "
            f"= {(rows['rank 0']['cpu_us'] + args.workers * rows['worker']['cpu_us']) * rate / 1e6:.2f} cores busy"
        )
        print(f"  {'per task':<24}{'rank 0':>10}{'worker':>10}")
        for k in keys:
            if args.syscalls and k in USAGE[1:] or max(abs(r[k]) for r in rows.values()) < 0.005:
                continue
            print(f"  {k.replace('syscalls:sys_enter_', ''):<24}{rows['rank 0'][k]:>10.3f}{rows['worker'][k]:>10.3f}")
        groups = inside[kind][0].keys()
        threads = {g: {k: statistics.median(r[g][k] for r in inside[kind]) for k in THREAD_FIELDS} for g in groups}
        summary[kind]["threads"] = threads
        print(
            f"  throughput phase, per task: {'':<6}" + "".join(f"{k.replace('_ns', '_us'):>9}" for k in THREAD_FIELDS)
        )
        for group, row in threads.items():
            print(f"    {group:<30}" + "".join(f"{row[k]:>9.3f}" for k in THREAD_FIELDS))
    print(f"\nload {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
