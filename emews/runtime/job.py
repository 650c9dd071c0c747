"""Wiring one run together: the optimizer rank, the worker ranks, and the two backends."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from emews.evaluator import BudgetExhausted, Evaluator
from emews.optimizer import Optimizer
from emews.queues import QueuePair
from emews.results import Result, Task
from emews.runtime.distributor import Distributor
from emews.runtime.inline import InlineRunner
from emews.runtime.isolated import ProcessRunner
from emews.runtime.objective import ObjectiveRef, TaskContext
from emews.runtime.progress import Progress, ProgressReporter
from emews.runtime.store import ResultsStore
from emews.runtime.transport import ThreadHub, Transport
from emews.runtime.worker import Runner, worker_loop
from emews.space import Space


@dataclass
class RunSpec:
    """Everything a run needs, independent of where its settings came from."""

    space: Space
    make_optimizer: Callable[[], Optimizer]
    objective: ObjectiveRef
    budget: int
    direction: str = "minimize"
    seed: int = 0
    isolation: str = "process"
    timeout: float | None = None
    memory_limit: int | None = None
    exp_dir: Path | None = None
    progress_interval: float | None = None
    show_progress: bool = True

    @property
    def sign(self) -> float:
        return -1.0 if self.direction == "maximize" else 1.0

    @property
    def runs_root(self) -> Path | None:
        return None if self.exp_dir is None else self.exp_dir / "runs"

    @property
    def store_path(self) -> Path | None:
        return None if self.exp_dir is None else self.exp_dir / "results.db"


@dataclass
class RunSummary:
    """What a finished run reports."""

    completed: int
    failed: int
    best: Result | None
    elapsed: float
    error: BaseException | None = None
    all_stopped: bool = True   # every worker confirmed its stop
    replayed: int = 0          # evaluations answered from a resumed experiment's store


class OptimizerFailed(RuntimeError):
    """The optimizer raised; carries its formatted traceback."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.traceback = "".join(traceback.format_exception(error))
        super().__init__(f"the optimizer raised {type(error).__name__}: {error}")


def make_runner(spec: RunSpec, rank: int, gpu_ids: list[int], *, use_alarm: bool = True) -> Runner:
    """The objective runner for one worker rank, per ``spec.isolation``."""
    host = socket.gethostname()

    def make_context(task: Task) -> TaskContext:
        return TaskContext(task.id, rank, task.seed, list(gpu_ids), host, spec.runs_root)

    if spec.isolation == "inline":
        return InlineRunner(spec.objective, timeout=spec.timeout if use_alarm else None,
                            make_context=make_context)
    return ProcessRunner(spec.objective, timeout=spec.timeout, memory_limit=spec.memory_limit,
                         make_context=make_context)


@contextlib.contextmanager
def short_gil_switches(interval: float = 2e-4) -> Iterator[None]:
    """Let the optimizer and distributor threads hand the GIL over within ``interval``.

    With CPython's default 5 ms a thread that keeps the GIL busy (the distributor
    polling, the optimizer computing) holds the other off for up to 5 ms per
    hand-off; 200 us tripled no-op throughput here (bench/dispatch.py).
    """
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, interval))
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def run_optimizer_rank(spec: RunSpec, transport: Transport, worker_ranks: list[int]) -> RunSummary:
    """Rank 0: the optimizer on this thread, the distributor on a background thread."""
    queues = QueuePair()
    progress = Progress(budget=spec.budget, workers=len(worker_ranks))
    store = ResultsStore(spec.store_path) if spec.store_path else None
    earlier = list(store) if store is not None else []  # a resumed experiment's finished work
    progress.record(earlier, 0)
    evaluator = Evaluator(queues, spec.space, workers=len(worker_ranks), budget=spec.budget,
                          direction=spec.direction, seed=spec.seed, replay=earlier)
    distributor = Distributor(transport, queues, worker_ranks, sign=spec.sign, progress=progress,
                              store=store).start()
    start = time.monotonic()
    error: BaseException | None = None
    reporter = ProgressReporter(progress, interval=spec.progress_interval) if spec.show_progress \
        else contextlib.nullcontext()
    with short_gil_switches(), reporter:
        try:
            spec.make_optimizer().run(evaluator)
        except BudgetExhausted:
            pass
        except BaseException as exc:
            error = exc if distributor.error is not None else OptimizerFailed(exc)
        distributor.close(abort=error is not None)
    if store is not None:
        store.close()
    return RunSummary(progress.done, progress.failed, progress.best, time.monotonic() - start,
                      error or distributor.error, distributor.all_stopped, evaluator.replayed)


def run_worker_rank(spec: RunSpec, transport: Transport, gpu_ids: list[int], *, use_alarm: bool = True) -> int:
    """Ranks 1..N: serve tasks until the distributor says stop."""
    runner = make_runner(spec, transport.rank, gpu_ids, use_alarm=use_alarm)
    return worker_loop(transport, runner)


def run_in_threads(spec: RunSpec, workers: int = 3) -> RunSummary:
    """The whole runtime in one process, workers as threads (no MPI needed)."""
    hub = ThreadHub(workers + 1)
    threads = [threading.Thread(target=run_worker_rank, args=(spec, hub.endpoint(r), []),
                                kwargs={"use_alarm": False}, name=f"emews-worker-{r}", daemon=True)
               for r in range(1, workers + 1)]
    for t in threads:
        t.start()
    summary = run_optimizer_rank(spec, hub.endpoint(0), list(range(1, workers + 1)))
    for t in threads:
        t.join(timeout=30)
    return summary
