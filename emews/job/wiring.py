"""Wiring one run together: the optimizer rank, the worker ranks, and the two backends."""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emews.core.direction import Direction
from emews.core.errors import EmewsError
from emews.core.evaluator import BudgetExhausted, Evaluator, EvaluatorObserver
from emews.core.gpu_binding import GpuBinding
from emews.core.lost_ranks import LostRank
from emews.core.optimizer import Optimizer
from emews.core.queues import QueuePair
from emews.core.replicates import ReplicatingEvaluator, replicated_space
from emews.core.results import Outcome, Result, Status, Task
from emews.core.space import Space
from emews.core.task_size import FixedSize, TaskSize
from emews.job.issued_ids import highest_id_on_disk
from emews.job.resumed import say_resumed as say_resumed_now
from emews.objective.function import ObjectiveSpec
from emews.runtime.compute_budget import ComputeBudget
from emews.runtime.distributor import Distributor
from emews.runtime.fail_fast import FailFast
from emews.runtime.full_disk import FullDisk
from emews.runtime.interrupt import Interrupt, Interrupted
from emews.runtime.progress import Progress, ProgressReporter
from emews.runtime.transport import ThreadHub, Transport
from emews.runtime.trial_reports import TrialService, WaitingTrial
from emews.runtime.walltime_pause import PauseClock, WalltimeStop
from emews.runtime.worker_rank import LaunchLine, WorkerPlan, serve
from emews.store import Durability, ReportReader, Store, open_store
from emews.training.checkpoints import CHECKPOINTS_DIR, remove_dead_temps
from emews.training.retention import Retention
from emews.training.schedulers import TrialScheduler

log = logging.getLogger("emews")


@dataclass
class RunSpec:
    """Everything a run needs, independent of where its settings came from."""

    space: Space
    make_optimizer: Callable[[], Optimizer]
    objective: ObjectiveSpec
    budget: int | None  # evaluations (None: only ``steps`` or ``time`` end the run)
    direction: Direction = Direction.MINIMIZE  # a plain "minimize"/"maximize" is read as one
    seed: int = 0
    isolation: str = "process"
    timeout: float | None = None
    memory_limit: int | None = None
    exp_dir: Path | None = None
    progress_interval: float | None = None
    show_progress: bool = True
    durability: Durability = "normal"
    observers: tuple[EvaluatorObserver, ...] = ()  # see what the optimizer submits and receives
    replicates: int = 1  # each point runs this many times (UQ ensembles), see emews.core.replicates
    make_trial_scheduler: Callable[[], TrialScheduler] | None = None  # decides on training reports
    checkpoint_async: bool = True  # write ctx.report checkpoints on a background thread
    checkpoint_local_dir: str | None = None  # stage checkpoints on this node-local directory first
    retries: int = 0  # a crashed or timed-out task runs again (from its checkpoint) this many times
    retention: Retention = field(default_factory=Retention)  # which checkpoints are kept
    walltime_end: float | None = None  # when the allocation ends (UNIX time): trials pause before it
    pause_margin: float = 300.0  # seconds before walltime_end that trials pause
    pause_grace: float = 0.0  # seconds a stop signal leaves running trials to pause
    task_size: TaskSize = field(default_factory=FixedSize)  # worker ranks per task (task.ranks)
    backend: str = "gloo"  # torch.distributed backend of ctx.process_group() (the site's)
    fail_fast: int = 0  # stop when the first this many results all failed with one cause (0: never)
    steps: int | None = None  # end the run once the trials reported this many steps (runtime.compute_budget)
    time: float | None = None  # ... or once the experiment's runs took this many seconds
    pools: bool = False  # tasks go through the store's shared queue to pools (docs/postgres.md, "Pools")
    pool_lease: float = 60.0  # seconds a pool's claim lasts unrenewed (store.lease)
    pool_retry: float = 120.0  # seconds a lost connection to the store is tried again (store.retry)
    site_name: str = "local"  # the site this job runs on (a pool's row names it)
    #: a PoolQueue whose connection holds the experiment's optimizer lock, taken before the
    #: workers were told to start (:func:`emews.job.rank_zero.take_optimizer_lock`): the run's
    #: shared queue keeps it (None: the shared queue takes the lock itself)
    optimizer_lock: Any = None
    first_id: int = 0  # the first task id of a fresh store (``emews check --try --task N``: N)
    #: the workers an optimizer's defaults (ga's population, mbo's batch, hyperspace's subspaces) are
    #: sized for: with pools, every pool's (:func:`emews.job.pool_size.pooled_size`); 0: its own workers
    size_for: int = 0

    def worker_plan(
        self,
        gpus: GpuBinding | None = None,
        node_cores: int | None = None,
        launch_line: LaunchLine | None = None,
    ) -> WorkerPlan:
        """What the worker ranks need of this spec (``launch_line``: the site's, for ``ctx.launch``)."""
        return WorkerPlan(
            self.objective,
            self.isolation,
            self.timeout,
            self.memory_limit,
            self.runs_root,
            self.checkpoint_async,
            self.checkpoint_local_dir,
            self.pause_grace,
            gpus or GpuBinding(),
            node_cores,
            backend=self.backend,
            gang=self.task_size.gang,
            launch_line=launch_line,
        )

    def __post_init__(self) -> None:
        self.direction = Direction.of(self.direction)

    @property
    def sign(self) -> float:
        return self.direction.sign

    @property
    def runs_root(self) -> Path | None:
        return None if self.exp_dir is None else self.exp_dir / "runs"


