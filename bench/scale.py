"""Scale benchmark: the real rank-0 path at simulated width (issue 27).

    python bench/scale.py [--workers 1000,10000,100000] [--optimizers random,sweep,ga]
                          [--sizes one|mixed] [--demand 2000] [--rounds 2] [--max-seconds 300]
                          [--profile] [--trace DIR]

Rank 0 runs as in a job (``run_optimizer_rank``: the optimizer thread, the evaluator, the queue
pair, the distributor with its slot or team placement, group commit and the real SQLite store in
a temporary experiment directory); only the transport is simulated: N virtual workers, each
running the tasks sent to it one after another, every task a log-normal time (sigma 0.5) around
``N / demand`` seconds, so the workers together ask ``demand`` tasks/s of rank 0 (2,000/s: 100k
workers on 50 s tasks; 1k workers on 0.5 s tasks). Clocks are real: what rank 0 cannot keep up
with shows as idle workers. The simulator's own time runs on rank 0's clock too: a send only
notes the task (the outcome is made when it is polled), so that the first wave costs about what
it would with MPI sends; the first-wave line says how much of it was still the simulator's.

Per cell it prints: the busy fraction of the workers from the first dispatch to the last (what a
job pays for, the first round included; to the stop for a cell stopped at ``--max-seconds`` before
its budget was dispatched), the time from a worker freeing to its
next task starting (p50, p99; 0 when a prefetched task was waiting), rank-0 CPU per task (the
simulator's own CPU taken out), peak RSS, results stored per second and the store's time per
commit (under the first-wave line: its transactions, the results in each), and the search's
quality per evaluation: every simulated task reports a made-up loss of its point (``loss``,
minimum 0), and the cell prints the best found and the median loss of the tasks after the first
wave (one per worker: the points a model chose), and how long the first
wave took to reach every worker (each idle until then); ``--profile`` adds the
distributor thread's ten most expensive functions.
For the model-based optimizers a second line gives their model's counters (fits,
hyperparameter fits, whether the model process ran, runners-up and random fillers handed out); a
cell that stopped early says why (``--max-seconds``, or the optimizer's error).
``--trace DIR``: where the waits come from (issue 27, the GA's p99): per cell a JSON file of
every gap over 50 ms (when the worker freed, how long it waited), the samples of a 10 ms sampler
thread (its lateness, a stall of the whole interpreter; the tasks queued; the results on their
way to the optimizer), the garbage collections (start, length, generation), the distributor's
passes and the optimizer's ``put`` calls over 20 ms, and a summary printed under the cell.
``--optimizers decentralized``: the anchor of issue 27 item 3, DeepHyper-style decentralized
search (16 Bayesian optimizers on the shared results, each with its own points in flight; see
:class:`Decentralized`), for its quality per evaluation against the others.
``--sizes mixed``: tasks of 1, 2 and 4 ranks (70/25/5%, nodes of 4 workers) through the gang
placement. A cell that runs past ``--max-seconds`` is stopped like a job (SIGINT) and says so.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import heapq
import io
import itertools
import json
import math
import os
import pstats
import resource
import signal
import sys
import tempfile
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from emews.config.plugins import OPTIMIZERS
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Outcome, Result, Status, Task
from emews.core.space import Categorical, Float, Int, Space
from emews.core.task_size import FixedSize, TaskSize
from emews.job.wiring import RunSpec, run_optimizer_rank
from emews.objective.function import ObjectiveRef
from emews.optimizers._bayes._engine import Engine
from emews.optimizers._bayes._space import SpaceMap
from emews.runtime import distributor as distributor_module
from emews.runtime.interrupt import Interrupt
from emews.runtime.teams import TeamTask
from emews.runtime.transport import Message, Tag
from emews.runtime.worker import WorkerStopped
from emews.store.results_store import ResultsStore

HERE = Path(__file__).resolve()
SIGMA = 0.5
WORKERS_PER_NODE = 4
OPTIONS: dict[str, dict[str, Any]] = {
    "random": {"seed": 1},
    "sweep": {"levels": 10},
    "ga": {"seed": 1, "strategy": "async"},
    "bayes": {"seed": 1},
    "hyperspace": {"seed": 1},
    "mbo": {"seed": 1},
    "decentralized": {"seed": 1},
}
SPACE = Space(
    {
        "lr": Float(1e-5, 1e-1, log=True),
        "dropout": Float(0.0, 0.5),
        "units": Int(8, 512),
        "act": Categorical(["relu", "tanh", "sigmoid"]),
    }
)


def noop(_: object = None) -> float:
    return 0.0


def loss(params: Any) -> float:
    """What a simulated task reports (a made-up validation loss, minimum 0 at lr 1e-3, dropout
    0.2, 128 units, relu): the search quality per evaluation at width, against random."""
    return float((math.log10(params["lr"]) + 3.0) ** 2 / 4.0 + (params["dropout"] - 0.2) ** 2 * 4.0
                 + ((params["units"] - 128) / 256) ** 2 + (params["act"] != "relu") * 0.5)


class Decentralized(AskTellOptimizer):
    """DeepHyper-style decentralized search, the anchor of issue 27 item 3: ``groups`` Bayesian
    optimizers (the ``bayes`` engine, GP + EI, each its own seed), each standing for the workers
    of one group, all learning every result (one shared table of observations, as DeepHyper's
    workers share their results' storage), each conditioned only on its own points in flight
    (DeepHyper's workers do not see each other's pending points). A batch of freed workers is
    served by the group whose turn it is (one fit). Bounded: 16 groups, not one model per
    worker (10,000 GP fits per round of a 10,000-worker run would not fit on this machine);
    each group's work per fit is bounded as ``bayes``' (200-point GP window, 64 lies)."""

    def __init__(self, seed: int = 1, groups: int = 16) -> None:
        self.seed, self.groups = seed, groups
        self._turn = 0
        self._owner: dict[int, int] = {}  # task id -> the group that proposed it
        self._own: list[dict[int, list[Any]]] = []  # per group: its points in flight
        self._fresh: list[list[Any]] = []
        self._fresh_group = 0

    def start(self, space: Space, workers: int) -> None:
        super().start(space, workers)
        self.map = SpaceMap(space)
        count = max(1, min(self.groups, workers))
        self.engines = [Engine(self.map, seed=self.seed * 1000 + g) for g in range(count)]
        shared = self.engines[0]
        for engine in self.engines[1:]:  # one table of observations: a result told once reaches all
            engine.X, engine.y, engine.failures = shared.X, shared.y, shared.failures
        self._own = [{} for _ in self.engines]

    def suggest(self, n: int) -> list[dict[str, Any]]:
        g = self._turn % len(self.engines)
        self._turn += 1
        xs = self.engines[g].propose(n, list(self._own[g].values()))
        self._fresh, self._fresh_group = xs, g
        return [self.map.from_skopt(x) for x in xs]

    def submitted(self, ids: Any, points: Any) -> None:
        super().submitted(ids, points)
        for i, x in zip(ids, self._fresh, strict=False):
            self._own[self._fresh_group][i] = x
            self._owner[i] = self._fresh_group
        self._fresh = []

    def ingest(self, results: Any) -> None:
        rows = [r for r in results if isinstance(r, Result)]
        for r in rows:
            g = self._owner.pop(r.id, None)
            if g is not None:
                self._own[g].pop(r.id, None)
        self.engines[0].tell([self.map.to_skopt(r.params) for r in rows], [r.loss for r in rows])


class MixedSize(TaskSize):
    """1, 2 or 4 ranks (70/25/5%), drawn from the point (so a task keeps its size on resume)."""

    gang = True

    def __call__(self, params: Any) -> int:
        u = zlib.crc32(repr(sorted(params.items())).encode()) / 2**32
        return 1 if u < 0.70 else 2 if u < 0.95 else 4


@dataclass
class SimulatedWorkers:
    """Rank 0's transport to ``n`` virtual workers (ranks 1..n) on the real clock."""

    n: int
    mean: float
    seed: int = 0
    rank: int = 0
    sending: int = 0
    size: int = field(init=False)
    #: the simulator's own time (its sends and polls): wall (the first-wave line), and CPU (thread
    #: time, taken out of rank 0's CPU per task; the wall time, taken out before, exceeded rank 0's
    #: CPU on a loaded machine and the column read 0)
    overhead: float = 0.0
    overhead_cpu: float = 0.0
    spans: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of every task run
    gaps: list[float] = field(default_factory=list)  # a worker's idle time before each next task
    waits: list[tuple[float, float]] = field(default_factory=list)  # (freed, gap) of the gaps over 50 ms
    first_task: dict[int, float] = field(default_factory=dict)
    last_dispatch: float = 0.0
    dispatched: list[Any] = field(default_factory=list)  # every task's point, in dispatch order
    started: set[int] = field(default_factory=set)  # ids of the tasks dispatched (a team's once)
    ramp_overhead: float = 0.0  # the simulator's own time until every worker had a task

    def __post_init__(self) -> None:
        self.size = self.n + 1
        self._free_at = [0.0] * self.size
        # made once: the simulator's own time is rank 0's wall time too (the first wave's above all)
        self._hosts = [f"node{(rank - 1) // WORKERS_PER_NODE}" for rank in range(self.size)]
        self._served = [0] * self.size
        self._due: list[tuple[float, int, int, Task, float]] = []  # (end, order, rank, task, start)
        # every virtual worker says it is ready at once, as a real one does once its objective is set up
        self._ready: deque[Message] = deque(Message(rank, Tag.READY, None) for rank in range(1, self.size))
        self._seq = itertools.count()
        self._wall = time.time() - time.perf_counter()
        mu = np.log(self.mean) - SIGMA**2 / 2  # log-normal with this mean
        self._draws = np.random.default_rng(self.seed).lognormal(mu, SIGMA, size=1 << 20).tolist()

    def send(self, payload: Any, dest: int, tag: Tag) -> None:
        c0, t0 = time.thread_time(), time.perf_counter()
        if tag == Tag.TASK:
            self._start(payload, dest, t0)
        elif tag == Tag.STOP:
            self._ready.append(Message(dest, Tag.STOPPED, WorkerStopped(self._served[dest])))
        # CANCEL, TRIAL_REPLY: every simulated task succeeds and reports nothing
        self.overhead += time.perf_counter() - t0
        self.overhead_cpu += time.thread_time() - c0

    def _start(self, items: list[Any], rank: int, now: float) -> None:
        self.last_dispatch = now
        if rank not in self.first_task:
            self.first_task[rank] = now
            if len(self.first_task) == self.n:  # the first wave is out: what the simulator took of it
                self.ramp_overhead = self.overhead
        for item in items:
            task = item.task if isinstance(item, TeamTask) else item
            free = self._free_at[rank]
            start = max(now, free)
            if free:
                self.gaps.append(start - free)
                if start - free > Trace.GAP:
                    self.waits.append((free, start - free))
            duration = self._draws[task.id % len(self._draws)]  # team members agree
            end = start + duration
            self._free_at[rank] = end
            self.spans.append((start, end))
            if task.id not in self.started:
                self.started.add(task.id)
                self.dispatched.append(task.params)
            # the outcome is made when it is polled: sending costs rank 0 what an MPI send would
            heapq.heappush(self._due, (end, next(self._seq), rank, task, start))

    def losses(self) -> list[float]:
        """Every task's loss, in dispatch order."""
        return [loss(params) for params in self.dispatched]

    def poll(self) -> Message | None:
        if self._ready:
            return self._ready.popleft()
        due = self._due
        if not due:
            return None
        c0, t0 = time.thread_time(), time.perf_counter()
        message = None
        if due[0][0] <= t0:
            end, _, rank, task, start = heapq.heappop(due)
            self._served[rank] += 1
            outcome = Outcome(
                task.id, Status.OK, value=loss(task.params), rank=rank, host=self._hosts[rank],
                started=start + self._wall, finished=end + self._wall,
            )
            message = Message(rank, Tag.OUTCOME, [outcome])
        self.overhead += time.perf_counter() - t0
        self.overhead_cpu += time.thread_time() - c0
        return message


@dataclass
class StoreTimer:
    """Time and rows of every store commit (wrapping :meth:`ResultsStore.commit`)."""

    seconds: float = 0.0
    commits: int = 0
    rows: int = 0

    def __enter__(self) -> StoreTimer:
        self._original = ResultsStore.commit
        timer = self

        def commit(store: Any, tasks: Any = (), results: Any = ()) -> Any:
            t0 = time.perf_counter()
            try:
                return timer._original(store, tasks, results)
            finally:
                timer.seconds += time.perf_counter() - t0
                timer.commits += bool(tasks or results)  # an empty one writes nothing
                timer.rows += len(results)

        ResultsStore.commit = commit  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        ResultsStore.commit = self._original  # type: ignore[method-assign]


class ProfiledDistributor:
    """cProfile of the distributor thread while inside (``--profile``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.stats = ""

    def __enter__(self) -> ProfiledDistributor:
        self._original = distributor_module.Distributor._run
        if not self.enabled:
            return self
        holder = self

        def run(distributor: Any) -> None:
            profile = cProfile.Profile()
            profile.enable()
            try:
                holder._original(distributor)
            finally:
                profile.disable()
                out = io.StringIO()
                pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(10)
                holder.stats = out.getvalue()

        distributor_module.Distributor._run = run  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        distributor_module.Distributor._run = self._original  # type: ignore[method-assign]


class Trace:
    """What rank 0 did around the long gaps (``--trace``): a sampler thread, the garbage
    collector's callbacks, the distributor's long passes and the optimizer's long ``put`` calls."""

    GAP = 0.050  # gaps above this are listed
    LONG = 0.020  # passes and puts above this are listed
    PERIOD = 0.010  # the sampler's period

    def __init__(self, directory: str | None) -> None:
        self.directory = directory
        self.gc: list[tuple[float, float, int, int]] = []  # (start, seconds, generation, collected)
        self.samples: list[tuple[float, float, int, int, int]] = []  # (when, late, queued, to optimizer, stock)
        self.passes: list[tuple[float, float]] = []  # (start, seconds) of distributor passes over LONG
        self.puts: list[tuple[float, float, int]] = []  # (start, seconds, points) of puts over LONG
        self.gets: list[tuple[float, float, int]] = []  # (start, seconds, results) of optimizer gets
        self._gc_start = 0.0
        self._stop = threading.Event()
        self.distributor: Any = None
        self.breeders: list[Any] = []
        self.cpu: dict[str, float] = {}  # CPU seconds of each thread of rank 0, last seen by the sampler

    def __enter__(self) -> Trace:
        if self.directory is None:
            return self
        from emews.core.evaluator import Evaluator
        from emews.optimizers._ga.wide import WideBreeder

        trace = self
        self._saved = [(distributor_module.Distributor, "__init__"), (distributor_module.Distributor, "_step"),
                       (Evaluator, "put"), (Evaluator, "get"), (WideBreeder, "start")]
        self._originals = [getattr(c, n) for c, n in self._saved]
        init, step, put, get, start = self._originals

        def d_init(d: Any, *a: Any, **k: Any) -> None:
            init(d, *a, **k)
            trace.distributor = d

        def d_step(d: Any) -> bool:
            t0 = time.perf_counter()
            out = step(d)
            if (dt := time.perf_counter() - t0) > trace.LONG:
                trace.passes.append((t0, dt))
            return out

        def e_put(e: Any, points: Any, **k: Any) -> Any:
            points = list(points)
            t0 = time.perf_counter()
            out = put(e, points, **k)
            if (dt := time.perf_counter() - t0) > trace.LONG:
                trace.puts.append((t0, dt, len(points)))
            return out

        def e_get(e: Any, *a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            out = get(e, *a, **k)
            trace.gets.append((t0, time.perf_counter() - t0, len(out)))
            return out

        def b_start(b: Any) -> Any:
            trace.breeders.append(b)
            return start(b)

        for (cls, name), fn in zip(self._saved, (d_init, d_step, e_put, e_get, b_start), strict=True):
            setattr(cls, name, fn)
        gc.callbacks.append(self._on_gc)
        threading.Thread(target=self._sample, name="scale-trace", daemon=True).start()
        return self

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc.append((self._gc_start, time.perf_counter() - self._gc_start, info["generation"], info["collected"]))

    def _sample(self) -> None:
        due = time.perf_counter()
        while not self._stop.is_set():
            due += self.PERIOD
            time.sleep(max(due - time.perf_counter(), 0.0))
            now = time.perf_counter()
            d = self.distributor
            # queued: in the queue pair, and in the gang scheduler (--sizes mixed takes them at once)
            queued = len(d._queues.tasks) + d._dispatch.waiting if d is not None else 0
            delivered = len(d._queues._results) + len(d._group.results) if d is not None else 0
            stock = len(self.breeders[-1]._buffer) if self.breeders else -1
            self.samples.append((now, now - due, queued, delivered, stock))
            for thread in threading.enumerate():
                try:
                    self.cpu[thread.name] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
                except (OSError, OverflowError):
                    pass
            due = max(due, now)

    def __exit__(self, *exc: object) -> None:
        if self.directory is None:
            return
        self._stop.set()
        gc.callbacks.remove(self._on_gc)
        for (cls, name), fn in zip(self._saved, self._originals, strict=True):
            setattr(cls, name, fn)

    def report(self, name: str, workers: int, sim: SimulatedWorkers) -> str:
        """Write the trace as JSON; a summary: the long gaps by stretch of the run, and what went on."""
        if self.directory is None:
            return ""
        t0 = min(sim.first_task.values(), default=0.0)
        waits = [(free - t0, gap) for free, gap in sim.waits if gap > self.GAP]
        data = {
            "t0": t0, "long_gaps": waits, "gc": [(s - t0, d, g, c) for s, d, g, c in self.gc],
            "samples": [(t - t0, *rest) for t, *rest in self.samples],
            "passes": [(s - t0, d) for s, d in self.passes], "puts": [(s - t0, d, n) for s, d, n in self.puts],
            "gets": [(s - t0, d, n) for s, d, n in self.gets],
        }
        path = Path(self.directory) / f"{name}-{workers}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
        lines = [f"trace -> {path}: {len(waits):,} gaps over {self.GAP * 1e3:.0f} ms of {len(sim.gaps):,}"]
        if waits:
            frees = np.array([w[0] for w in waits])
            for lo in np.unique(np.floor(frees / 5) * 5):
                inside = [g for f, g in waits if lo <= f < lo + 5]
                lines.append(f"  freed at {lo:5.0f}-{lo + 5:<4.0f} s: {len(inside):6,} gaps, longest {max(inside):.2f} s")
        late = sorted(self.samples, key=lambda s: -s[1])[:5]
        lines.append("  sampler late most: " + ", ".join(f"{lag * 1e3:.0f} ms at {t - t0:.1f} s" for t, lag, *_ in late))
        big_gc = sorted(self.gc, key=lambda g: -g[1])[:5]
        lines.append("  longest gc: " + ", ".join(f"{d * 1e3:.0f} ms gen{g} at {s - t0:.1f} s" for s, d, g, _ in big_gc))
        lines.append(f"  gc total {sum(g[1] for g in self.gc):.2f} s in {len(self.gc)}; distributor passes over "
                     f"{self.LONG * 1e3:.0f} ms: {len(self.passes)}, {sum(p[1] for p in self.passes):.2f} s, longest "
                     f"{max((p[1] for p in self.passes), default=0):.2f} s; puts over it: {len(self.puts)}")
        collector = getattr(self.distributor, "collector", None)
        if collector is not None:
            lines.append(f"  full collections frozen instead (distributor_gc): {collector.freezes}")
        lines.append("  thread CPU s: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(self.cpu.items())))
        empty = [t - t0 for t, _, q, *_ in self.samples if q == 0 and t > t0]
        lines.append(f"  samples with no task queued: {len(empty)} of {len(self.samples)}"
                     + (f", first at {empty[0]:.1f} s, last at {empty[-1]:.1f} s" if empty else ""))
        return "\n".join(lines)


def run_cell(name: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    mean = workers / args.demand
    sim = SimulatedWorkers(workers, mean, seed=1)
    optimizer_class = Decentralized if name == "decentralized" else OPTIMIZERS.resolve(name)
    size: TaskSize = MixedSize() if args.sizes == "mixed" else FixedSize()
    nodes = {r: f"node{(r - 1) // WORKERS_PER_NODE}" for r in range(1, workers + 1)}
    interrupt = Interrupt().install()
    stopper = threading.Timer(args.max_seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    stopper.daemon = True
    trace = Trace(args.trace)
    with (tempfile.TemporaryDirectory() as tmp, StoreTimer() as store, ProfiledDistributor(args.profile) as prof,
          trace):
        made: list[Any] = []

        def make() -> Any:
            made.append(optimizer_class(**OPTIONS[name]))
            return made[-1]

        spec = RunSpec(
            SPACE, make, ObjectiveRef(str(HERE), function="noop"),
            budget=args.rounds * workers, isolation="inline", exp_dir=Path(tmp), show_progress=False,
            task_size=size,
        )
        cpu0, t0 = time.process_time(), time.perf_counter()
        stopper.start()
        summary = run_optimizer_rank(spec, sim, list(range(1, workers + 1)), interrupt=interrupt, nodes=nodes)
        stopper.cancel()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    signal.signal(signal.SIGINT, signal.default_int_handler)
    done = max(summary.completed, 1)
    # a cell stopped at --max-seconds before its budget was dispatched counts to the stop: the
    # workers left waiting on the optimizer were idle
    starved = summary.error is not None and len(sim.started) < spec.budget
    end = t0 + elapsed if starved else sim.last_dispatch
    window = (min(sim.first_task.values(), default=t0), end)
    spans = np.array(sim.spans) if sim.spans else np.zeros((0, 2))
    busy = np.clip(spans, *window)
    width = max(window[1] - window[0], 1e-9)
    gaps = sim.gaps or [0.0]
    losses = sim.losses()
    return {
        "optimizer": name,
        "workers": workers,
        "task_s": mean,
        "done": summary.completed,
        "dispatched": len(sim.started),
        "stopped": summary.error is not None,
        "error": None if summary.error is None else f"{type(summary.error).__name__}: {summary.error}"[:300],
        "elapsed_s": elapsed,
        "busy": float((busy[:, 1] - busy[:, 0]).sum()) / (workers * width) if len(busy) else 0.0,
        "gap_p50_ms": 1e3 * float(np.percentile(gaps, 50)),
        "gap_p99_ms": 1e3 * float(np.percentile(gaps, 99)),
        "cpu_us_per_task": 1e6 * max(cpu - sim.overhead_cpu, 0.0) / done,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "stored_per_s": store.rows / elapsed,
        "ms_per_commit": 1e3 * store.seconds / max(store.commits, 1),
        "commits": store.commits,
        "rows_per_commit": store.rows / max(store.commits, 1),
        "profile": prof.stats,
        "trace": trace.report(name, workers, sim),
        "model": {k: v for k, v in getattr(made[0], "stats", {}).items()
                  if k in ("fits", "hyperfits", "model_process", "runners_up", "random_fillers", "batches",
                          "screened", "from_stock", "unscreened", "bred", "factor")} if made else {},
        # quality per evaluation: the best loss found, the median loss of the tasks after the first wave
        # the first wave: from the first worker's first task to the last one's (idle until then)
        "ramp_s": (max(sim.first_task.values()) - min(sim.first_task.values())) if sim.first_task else 0.0,
        "ramp_sim_s": sim.ramp_overhead,
        "best": min(losses, default=math.nan),
        "later_median": float(np.median(losses[workers:])) if len(losses) > workers else math.nan,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1000,10000,100000")
    parser.add_argument("--optimizers", default="random,sweep,ga")
    parser.add_argument("--sizes", choices=["one", "mixed"], default="one")
    parser.add_argument("--demand", type=float, default=2000.0, help="tasks/s the workers ask of rank 0")
    parser.add_argument("--rounds", type=int, default=2, help="evaluations per worker")
    parser.add_argument("--max-seconds", type=float, default=300.0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--trace", metavar="DIR", help="write where the long gaps come from to DIR (see above)")
    args = parser.parse_args()
    unknown = sorted(set(args.optimizers.split(",")) - OPTIONS.keys())
    if unknown:
        parser.error(f"--optimizers: unknown {', '.join(unknown)}; allowed: {', '.join(OPTIONS)}")
    try:
        widths = [int(w) for w in args.workers.split(",")]
    except ValueError:
        parser.error(f"--workers: {args.workers!r} is not a comma-separated list of whole numbers")
    if any(w < 1 for w in widths):
        parser.error("--workers: every width must be at least 1")
    print(f"rank 0 at simulated width: {args.demand:g} tasks/s asked, {args.rounds} tasks per worker, "
          f"task sizes {args.sizes}, {os.cpu_count()} cores", flush=True)
    print(f"{'optimizer':11} {'workers':>8} {'task s':>7} {'done':>8} {'busy':>6} {'gap p50':>8} {'gap p99':>8} "
          f"{'cpu/task':>9} {'RSS MB':>7} {'stored/s':>9} {'ms/commit':>9} {'best':>7} {'median 2+':>9}")
    for name in args.optimizers.split(","):
        for workers in widths:
            row = run_cell(name, workers, args)
            note = f"  (stopped: {row['error']}; {row['dispatched']:,} dispatched)" if row["stopped"] else ""
            print(f"{name:11} {workers:8,d} {row['task_s']:7.2f} {row['done']:8,d} {row['busy']:6.1%} "
                  f"{row['gap_p50_ms']:6.1f}ms {row['gap_p99_ms']:6.1f}ms {row['cpu_us_per_task']:7.0f}us "
                  f"{row['rss_mb']:7.0f} {row['stored_per_s']:9,.0f} {row['ms_per_commit']:9.2f} {row['best']:7.4f} "
                  f"{row['later_median']:9.4f}{note}", flush=True)
            print(f"{'':11} first wave: every worker had a task {row['ramp_s']:.2f} s after the first "
                  f"(the simulator's own time until then: {row['ramp_sim_s']:.2f} s); store: "
                  f"{row['commits']:,} commits, {row['rows_per_commit']:.1f} results each", flush=True)
            if row["model"]:
                print(f"{'':11} model: {row['model']}", flush=True)
            if row["trace"]:
                print(row["trace"], flush=True)
            if row["profile"]:
                print(row["profile"], flush=True)


if __name__ == "__main__":
    sys.exit(main())
