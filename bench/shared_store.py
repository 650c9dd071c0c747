"""Shared-store benchmark: an experiment's tasks through PostgreSQL worker pools, and eqsql on the
same server in the same run as the anchor (issue 26, docs/postgres.md "Pools").

    python bench/shared_store.py [--tasks 1000] [--workers 2] [--pools 1,2,4] [--round-trips 100]
                                 [--rows 10000,100000,1000000] [--repeats 3] [--quick] [--baseline TREE]

Starts its own PostgreSQL server (``initdb`` + ``pg_ctl`` on loopback, tests/store/pgserver.py,
``fsync=off`` as in the tests) and prints, as medians over the repeats:
  * no-op tasks/s through PostgreSQL with 1, 2 and 4 pools: ``emews launch WF --workers W --pools
    K`` of a no-op objective (``task.isolation: inline``, store: {url: ...}, progress on, the
    user's path), for the whole command and in the run (the store's first ``submitted`` to its
    last ``finished``);
  * the optimizer rank's CPU seconds per task in those runs (rank 0 of the first job, read from
    ``/proc`` every 50 ms; that rank also runs pool 1's distributor and feeder);
  * the server's CPU per task in those runs (the postmaster's own and its reaped backends' CPU,
    and its live processes', from ``/proc``, before and after each launch: the whole command);
  * the single-task round trip (p50, p99): an optimizer (``RoundTrip`` below) that puts one point
    and waits for its result, one after the other, with ``--pools 1`` (with ``--baseline``, one
    launch per repeat with each emews, alternating), and its two legs from the store's times: put
    to started (queued, claimed, sent to a worker), finished to the optimizer (stored, announced,
    handed back);
  * the store's time per result (``PoolQueue.complete`` of batches) when the results table
    already holds 10k, 100k and 1M rows (filled with ``INSERT ... SELECT generate_series``);
  * eqsql 0.15 (``eqsql.task_queues.local_queue``) on the same server: ``submit_tasks`` +
    ``as_completed`` on the optimizer's side, ``query_task`` / ``report_task`` in as many Python
    worker processes as the 2-pool emews run has workers, with eqsql's default polling, and its
    single-task round trip (``submit_task`` + ``Future.result()``). eqsql and psycopg2 go into a
    separate venv (``--eqsql-venv``, made on first use) and run as a child process of this one.
The emews and eqsql measurements alternate within each repeat, so machine noise falls on both.
``--baseline TREE`` (a source tree of another emews, e.g. ``git archive COMMIT | tar -x -C TREE``)
runs each launch a second time with that tree's emews (``PYTHONPATH``), right after this one's:
before and after a change under the same load, in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
EQSQL_VERSION = "0.15.0"
EQSQL_TYPE = 1  # the eq_type of this benchmark's tasks


def noop(_: object = None, **__: object) -> float:
    return 0.0


# --- the round-trip optimizer (imported by the launched job's rank 0 from this file) ---------------

try:
    from emews.core.optimizer import Optimizer as _Optimizer
except ImportError:  # the eqsql child's venv has no emews
    _Optimizer = object  # type: ignore[assignment,misc]


class RoundTrip(_Optimizer):  # type: ignore[misc,valid-type]
    """Puts one point, waits for its result, ``n`` times; writes each round trip (s) to ``out``."""

    def __init__(self, n: int = 100, out: str = "roundtrip.json", **_: Any) -> None:
        self.n, self.out = n, out

    def run(self, evaluator: Any) -> None:
        trips = []
        for _ in range(self.n):
            t0 = time.perf_counter()
            evaluator.map([{"x": 0.5}])
            trips.append(time.perf_counter() - t0)
        Path(self.out).write_text(json.dumps(trips))


WORKFLOW = """\
optimizer: {optimizer}
objective: {{module: {module}, function: noop}}
space:
  x: {{type: float, lower: 0, upper: 1}}
budget: {{evaluations: {tasks}}}
task: {{isolation: inline}}
store: {{url: "{url}"}}
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


# --- emews: emews launch --pools K ----------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rank0(exp: Path) -> int | None:
    """The first job's rank 0 (``emews run EXP`` with ``PMI_RANK=0``; an attached pool's ranks run
    ``emews run EXP --pool ...``)."""
    from procs import pids_running

    for pid in pids_running("run", str(exp)):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--pool" not in command and (b"PMI_RANK=0" in env or b"OMPI_COMM_WORLD_RANK=0" in env):
            return pid
    return None