@dataclass
class RunSummary:
    """What a finished run reports."""

    completed: int
    failed: int
    best: Result | None
    elapsed: float
    error: BaseException | None = None
    all_stopped: bool = True  # every worker confirmed its stop
    resumed: int = 0  # finished evaluations of earlier runs of this experiment
    requeued: int = 0  # tasks that were running when the earlier run stopped, run again
    worker_errors: dict[int, str] = field(default_factory=dict)  # shutdown problems reported by workers, by rank
    budget_reached: str | None = None  # the line saying the step or time budget ended the run
    lost_ranks: list[LostRank] = field(default_factory=list)  # the workers the run went on without

    @property
    def interrupted(self) -> Interrupted | None:
        return self.error if isinstance(self.error, Interrupted) else None


class OptimizerFailed(EmewsError, RuntimeError):
    """The optimizer raised; carries its formatted traceback."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.traceback = "".join(traceback.format_exception(error))
        super().__init__(f"the optimizer raised {type(error).__name__}: {error}")


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


@dataclass
class ResumeState:
    """What earlier runs of an experiment left in its store."""

    history: list[Result]
    requeue: list[Task]
    next_id: int
    waiting: list[WaitingTrial] = field(default_factory=list)  # trials held again, for a promotion


#: a task is run again at most this many times after runs that stopped while it ran
REQUEUE_LIMIT = 1


def resume_state(
    store: Store | None, waits: Callable[[Task], WaitingTrial | None] = lambda task: None, *, pooled: bool = False
) -> ResumeState:
    """Finished work, and the tasks to run again: those that were running when the last run
    stopped (once; a task caught by a stop twice is recorded as failed, unless the run the stop
    caught wrote a checkpoint of it: a trial that trains on is not what stops the job). A trial that ``waits``
    for a promotion (``TrialService.resumed_wait``) is held again instead, however often.
    ``pooled``: every unfinished task is waited for again as it is (the shared queue and its leases
    count the attempts; a task may still be running on a pool)."""
    if store is None:
        return ResumeState([], [], 0)
    if pooled:
        from emews.store.pool_queue import PoolQueue  # a pooled experiment's store is PostgreSQL

        cancelled = PoolQueue(store).cancelled()  # type: ignore[arg-type]
        unfinished = [t for t, _ in store.unfinished() if t.id not in cancelled]
        history = list(store)  # read second: a result stored meanwhile is here, not lost between the two
        done = {r.id for r in history}
        return ResumeState(history, [t for t in unfinished if t.id not in done], store.next_id())
    requeue, given_up, waiting = [], [], []
    pauses = store.pauses()  # a paused trial may be continued any number of times
    for task, attempt in store.unfinished():
        held = waits(task)
        if held is not None:
            task.attempt = attempt
            waiting.append(held)
        elif attempt < REQUEUE_LIMIT + pauses.get(task.id, 0) or store.checkpointed_in(task.id, attempt):
            task.attempt = attempt + 1
            requeue.append(task)
        else:
            given_up.append(
                Result.from_outcome(
                    task,
                    Outcome(
                        task.id,
                        Status.FAILED,
                        error=f"the run stopped {attempt + 1} times while this task ran; not run again",
                    ),
                    1.0,
                )
            )
    if given_up:
        store.add(given_up)
    if requeue:
        store.mark_attempted([t.id for t in requeue])
    return ResumeState(list(store), requeue, store.next_id(), waiting)


def dead_pools_cleared(exp_dir: Path, store: Store) -> None:
    """What the checkpoint writers of pools now dead left in a pooled experiment (every rank of a
    pool's job killed: no rank of it removes anything), cleared by the next pool that serves it,
    or its next ``emews serve`` or ``emews resume``: their temporary files (a writer on this host
    whose process ended; on another, one whose trial no pool holds under a live lease) and the
    staged checkpoints they never wrote, ``lost`` (those of trials a live pool holds are left to
    it: it cleared them as it took their task over, ``PoolFeeder._clear_taken_over``). A pool cut
    off, not dead, that writes one after all makes it durable again."""
    from emews.store.pool_queue import PoolQueue  # a pooled store is PostgreSQL
    from emews.store.postgres import PostgresStore

    if not isinstance(store, PostgresStore):
        return
    queue = PoolQueue(store)
    remove_dead_temps(exp_dir / CHECKPOINTS_DIR, queue.held)
    if lost := store.mark_lost(sparing=queue.held()):
        log.info("%s checkpoint(s) never written (their pools ended first)", lost)


def trial_service(
    spec: RunSpec,
    store: Store | None,
    stopping: Callable[[], bool] = lambda: False,
    budget: ComputeBudget | None = None,
    *,
    shared: bool = False,
) -> TrialService:
    """What answers training reports: the store's training tables and the workflow's scheduler,
    its state rebuilt from the reports of earlier runs; ``budget`` counts the steps reported.

    ``shared``: a pool's, on the shared store, whose scheduler also learns every other pool's
    reports (:class:`~emews.runtime.shared_trials.SharedTrials`; ``--pools`` accepts only a
    scheduler that :attr:`~emews.training.schedulers.TrialScheduler.spans_pools`). An earlier
    run's leftovers are cleared first: a job's own run's at its launch or resume, a pooled
    experiment's dead pools' (:func:`dead_pools_cleared`) whenever a pool or an optimizer starts."""
    scheduler = None
    if spec.make_trial_scheduler is not None:
        scheduler = spec.make_trial_scheduler().bind(
            metric=spec.objective.metric, direction=spec.direction, space=spec.space, seed=spec.seed
        )
    if store is not None and scheduler is not None and scheduler.full_course is not None:
        store.complete_full_courses(scheduler.full_course)  # an older ASHA's stop at max_t: completed
    if spec.exp_dir is not None and not (spec.pools or shared):
        remove_dead_temps(spec.exp_dir / CHECKPOINTS_DIR)  # the temp files of writers killed mid-write
        if store is not None:
            store.mark_lost()  # checkpoints an earlier run's killed writers never wrote
    elif spec.exp_dir is not None and store is not None:
        dead_pools_cleared(spec.exp_dir, store)
    if shared:
        from emews.runtime.shared_trials import SharedTrials  # pools only
        from emews.store.reconnecting import ReconnectingStore

        kind: type[TrialService] = SharedTrials
        if store is not None and hasattr(store, "reconnect"):  # a server restart does not end the pool
            store = ReconnectingStore(store, spec.pool_retry)  # type: ignore[assignment]
    else:
        kind = TrialService
    service = kind(
        store,
        scheduler,
        metric=spec.objective.metric,
        direction=spec.direction,
        retention=spec.retention,
        retries=spec.retries,
        clock=PauseClock(spec.walltime_end, spec.pause_margin, stopping),
        budget=budget,
    )
    service.rebuild()  # a pool that joins late starts from every report so far
    return service


def run_optimizer_rank(
    spec: RunSpec,
    transport: Transport | None,
    worker_ranks: list[int],
    *,
    interrupt: Interrupt | None = None,
    nodes: Mapping[int, str] | None = None,
    say_resumed: bool = False,
    store: Store | None = None,
) -> RunSummary:
    """Rank 0: the optimizer on this thread, the distributor on a background thread.

    ``say_resumed`` (``emews resume``, ``emews serve``): print what the run takes over from earlier
    runs once it has read them, before the first progress line.

    ``nodes`` (worker rank -> host) places multi-rank tasks (``spec.task_size``) node by node.

    ``interrupt`` (a stop signal) ends the optimizer at once; what arrived is stored
    and the tasks still running are left for ``emews resume``.

    ``store``: the experiment's store, opened already (rank 0 opens it before the workers start),
    closed here; else it is opened here.
    """
    interrupt = interrupt or Interrupt()
    queues = QueuePair() if not spec.pools else pooled_queue_pair()
    progress = Progress(budget=spec.budget, workers=len(worker_ranks), replicates=spec.replicates, pooled=spec.pools)
    if store is None and spec.exp_dir is not None:
        store = open_store(spec.exp_dir, durability=spec.durability)
    budget = ComputeBudget(spec.steps, spec.time)  # its clock starts now
    if store is not None and budget.limited:
        budget.resume(store)
    trials = trial_service(spec, store, interrupt, budget)
    earlier = resume_state(store, trials.resumed_wait, pooled=spec.pools)
    if say_resumed:
        say_resumed_now(len(earlier.history), len(earlier.requeue), pooled=spec.pools)
    # a task killed before it was recorded left files under its id: a new point never takes it
    first_id = max(
        spec.first_id,
        earlier.next_id if spec.exp_dir is None else max(earlier.next_id, highest_id_on_disk(spec.exp_dir) + 1),
    )
    progress.record(earlier.history, 0)
    progress.earlier = progress.done
    reports = ReportReader(store.location) if store is not None else None
    pools = SharedQueue(spec, store, queues, transport, worker_ranks, progress, nodes, budget) if spec.pools else None
    distributor = (
        pools.distributor
        if pools is not None
        else Distributor(
            transport,  # type: ignore[arg-type]  # a job without pools has its workers and their transport
            queues,
            worker_ranks,
            sign=spec.sign,
            progress=progress,
            fail_fast=FailFast(spec.fail_fast),
            store=store,
            trials=trials,
            gang=spec.task_size.gang,
            nodes=nodes,
            waiting=earlier.waiting,
            inline_timeout=spec.timeout if spec.isolation == "inline" else None,
            budget=budget,
            task_timeout=spec.timeout,
            full_disk=None if spec.exp_dir is None else FullDisk(spec.exp_dir),
        ).start()
    )
    walltime = WalltimeStop(trials.clock, lambda: distributor.idle, interrupt.stop_at_walltime).start()
    interrupt.warning = walltime.warn  # the batch system's early warning (SIGUSR1): pause now
    start = time.monotonic()
    error: BaseException | None = None
    reporter = (
        ProgressReporter(progress, interval=spec.progress_interval) if spec.show_progress else contextlib.nullcontext()
    )
    with short_gil_switches(), reporter:
        try:
            with interrupt.raising():
                space = spec.space if spec.replicates == 1 else replicated_space(spec.space, spec.replicates)
                evaluator = Evaluator(
                    queues,
                    space,
                    workers=spec.size_for or len(worker_ranks) or 1,  # with pools: every pool's (spec.size_for)
                    budget=spec.budget,
                    direction=spec.direction,
                    seed=spec.seed,
                    first_id=first_id,
                    history=earlier.history,
                    requeue=earlier.requeue,
                    waiting=[w.task for w in earlier.waiting],
                    exp_dir=spec.exp_dir,
                    observers=spec.observers,
                    reports=reports,
                    scheduler_end=None if reports is None else reports.first_end,
                    stopped_early=None if reports is None else reports.stopped_early,
                    task_size=spec.task_size,
                    metric=spec.objective.metric,
                )
                view = (
                    evaluator if spec.replicates == 1 else ReplicatingEvaluator(evaluator, spec.space, spec.replicates)
                )
                spec.make_optimizer().run(view)  # type: ignore[arg-type]  # replicas behind Evaluator's interface
        except BudgetExhausted:
            pass
        except Interrupted as exc:
            error = exc
        except BaseException as exc:
            error = distributor.error if distributor.error is not None else OptimizerFailed(exc)
        if pools is not None:
            pools.close(error)
        elif isinstance(error, Interrupted) and spec.pause_grace > 0:
            log.info("%s: running trials pause at their next report (at most %g s)", error, spec.pause_grace)
            distributor.close(pause=spec.pause_grace)
        else:
            distributor.close(abort=error is not None)
    walltime.close()
    if reports is not None:
        reports.close()
    if store is not None:
        store.close()
    return RunSummary(
        progress.done,
        progress.failed,
        progress.best,
        time.monotonic() - start,
        error or distributor.error,
        distributor.all_stopped,
        len(earlier.history),
        len(earlier.requeue),
        distributor.worker_errors,
        pools.bridge.budget_reached if pools is not None else distributor.budget_reached,
        pools.lost_ranks if pools is not None else list(distributor.lost_ranks),
    )


def pooled_queue_pair() -> QueuePair:
    """The optimizer's queue pair of a pooled run (cancels in the shared queue, too)."""
    from emews.runtime.pool_bridge import PooledQueuePair

    return PooledQueuePair()


class SharedQueue:
    """An experiment run through pools, on the optimizer's side: its queue pair bridged to the
    store's shared queue, and this job's workers as one more pool (none under ``emews serve``).
    Each part has its own connection; the bridge's holds the experiment's optimizer lock."""

    def __init__(
        self,
        spec: RunSpec,
        store: Store | None,
        queues: QueuePair,
        transport: Transport | None,
        worker_ranks: list[int],
        progress: Progress,
        nodes: Mapping[int, str] | None,
        budget: ComputeBudget | None = None,
    ) -> None:
        from emews.job.pool_run import PoolRun  # PostgreSQL's modules only where pools run
        from emews.runtime.pool_bridge import PoolBridge
        from emews.store.pool_queue import PoolQueue

        if store is None:
            raise EmewsError("pools need the experiment's PostgreSQL store")
        submitter: PoolQueue | None = spec.optimizer_lock  # the lock taken before the workers started
        if submitter is None:
            raise EmewsError("pools need the optimizer lock taken before the workers start (take_optimizer_lock)")
        opened = [open_store(location=store.location) for _ in range(2 if worker_ranks else 1)]
        if worker_ranks:  # the trial store: checkpoint paths kept, and deleted, inside the experiment
            opened.append(open_store(spec.exp_dir) if spec.exp_dir is not None else open_store(location=store.location))
        self._connections = [submitter.store, *opened]
        listener, *feeder = [
            PoolQueue(c, retry_s=spec.pool_retry)  # type: ignore[arg-type]  # a pooled store is PostgreSQL
            for c in opened[:2]
        ]
        submitter.retry_s = spec.pool_retry
        self._submitter = submitter
        #: the worker ranks every pool went on without during this run (read as it closes)
        self.lost_ranks: list[LostRank] = []
        try:
            submitter.enable()
            self._started = submitter.server_time()  # the store's clock, as the pools' lost ranks
            self.run = (
                PoolRun(
                    feeder[0],
                    transport,  # type: ignore[arg-type]  # a job with workers has its transport
                    worker_ranks,
                    site=spec.site_name,
                    sign=spec.sign,
                    lease_s=spec.pool_lease,
                    gang=spec.task_size.gang,
                    nodes=nodes,
                    inline_timeout=spec.timeout if spec.isolation == "inline" else None,
                    task_timeout=spec.timeout,
                    fail_fast=spec.fail_fast,
                    trials=trial_service(spec, self._connections[3], shared=True),
                    on_error=queues.fail,
                    exp_dir=spec.exp_dir,
                ).start()
                if worker_ranks
                else None
            )
        except BaseException:
            for connection in self._connections:
                connection.close()
            raise
        self.bridge = PoolBridge(
            queues,
            submitter,
            listener,
            record=lambda results: progress.record(results, self.bridge.waiting),  # out in the pools
            lease_s=spec.pool_lease,
            budget=budget,  # budget.time (budget.steps is refused with pools: check_pools)
        ).start()
        progress.out_in_pools = lambda: self.bridge.waiting

    def _every_pools_lost(self) -> list[LostRank]:
        """The worker ranks every pool went on without since this run started, as the store has
        them (the attached pools' too); this job's pool's own when the store does not answer."""
        try:
            return self._submitter.lost_ranks(since=self._started)
        except EmewsError as exc:
            log.warning("the pools' lost ranks could not be read (the summary has this job's own): %s", exc)
            return list(self.distributor.lost_ranks)

    @property
    def distributor(self) -> Distributor | NoWorkersHere:
        """What stands for the distributor in the run's summary: this job's pool's, if it has one."""
        return self.run.distributor if self.run is not None else NoWorkersHere()

    def close(self, error: BaseException | None) -> None:
        """The optimizer ended: when it finished, say so (pools end once they hold nothing) and
        let this job's pool store what it holds; when it failed or was stopped, stop at once (the
        queue stays for the other pools and ``emews resume``)."""
        finished = error is None
        self.bridge.close(finished=finished)
        if self.run is not None:
            if finished:
                self.run.join()
            else:
                self.run.stop()
            self.run.close(abort=not finished)
        self.lost_ranks = self._every_pools_lost()
        for connection in self._connections:
            connection.close()


class NoWorkersHere:
    """The distributor's part under ``emews serve``: the optimizer's node runs no workers, so
    nothing is ever busy, failed, or left to stop here."""

    idle = True
    error: BaseException | None = None
    all_stopped = True
    budget_reached: str | None = None

    def __init__(self) -> None:
        self.worker_errors: dict[int, str] = {}
        self.lost_ranks: list[LostRank] = []

    def close(self, **_: object) -> None:
        """Nothing runs here to close."""


def run_worker_rank(
    spec: RunSpec,
    transport: Transport,
    gpu_ids: list[int],
    *,
    use_alarm: bool = True,
    interrupt: Interrupt | None = None,
) -> int:
    """Ranks 1..N: serve tasks until the distributor says stop (or a stop signal arrives)."""
    return serve(spec.worker_plan(), transport, gpu_ids, use_alarm=use_alarm, interrupt=interrupt)


def run_in_threads(spec: RunSpec, workers: int = 3) -> RunSummary:
    """The whole runtime in one process, workers as threads (no MPI needed)."""
    hub = ThreadHub(workers + 1)
    threads = [
        threading.Thread(
            target=run_worker_rank,
            args=(spec, hub.endpoint(r), []),
            kwargs={"use_alarm": False},
            name=f"emews-worker-{r}",
            daemon=True,
        )
        for r in range(1, workers + 1)
    ]
    for t in threads:
        t.start()
    summary = run_optimizer_rank(spec, hub.endpoint(0), list(range(1, workers + 1)))
    for t in threads:
        t.join(timeout=30)
    return summary
