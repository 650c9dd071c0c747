"""Start-up at width (issue 27 item 4): a real ``emews launch`` of 64, 128, 256 ranks.

    python bench/startup.py [--ranks 64,128,256] [--task-seconds 0.2] [--tasks-per-worker 4] [--trace]

For each size, ``emews launch`` (the user's path: the local site's ``mpiexec``, progress on) of a
workflow whose objective sleeps ``--task-seconds``, budget ``tasks-per-worker`` x workers. From
the store's results it prints the time from the launch command to the first task starting and to
every worker running its first task, the whole command's time, and, from ``/proc`` while the job
runs, each rank's peak RSS (median and max). With ``--trace`` the job runs under
``strace -f`` (``openat``, ``clone``, ``execve``): the files each rank opens successfully and their
bytes (what a parallel file system serves at start-up: the import storm), median over the worker
ranks and rank 0 apart. ``strace -f`` names each thread by its own id: a thread's opens count to
the process that created it (a ``clone`` with ``CLONE_THREAD``), and a process is a rank when it
executed ``emews run EXP``. The machine's 2 cores are oversubscribed: the times are an upper bound
of a node's.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from procs import pids_running

from emews.store import STORE_FILE

NAP = Path(__file__).resolve().parent / "startup_nap.py"  # the objective: imports nothing of ours
WORKFLOW = """\
optimizer: {{name: random, options: {{seed: 1}}}}
objective: {{module: {module}, function: nap}}
space:
  x: {{type: float, lower: 0, upper: 1}}
budget: {{evaluations: {tasks}}}
task: {{isolation: inline}}
"""
OPENAT = re.compile(r'^(\d+)\s+openat\([^"]*"([^"]+)"[^)]*\)\s+=\s+(\d+)')
OPENAT_UNFINISHED = re.compile(r'^(\d+)\s+openat\([^"]*"([^"]+)".*<unfinished \.\.\.>$')
OPENAT_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. openat resumed>.*=\s+(\d+)")
CLONE = re.compile(r"^(\d+)\s+(clone3?)\((.*)\)\s+=\s+(\d+)")  # a clone that returned at once
CLONE_UNFINISHED = re.compile(r"^(\d+)\s+(clone3?)\((.*)<unfinished \.\.\.>$")
CLONE_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. clone3? resumed>.*\)\s+=\s+(\d+)")
EXECVE = re.compile(r'^(\d+)\s+execve\("[^"]*", \[(.*?)\], .*?(?:=\s+(-?\d+).*|<unfinished \.\.\.>)$')
EXECVE_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. execve resumed>.*=\s+(-?\d+)")


def rank_pids(exp: Path) -> list[int]:
    """The job's ranks: processes running ``emews run EXP``."""
    return pids_running("run", str(exp))


def peak_rss_mb(pids: list[int]) -> list[float]:
    out = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        match = re.search(r"VmHWM:\s+(\d+) kB", status)
        if match:
            out.append(int(match.group(1)) / 1024)
    return out


def thread_owners(lines: list[str]) -> dict[int, int]:
    """Thread id -> the id of the process it belongs to, from the ``clone`` lines of
    ``strace -f`` (a call interrupted by another process's line ends in a ``resumed`` line)."""
    creator: dict[int, int] = {}
    pending: dict[int, bool] = {}
    for line in lines:
        if match := CLONE.match(line):
            if "CLONE_THREAD" in match.group(3):
                creator[int(match.group(4))] = int(match.group(1))
        elif match := CLONE_UNFINISHED.match(line):
            pending[int(match.group(1))] = "CLONE_THREAD" in match.group(3)
        elif (match := CLONE_RESUMED.match(line)) and pending.pop(int(match.group(1)), False):
            creator[int(match.group(2))] = int(match.group(1))

    def owner(tid: int) -> int:
        while tid in creator:  # a thread's thread belongs to the same process
            tid = creator[tid]
        return tid

    return {tid: owner(tid) for tid in creator}


def opened_files(trace: Path, exp: Path) -> tuple[dict[int, set[str]], set[int]]:
    """Files each process opened successfully (its threads' opens included), and which of the
    processes are the job's ranks (they executed ``emews run EXP``). A call that another
    process's line interrupted ends in a ``resumed`` line of its own."""
    lines = trace.read_text(errors="replace").splitlines()
    owners = thread_owners(lines)
    files: dict[int, set[str]] = defaultdict(set)
    ranks: set[int] = set()
    runs: dict[int, bool] = {}  # an execve not yet returned: whether it runs ``emews run EXP``
    opening: dict[int, str] = {}  # an openat not yet returned: its path
    for line in lines:
        if match := OPENAT.match(line):
            tid = int(match.group(1))
            files[owners.get(tid, tid)].add(match.group(2))
        elif match := OPENAT_UNFINISHED.match(line):
            opening[int(match.group(1))] = match.group(2)
        elif (match := OPENAT_RESUMED.match(line)) and int(match.group(1)) in opening:
            tid = int(match.group(1))
            files[owners.get(tid, tid)].add(opening.pop(tid))
        elif match := EXECVE.match(line):
            argv = match.group(2).split(", ")
            is_rank = '"run"' in argv and f'"{exp}"' in argv and "mpiexec" not in argv[0]
            if match.group(3) is None:
                runs[int(match.group(1))] = is_rank
            elif is_rank and match.group(3) == "0":
                ranks.add(int(match.group(1)))
        elif (match := EXECVE_RESUMED.match(line)) and runs.pop(int(match.group(1)), False) and match.group(2) == "0":
            ranks.add(int(match.group(1)))
    return files, ranks