def server_cpu(data: Path) -> float:
    """CPU seconds the PostgreSQL server in ``data`` used so far: the postmaster's, the backends it
    reaped (its children's times) and its processes still running (backends, writers)."""
    postmaster = int((data / "postmaster.pid").read_text().split()[0])
    fields = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            rest = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile (its time is the postmaster's now, or lost: a few ticks)
            continue
        if int(rest[1]) == postmaster:
            total += (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    return total


class Rank0Cpu(threading.Thread):
    """Samples (wall clock, CPU seconds) of the first job's rank 0 every 50 ms until it ends."""

    def __init__(self, exp: Path) -> None:
        super().__init__(daemon=True)
        self.exp, self.done = exp, threading.Event()
        self.samples: list[tuple[float, float]] = []

    def run(self) -> None:
        pid = None
        while not self.done.is_set():
            try:
                pid = pid or _rank0(self.exp)
                if pid:
                    self.samples.append((time.time(), _cpu_seconds(pid)))
            except OSError:  # it ended between two samples
                pid = None
            self.done.wait(0.05)

    def between(self, start: float, end: float) -> float:
        """CPU seconds spent from ``start`` to ``end`` (the samples nearest inside that window)."""
        inside = [cpu for t, cpu in self.samples if start <= t <= end]
        return inside[-1] - inside[0] if len(inside) > 1 else float("nan")


def launch(
    url: str,
    tmp: Path,
    name: str,
    pools: int,
    workers: int,
    tasks: int,
    optimizer: str,
    tree: str | None = None,
    data: Path | None = None,
) -> dict:
    """``emews launch`` of ``tasks`` no-op evaluations through ``pools`` pools (SQLite without
    pools: 0); ``tree``: the emews of that source tree instead of this one; ``data``: the server's
    data folder (its CPU per task is measured)."""
    from dispatch import user_environment

    folder = tmp / name
    folder.mkdir()
    wf = folder / "wf.yaml"
    text = WORKFLOW.format(optimizer=optimizer, module=HERE, tasks=tasks, url=url)
    if not pools:  # today's path: SQLite in the experiment directory, no pools
        text = "\n".join(line for line in text.splitlines() if not line.startswith("store:")) + "\n"
    wf.write_text(text)
    exp = folder / "exp"
    sampler = Rank0Cpu(exp)
    sampler.start()
    server0 = server_cpu(data) if data else float("nan")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "emews",
            "launch",
            str(wf),
            "--workers",
            str(workers),
            *(["--pools", str(pools)] if pools else []),
            "--exp-dir",
            str(exp),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**user_environment(), **({"PYTHONPATH": tree} if tree else {})},
        cwd=folder,
    )
    whole = time.perf_counter() - t0
    server1 = server_cpu(data) if data else float("nan")
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"emews launch (pools: {pools}) failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    first, last, n = _span(exp)
    joined = _all_pools(exp) if pools else None
    cpu = sampler.samples[-1][1] if sampler.samples else float("nan")
    return {
        "whole_per_s": tasks / whole,
        "in_run_per_s": n / (last - first),
        # from the last pool's start (its MPI job starts seconds after the first job) to the last result
        "all_pools_per_s": float("nan") if joined is None else joined,
        "rank0_cpu_ms": 1e3 * sampler.between(first, last) / n,
        "rank0_cpu_total_s": cpu,
        "server_cpu_ms": 1e3 * (server1 - server0) / tasks,
        "exp": str(exp),
        "folder": str(folder),
    }


def _all_pools(exp: Path) -> float | None:
    """Results per second while every pool ran: those finished after the last pool registered,
    over the time from then to the last result (``None`` when too few came after it)."""
    from emews.store import open_store

    with open_store(exp, readonly=True) as store:
        row = store.connection.execute(  # type: ignore[attr-defined]
            "SELECT count(*), max(r.finished), p.s FROM results r, (SELECT max(started) AS s FROM pools) p "
            "WHERE r.finished >= p.s GROUP BY p.s"
        ).fetchone()
    if row is None or row[0] < 100:
        return None
    return float(row[0]) / (float(row[1]) - float(row[2]))


def _span(exp: Path) -> tuple[float, float, int]:
    from emews.store import open_store

    with open_store(exp, readonly=True) as store:
        row = store.connection.execute(  # type: ignore[attr-defined]
            "SELECT min(submitted), max(finished), count(*) FROM results"
        ).fetchone()
    return float(row[0]), float(row[1]), int(row[2])


def round_trips(url: str, tmp: Path, n: int, workers: int, tree: str | None = None) -> dict[str, list[float]]:
    """``n`` single-task round trips through one pool (``tree``: with that emews), seconds each
    (``trip``), and their legs from the store's times: ``out``, the task put until its worker
    started it (queued, claimed, sent), and ``back``, its worker's end until the optimizer had the
    result (stored, announced, handed back)."""
    from emews.store import open_store

    tmp.mkdir()
    out = tmp / "roundtrip.json"
    optimizer = json.dumps({"name": f"{HERE}:RoundTrip", "options": {"n": n, "out": str(out)}})
    row = launch(url, tmp, "roundtrip", 1, workers, n, optimizer, tree=tree)
    trips = json.loads(out.read_text())
    with open_store(Path(row["exp"]), readonly=True) as store:
        times = store.connection.execute(  # type: ignore[attr-defined]
            "SELECT submitted, started, finished FROM results ORDER BY id"
        ).fetchall()
    return {
        "trip": trips,
        "out": [started - put for put, started, _ in times],
        "back": [trip - (finished - put) for trip, (put, _, finished) in zip(trips, times, strict=True)],
    }


def alternating_round_trips(
    url: str, tmp: Path, args: argparse.Namespace
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """:func:`round_trips` with this emews, and with ``--baseline``'s right after it, once per
    repeat (only this one's, once, without a baseline)."""
    trips: dict[str, list[float]] = {"trip": [], "out": [], "back": []}
    base: dict[str, list[float]] = {"trip": [], "out": [], "back": []}
    for i in range(args.repeats if args.baseline else 1):
        runs = [(trips, None), *([(base, args.baseline)] if args.baseline else [])]
        for into, tree in runs:
            got = round_trips(
                url, tmp / f"roundtrip-{i}{'-base' if tree else ''}", args.round_trips, args.workers, tree=tree
            )
            for key, values in got.items():
                into[key] += values
    return trips, base


def _legs(trips: dict[str, list[float]]) -> str:
    """The p50 and p99 of a round trip's two legs (:func:`round_trips`), in ms."""
    return ", ".join(
        f"{what} p50 {1e3 * percentile(trips[key], 50):.2f} ms, p99 {1e3 * percentile(trips[key], 99):.2f} ms"
        for key, what in (("out", "put to started"), ("back", "finished to the optimizer"))
    )


# --- the store's time per result at 10k / 100k / 1M rows -----------------------------------------


def time_per_result(exp: Path, levels: list[int], batch: int, batches: int) -> dict[int, float]:
    """Seconds per result of ``PoolQueue.complete`` (batches of ``batch``) once the results and
    tasks tables hold each of ``levels`` rows (prefilled with ids above the experiment's)."""
    from emews.core.results import Result, Status, Task
    from emews.store import open_store
    from emews.store.pool_queue import PoolQueue

    out: dict[int, float] = {}
    with open_store(exp) as store:
        queue = PoolQueue(store)  # type: ignore[arg-type]
        db = store.connection  # type: ignore[attr-defined]
        pool = queue.register("bench", 1)
        base = 1_000_000_000
        have = int(db.execute("SELECT count(*) FROM results").fetchone()[0])
        next_id = base + 10 * max(levels)
        for level in levels:
            if level > have:
                with db.transaction():
                    lo, hi = base + have, base + level - 1
                    db.execute(
                        "INSERT INTO tasks (id, params, seed, submitted, attempt, ranks, state, pool) "
                        "SELECT g, '{\"x\": 0.5}', g, 0, 0, 1, 'done', %s FROM generate_series(%s::bigint, %s) g",
                        (pool, lo, hi),
                    )
                    db.execute(
                        "INSERT INTO results (id, status, objective, loss, params, metrics, submitted, started, "
                        "finished, pool) SELECT g, 'ok', 0, 0, '{\"x\": 0.5}', '{}', 0, 0, 0, %s "
                        "FROM generate_series(%s::bigint, %s) g",
                        (pool, lo, hi),
                    )
                db.execute("ANALYZE results")
                db.execute("ANALYZE tasks")
                have = level
            spent = 0.0
            count = 0
            for _ in range(batches):
                now = time.time()
                tasks = [Task(next_id + i, {"x": 0.5}, i, now) for i in range(batch)]
                next_id += batch
                queue.enqueue(tasks)
                claimed = queue.claim(pool, batch, 60.0)
                results = [
                    Result(c.task.id, c.task.params, Status.OK, 0.0, 0.0, submitted=now, started=now, finished=now)
                    for c in claimed
                ]
                t0 = time.perf_counter()
                queue.complete(pool, results)
                spent += time.perf_counter() - t0
                count += len(results)
            out[level] = spent / count
    return out


def server_round_trip(url: str, n: int = 500) -> float:
    """Median seconds of ``SELECT 1`` on one connection: the floor under every statement."""
    import psycopg

    trips = []
    with psycopg.connect(url, autocommit=True) as db:
        for _ in range(n):
            t0 = time.perf_counter()
            db.execute("SELECT 1").fetchone()
            trips.append(time.perf_counter() - t0)
    return statistics.median(trips)


# --- eqsql (child process in its own venv) ------------------------------------------------------


def eqsql_python(venv: Path) -> Path:
    """The venv's python with eqsql and psycopg2 (made on first use; eqsql's own dependencies are
    not installed: local_queue and db_tools need psycopg2 alone)."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", f"import eqsql, psycopg2; assert eqsql.__version__ == '{EQSQL_VERSION}'"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"making {venv} (eqsql {EQSQL_VERSION}, psycopg2-binary) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", f"eqsql=={EQSQL_VERSION}", "psycopg2-binary"],
        check=True,
    )
    subprocess.run(probe, check=True)
    return python


def eqsql_database(server: Any, python: Path, name: str) -> None:
    """A fresh database ``name`` with eqsql's tables, from its own workflow.sql."""
    import psycopg

    with psycopg.connect(server.url("postgres"), autocommit=True) as db:
        db.execute(f"DROP DATABASE IF EXISTS {name}")
        db.execute(f"CREATE DATABASE {name}")
    sql = subprocess.run(
        [
            str(python),
            "-c",
            "from importlib import resources; print(resources.files('eqsql').joinpath('workflow.sql').read_text())",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with psycopg.connect(server.url(name), autocommit=True) as db:
        db.execute(sql)


def run_eqsql(python: Path, server: Any, name: str, tasks: int, workers: int, trips: int) -> dict:
    args = [
        str(python),
        str(HERE),
        "--eqsql-child",
        "--port",
        str(server.port),
        "--db",
        name,
        "--tasks",
        str(tasks),
        "--workers",
        str(workers),
        "--round-trips",
        str(trips),
    ]
    env = {**os.environ, "USER": os.environ.get("USER", "postgres")}  # eqsql's db_tools reads $USER on import
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"eqsql run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[7:])


def _eqsql_worker(port: int, db: str, name: str) -> None:
    """One worker as eqsql's Python pools run one: query a task, run it, report it, until EQ_STOP."""
    from eqsql.task_queues import local_queue
    from eqsql.task_queues.core import EQ_STOP

    queue = local_queue.init_task_queue("127.0.0.1", "postgres", port, db)
    while True:
        msg = queue.query_task(EQSQL_TYPE, worker_pool=name, timeout=None)
        if msg["type"] == "status":
            if msg["payload"] == EQ_STOP:
                break
            continue
        queue.report_task(msg["eq_task_id"], EQSQL_TYPE, json.dumps(noop(json.loads(msg["payload"]))))
    queue.close()


def eqsql_child(args: argparse.Namespace) -> None:
    import multiprocessing

    from eqsql.task_queues import local_queue

    queue = local_queue.init_task_queue("127.0.0.1", "postgres", args.port, args.db)
    procs = [
        multiprocessing.Process(target=_eqsql_worker, args=(args.port, args.db, f"pool{i}"))
        for i in range(args.workers)
    ]
    for p in procs:
        p.start()
    payload = json.dumps({"x": 0.5})
    t0 = time.perf_counter()
    _, futures = queue.submit_tasks("bench", EQSQL_TYPE, [payload] * args.tasks)
    for future in queue.as_completed(futures):
        future.result()
    rate = args.tasks / (time.perf_counter() - t0)
    with queue.db.conn, queue.db.conn.cursor() as cur:
        cur.execute("SELECT extract(epoch from max(time_stop) - min(time_created)) FROM eq_tasks")
        in_db = args.tasks / float(cur.fetchone()[0])
    trips = []
    for _ in range(args.round_trips):
        t0 = time.perf_counter()
        _, future = queue.submit_task("bench", EQSQL_TYPE, payload)
        future.result(timeout=None)  # eqsql's default polling: 0.5 s, then 0.25 s more each time
        trips.append(time.perf_counter() - t0)
    for _ in procs:
        queue.stop_worker_pool(EQSQL_TYPE)
    for p in procs:
        p.join(timeout=60)
    queue.close()
    print("RESULT " + json.dumps({"tasks_per_s": rate, "in_db_per_s": in_db, "trips": trips}), flush=True)


# --- driver ---------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=1_000, help="no-op evaluations of each launch")
    parser.add_argument("--workers", type=int, default=2, help="workers per pool")
    parser.add_argument("--pools", default="1,2,4")
    parser.add_argument("--round-trips", type=int, default=100)
    parser.add_argument("--rows", default="10000,100000,1000000", help="results-table sizes for time per result")
    parser.add_argument("--batch", type=int, default=10, help="results per PoolQueue.complete")
    parser.add_argument("--batches", type=int, default=50, help="complete calls per table size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="300 tasks, 30 round trips, 1 repeat, up to 100k rows")
    parser.add_argument("--eqsql-venv", default="/tmp/emews-bench-eqsql")
    parser.add_argument("--baseline", help="a source tree of another emews: each launch runs with it too, alternating")
    parser.add_argument("--eqsql-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.eqsql_child:
        eqsql_child(args)
        return
    if args.baseline and not (Path(args.baseline) / "emews" / "__init__.py").is_file():
        parser.error(f"--baseline: {args.baseline} is not an emews source tree (no emews/__init__.py in it)")
    if args.quick:
        args.tasks, args.round_trips, args.repeats, args.rows = 300, 30, 1, "10000,100000"
    pool_counts = [0] + [int(k) for k in args.pools.split(",")]  # 0: SQLite, no pools (today's path)
    levels = [int(n) for n in args.rows.split(",")]
    eq_workers = 2 * args.workers  # as many Python workers as the 2-pool emews run has

    sys.path.insert(0, str(HERE.parents[1] / "tests" / "store"))
    from pgserver import start_server

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` still stops the server (finally)
    python = eqsql_python(Path(args.eqsql_venv))
    with tempfile.TemporaryDirectory(prefix="emews-shared-store-") as tmp_name:
        tmp = Path(tmp_name)
        server = start_server(tmp / "pg")
        data = tmp / "pg" / "data"
        try:
            print(
                f"PostgreSQL on 127.0.0.1:{server.port}; {os.cpu_count()} cores (shared: every process of "
                f"both systems and the server run on them); {args.workers} workers per pool, {args.tasks} "
                f"no-op tasks per launch, {args.round_trips} round trips; {args.repeats} repeats",
                flush=True,
            )
            url = server.url()
            runs: dict[int, list[dict]] = {k: [] for k in pool_counts}
            base_runs: dict[int, list[dict]] = {k: [] for k in pool_counts}
            eq_runs: list[dict] = []
            for i in range(args.repeats):
                line = []
                for k in pool_counts:
                    row = launch(
                        url, tmp, f"r{i}-k{k}", k, args.workers, args.tasks, "{name: random, options: {seed: 1}}",
                        data=data,
                    )  # fmt: skip
                    runs[k].append(row)
                    line.append(
                        f"{k or 'SQLite, no'} pools {row['whole_per_s']:,.0f}/s whole, {row['in_run_per_s']:,.0f}/s in run, "
                        f"{row['all_pools_per_s']:,.0f}/s with all pools running, "
                        f"rank 0 {row['rank0_cpu_ms']:.2f} ms CPU/task ({row['rank0_cpu_total_s']:.1f} s), "
                        f"server {row['server_cpu_ms']:.2f} ms CPU/task"
                    )
                    if args.baseline:
                        row = launch(
                            url,
                            tmp,
                            f"r{i}-k{k}-base",
                            k,
                            args.workers,
                            args.tasks,
                            "{name: random, options: {seed: 1}}",
                            tree=args.baseline,
                            data=data,
                        )
                        base_runs[k].append(row)
                        line.append(
                            f"baseline {row['whole_per_s']:,.0f}/s whole, {row['in_run_per_s']:,.0f}/s in run, "
                            f"{row['all_pools_per_s']:,.0f}/s with all pools running, "
                            f"rank 0 {row['rank0_cpu_ms']:.2f} ms CPU/task, server {row['server_cpu_ms']:.2f} ms CPU/task"
                        )
                name = f"eqsql_{i}"
                eqsql_database(server, python, name)
                eq = run_eqsql(python, server, name, args.tasks, eq_workers, args.round_trips)
                eq_runs.append(eq)
                line.append(
                    f"eqsql ({eq_workers} workers) {eq['tasks_per_s']:,.0f}/s, {eq['in_db_per_s']:,.0f}/s in db"
                )
                print(f"  repeat {i + 1}: " + " | ".join(line), flush=True)
            trips, base_trips = alternating_round_trips(url, tmp, args)
            eq_trips = [t for eq in eq_runs for t in eq["trips"]]
            per_result = time_per_result(Path(runs[pool_counts[1]][0]["exp"]), levels, args.batch, args.batches)
            ping = server_round_trip(url)
        finally:
            server.stop()

    def med(k: int, key: str, of: dict[int, list[dict]] = runs) -> float:
        return statistics.median(r[key] for r in of[k])

    eq_rate = statistics.median(r["tasks_per_s"] for r in eq_runs)
    print()
    print(
        f"no-op tasks through PostgreSQL: emews launch --workers {args.workers} --pools K, {args.tasks} evaluations "
        "(progress on, CSV and summary included); SQLite: the same launch without store.url and --pools"
    )
    print(
        f"{'pools':<8}{'whole cmd/s':>14}{'in run/s':>12}{'all pools running/s':>22}{'rank 0 CPU ms/task (in run)':>30}"
        f"{'rank 0 CPU s (all)':>20}{'server CPU ms/task':>20}"
    )
    for k in pool_counts:
        print(
            f"{k or 'SQLite':<8}{med(k, 'whole_per_s'):>14,.0f}{med(k, 'in_run_per_s'):>12,.0f}"
            f"{med(k, 'all_pools_per_s'):>22,.0f}{med(k, 'rank0_cpu_ms'):>30.2f}{med(k, 'rank0_cpu_total_s'):>20.1f}"
            f"{med(k, 'server_cpu_ms'):>20.3f}"
        )
    if args.baseline:
        print(f"baseline ({args.baseline}), the same launches alternating with the above:")
        for k in pool_counts:
            print(
                f"{k or 'SQLite':<8}{med(k, 'whole_per_s', base_runs):>14,.0f}{med(k, 'in_run_per_s', base_runs):>12,.0f}"
                f"{med(k, 'all_pools_per_s', base_runs):>22,.0f}{med(k, 'rank0_cpu_ms', base_runs):>30.2f}"
                f"{med(k, 'rank0_cpu_total_s', base_runs):>20.1f}{med(k, 'server_cpu_ms', base_runs):>20.3f}"
            )
    print(
        f"eqsql {EQSQL_VERSION}, {eq_workers} Python workers: {eq_rate:,.0f} tasks/s (submit to last result), "
        f"{statistics.median(r['in_db_per_s'] for r in eq_runs):,.0f}/s in the database"
    )
    if 2 in runs:
        print(
            f"emews 2 pools / eqsql: {med(2, 'whole_per_s') / eq_rate:.2f}x (whole command), "
            f"{med(2, 'in_run_per_s') / eq_rate:.2f}x (in run), {med(2, 'all_pools_per_s') / eq_rate:.2f}x (both pools "
            "running)   [target >= 5x, >= 10,000/s]"
        )
    print(
        f"single-task round trip: emews (1 pool) p50 {1e3 * percentile(trips['trip'], 50):.1f} ms, p99 "
        f"{1e3 * percentile(trips['trip'], 99):.1f} ms; eqsql p50 {1e3 * percentile(eq_trips, 50):.1f} ms, p99 "
        f"{1e3 * percentile(eq_trips, 99):.1f} ms   [target p50 <= 10 ms]"
    )
    print(f"  its legs: {_legs(trips)}")
    if base_trips["trip"]:
        print(
            f"single-task round trip, baseline ({args.baseline}; alternating with the above, "
            f"{len(trips['trip'])} and {len(base_trips['trip'])} trips): p50 "
            f"{1e3 * percentile(base_trips['trip'], 50):.1f} ms, p99 {1e3 * percentile(base_trips['trip'], 99):.1f} ms"
        )
        print(f"  its legs: {_legs(base_trips)}")
    print(
        f"server round trip (SELECT 1, one connection): p50 {1e6 * ping:.0f} us; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the end"
    )
    print(
        f"store time per result (PoolQueue.complete, batches of {args.batch}):  "
        + ",  ".join(f"{n:,} rows {1e6 * s:.0f} us" for n, s in per_result.items())
        + "   [target: flat]"
    )


if __name__ == "__main__":
    main()