def bytes_of(paths: set[str]) -> int:
    total = 0
    for path in paths:
        try:
            if os.path.isfile(path):
                total += os.path.getsize(path)
        except OSError:
            pass
    return total


def run(ranks: int, args: argparse.Namespace) -> dict[str, float]:
    workers = ranks - 1
    with tempfile.TemporaryDirectory() as tmp:
        wf, exp = Path(tmp) / "wf.yaml", Path(tmp) / "exp"
        wf.write_text(WORKFLOW.format(module=NAP, tasks=args.tasks_per_worker * workers))
        cmd = [sys.executable, "-m", "emews", "launch", str(wf), "--workers", str(workers), "--exp-dir", str(exp)]
        trace = Path(tmp) / "trace"
        if args.trace:
            cmd = ["strace", "-f", "-qq", "-s", "4096", "-e", "trace=openat,clone,clone3,execve", "-e", "signal=none",
                   "-o", str(trace), *cmd]
        env = {**os.environ, "EMEWS_BENCH_NAP": str(args.task_seconds)}
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        rss: dict[int, float] = {}
        while proc.poll() is None:  # sample each rank's peak RSS while it lives
            for pid, mb in zip(pids := rank_pids(exp), peak_rss_mb(pids), strict=False):
                rss[pid] = max(rss.get(pid, 0.0), mb)
            time.sleep(0.5)
        whole = time.time() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{ranks} ranks: emews launch failed ({proc.returncode}): {proc.stderr[-1500:]}")
        with sqlite3.connect(exp / STORE_FILE) as db:
            rows = db.execute("SELECT rank, MIN(started) FROM results GROUP BY rank").fetchall()
        firsts = [started for _, started in rows if started is not None]
        row = {
            "ranks": ranks,
            "first_task_s": min(firsts) - t0,
            "all_busy_s": max(firsts) - t0,
            "workers_seen": len(firsts),
            "whole_s": whole,
            "rss_median_mb": statistics.median(rss.values()) if rss else float("nan"),
            "rss_max_mb": max(rss.values(), default=float("nan")),
        }
        if args.trace:
            files, ranks = opened_files(trace, exp)
            store = str(exp / STORE_FILE)
            zero = [pid for pid in ranks if store in files[pid]]  # rank 0 alone opens the store
            workers_files = [files[pid] for pid in ranks if pid not in zero]
            row["ranks_traced"] = len(ranks)
            row["files_median"] = statistics.median(len(f) for f in workers_files) if workers_files else 0
            row["mb_read_median"] = statistics.median(bytes_of(f) for f in workers_files) / 2**20 if workers_files else 0
            row["files_rank0"] = len(files[zero[0]]) if len(zero) == 1 else float("nan")
            row["mb_read_rank0"] = bytes_of(files[zero[0]]) / 2**20 if len(zero) == 1 else float("nan")
            row["files_all"] = len(set().union(*files.values()))
        return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", default="64,128,256")
    parser.add_argument("--task-seconds", type=float, default=0.2)
    parser.add_argument("--tasks-per-worker", type=int, default=4)
    parser.add_argument("--trace", action="store_true", help="count the files each rank opens (strace)")
    args = parser.parse_args()
    print(f"emews launch at width on {os.cpu_count()} cores; tasks of {args.task_seconds:g} s, "
          f"{args.tasks_per_worker} per worker", flush=True)
    header = f"{'ranks':>6} {'first task':>11} {'all busy':>9} {'whole':>8} {'RSS med':>8} {'RSS max':>8}"
    print(header + (f" {'files/worker':>12} {'MB/worker':>9} {'files r0':>8} {'MB r0':>6}" if args.trace else ""),
          flush=True)
    for ranks in (int(r) for r in args.ranks.split(",")):
        row = run(ranks, args)
        line = (f"{row['ranks']:6d} {row['first_task_s']:9.2f} s {row['all_busy_s']:7.2f} s {row['whole_s']:6.1f} s "
                f"{row['rss_median_mb']:6.0f}MB {row['rss_max_mb']:6.0f}MB")
        if args.trace:
            line += (f" {row['files_median']:12.0f} {row['mb_read_median']:9.1f} {row['files_rank0']:8.0f}"
                     f" {row['mb_read_rank0']:6.1f}")
            if row["ranks_traced"] != ranks:
                line += f"  ({row['ranks_traced']} ranks traced)"
        if row["workers_seen"] < ranks - 1:
            line += f"  ({row['workers_seen']} of {ranks - 1} workers ran a task)"
        print(line, flush=True)


if __name__ == "__main__":
    main()
