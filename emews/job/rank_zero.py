"""Rank 0 of ``emews run``: the lease, the workflow, the run itself, then ``summary.json`` and ``results.csv``.

It reads the workflow and site once and broadcasts a :class:`~emews.runtime.worker_rank.WorkerPlan`
(or ``None``: the run is refused) to the workers (see :mod:`emews.job.mpi_main`).
"""

from __future__ import annotations

import array
import fcntl
import json
import logging
import shlex
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emews.config.exit_record import record_exit, reserve_exit_record
from emews.config.experiment import (
    CSV_FILE,
    LOG_FILE,
    LOG_FORMAT,
    SITE_FILE,
    SUMMARY_FILE,
    WORKFLOW_FILE,
    read_info,
    read_summary,
    require_experiment,
)
from emews.config.lease import LeaseRecord, acquire, ended_starter
from emews.config.workflow import Workflow, load_workflow
from emews.core.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, ConfigError, EmewsError, storage_problem
from emews.core.textfiles import write_atomic
from emews.core.wording import counted
from emews.job.issued_ids import highest_id_on_disk
from emews.job.job_environment import check_job_environment
from emews.job.moved import DirectoryWatch
from emews.job.pool_size import pooled_size
from emews.job.wiring import OptimizerFailed, RunSpec, RunSummary, run_optimizer_rank
from emews.objective.context import task_run_dir
from emews.output.csvfollow import CancelsToCsv, CsvFollower
from emews.output.export import Totals, export_csv, open_store, summary_text, totals
from emews.runtime.dispatch import Stranded
from emews.runtime.fail_fast import FailedFast
from emews.runtime.interrupt import Interrupt, Interrupted, LauncherEnded
from emews.runtime.team_comm import TeamWorld
from emews.runtime.transport import MPITransport, quiet_bcast
from emews.site import Site, load_site
from emews.site.gpus import gpu_binding
from emews.site.job_end import job_end_time
from emews.site.jobs import batch_job_over
from emews.site.walltime import parse_walltime
from emews.store import STORE_FILE
from emews.store.base import Store, StoreUnreadable
from emews.store.opening import open_store as open_for_writing
from emews.store.opening import store_place
from emews.store.results_store import leave_wal
from emews.training.checkpoints import unset_variables
from emews.training.messages import Ending
from emews.training.retention import Retention

if TYPE_CHECKING:
    from emews.store.pool_queue import PoolQueue

log = logging.getLogger("emews")


def run_spec(workflow: Workflow, exp_dir: Path) -> RunSpec:
    task, kept = workflow.model.task, workflow.model.checkpoints
    return RunSpec(
        space=workflow.space,
        make_optimizer=workflow.make_optimizer,
        objective=workflow.objective,
        budget=workflow.model.budget.evaluations,
        direction=workflow.model.objective.direction,
        seed=workflow.seed,
        isolation=task.isolation,
        timeout=task.timeout,
        memory_limit=task.memory_limit,
        exp_dir=exp_dir,  # type: ignore[arg-type]
        durability=workflow.model.store.durability,
        replicates=workflow.model.replicates,
        make_trial_scheduler=workflow.make_trial_scheduler if workflow.model.trial_scheduler else None,
        checkpoint_async=kept.background,
        checkpoint_local_dir=kept.local_dir,
        retries=task.retries,
        retention=Retention(kept.keep_last, kept.keep_best, kept.keep_best_experiment),
        pause_margin=workflow.model.walltime.margin,
        pause_grace=workflow.model.walltime.grace,
        task_size=workflow.task_size,
        fail_fast=workflow.model.budget.fail_fast,
        steps=workflow.model.budget.steps,
        time=workflow.model.budget.seconds,
        pool_lease=workflow.model.store.lease_seconds,
        pool_retry=workflow.model.store.retry_seconds,
    )


def check_local_dir(workflow: Workflow) -> None:
    """``checkpoints.local_dir`` names only environment variables set where the job runs (it is
    expanded on each worker: an unset one is a ConfigError here, never a literal ``$NAME`` folder)."""
    local_dir = workflow.model.checkpoints.local_dir
    unset = [] if local_dir is None else unset_variables(local_dir)
    if unset:
        raise ConfigError(
            f"environment variable {unset[0]} is not set in the job's environment ({local_dir!r})",
            file=workflow.source,
            key="checkpoints.local_dir",
            allowed="a path; $NAME only for a variable the job's environment sets",
        )


def allocation_end(workflow: Workflow, site: Site, started: float) -> float | None:
    """When this job's allocation ends (UNIX time): the workflow's ``walltime.limit`` from the job's
    start, else what the batch system says (Slurm, PBS, LSF: :mod:`emews.site.job_end`), else the
    batch site's walltime; ``None`` on a local site without a limit."""
    limit = workflow.model.walltime.limit
    if limit:
        return started + parse_walltime(limit)
    end = job_end_time(started)
    if end is not None:
        return end
    return None if site.is_local else started + site.config.scheduler.walltime_seconds


def set_allocation(spec: RunSpec, workflow: Workflow, site: Site, started: float) -> None:
    """When this job's allocation ends (:func:`allocation_end`) and the walltime margin it uses:
    the workflow's, but at most half the allocation. From the pause time no task starts, so a margin
    as long as the allocation (a 5-minute debug job with the default 300 s) would run nothing."""
    spec.walltime_end = allocation_end(workflow, site, started)
    if spec.walltime_end is not None:
        spec.pause_margin = min(spec.pause_margin, max(0.0, spec.walltime_end - started) / 2)


def lead(exp_dir: Path, comm: Any, lease_token: str | None, interrupt: Interrupt, *, spare_core: bool) -> int:
    """Rank 0's whole part: take (or join) the lease, read the workflow and site, tell the
    workers what to run (``None``: refused), run the optimizer; return the exit status."""
    try:
        require_experiment(exp_dir)
        lease = acquire(exp_dir, "emews run", token=lease_token, job_done=batch_job_over(exp_dir))
    except ConfigError as exc:
        return refuse(comm, exc)
    spec: RunSpec | None = None
    store: Store | None = None
    watch = DirectoryWatch(exp_dir)  # moved while it runs (mv EXP EXP2): the outputs go where it is then
    try:
        try:
            workflow = load_workflow(str(exp_dir / WORKFLOW_FILE), check_imports=False)
            workflow.check_task_size(comm.Get_size() - 1)
            check_job_environment()
            check_local_dir(workflow)
            site = load_site(str(exp_dir / SITE_FILE))
            spec = run_spec(workflow, exp_dir)
            spec.pools = bool(read_info(exp_dir).get("pools"))
            spec.site_name = site.name
            # opened before the workers start: a store a full disk leaves no room to open is refused
            # in one line (was: 'the optimizer rank failed: StoreUnreadable: ... disk I/O error', MPI_Abort)
            store = None if spec.pools else open_for_writing(exp_dir, durability=spec.durability)
            if spec.pools:  # the lock itself is the check: held from now on, on the bridge's connection
                spec.optimizer_lock = take_optimizer_lock(exp_dir, "emews resume")  # a launch's store is new
                spec.size_for = pooled_size(exp_dir, spec.optimizer_lock, spec.pool_lease, comm.Get_size() - 1)[0]
        except ConfigError as exc:
            return refuse(comm, exc)
        set_allocation(spec, workflow, site, time.time())
        spec.backend = site.config.node.distributed_backend
        gang = spec.task_size.gang
        quiet_bcast(
            comm,
            spec.worker_plan(
                gpu_binding(site), site.config.node.cores, launch_line=site.team_launch_line if gang else None
            ),
        )
        teams = TeamWorld(comm) if gang else None  # collective: every rank
        try:
            return _optimizer_rank(
                spec,
                workflow,
                comm,
                exp_dir,
                interrupt,
                watch,
                lease.record,
                spare_core=spare_core,
                nodes=None if teams is None else teams.nodes,
                store=store,
            )
        except BaseException as exc:  # never leave the workers waiting for a stop that does not come
            log.exception("the optimizer rank failed")
            print(
                f"emews: the optimizer rank failed: {type(exc).__name__}: {exc} (details in {exp_dir / LOG_FILE})",
                file=sys.stderr,
            )
            sys.stderr.flush()
            comm.Abort(EXIT_FAILED)
            return EXIT_FAILED
    finally:
        if store is not None:
            store.close()  # the run closed it already, unless it failed before it ran
        if spec is not None and spec.optimizer_lock is not None:
            spec.optimizer_lock.store.close()  # the server releases the lock (closed already after a run)
        lease.exp_dir = watch.now() or exp_dir  # released where the experiment is now
        watch.close()
        lease.release()


def take_optimizer_lock(exp_dir: Path, command: str) -> PoolQueue:
    """The optimizer lock of this pooled experiment, taken before any worker is told to start, on a
    connection the run then keeps (its bridge's): :class:`~emews.store.pool_queue.OptimizerRunning`
    naming ``command`` (what the user ran) when another optimizer serves it (on any host). Taking it
    is the one check, so of two optimizers starting at once the second is refused here (exit 2),
    never the first later."""
    from emews.store.pool_queue import OptimizerRunning, queue_for_an_optimizer

    try:
        queue = queue_for_an_optimizer(exp_dir)  # refused before the store is written while another serves it
        try:
            queue.lock_optimizer()  # raises, naming the experiment's store
        except BaseException:
            queue.store.close()
            raise
    except OptimizerRunning as exc:
        raise OptimizerRunning(exc.message, file=exc.file, key=command, allowed=exc.allowed) from None
    return queue


def refuse(comm: Any, problem: ConfigError) -> int:
    """Tell the workers not to start, and the user why."""
    quiet_bcast(comm, None)
    print(f"emews: error: {problem}", file=sys.stderr)
    return EXIT_CONFIG


def _optimizer_rank(
    spec: RunSpec,
    workflow: Workflow,
    comm: object,
    exp_dir: Path,
    interrupt: Interrupt,
    watch: DirectoryWatch,
    lease: LeaseRecord,
    *,
    spare_core: bool,
    nodes: dict[int, str] | None = None,
    store: Store | None = None,
) -> int:
    logging.basicConfig(filename=exp_dir / LOG_FILE, level=logging.INFO, format=LOG_FORMAT)
    logging.raiseExceptions = False  # a log line the disk has no room for is lost, not a traceback on stderr
    transport = MPITransport(comm, threads=True)
    workers = list(range(1, transport.size))
    log.info(
        "start: %s workers, optimizer %s (sized for %s), budget %s",
        len(workers),
        workflow.model.optimizer.name,
        counted(spec.size_for or len(workers), "worker"),
        workflow.model.budget.describe(),
    )
    # results.csv written as results arrive, by a child on a core the ranks leave free. Not on a
    # full node: there it slows the run, and at its lowest priority it can starve while a stop
    # signal leaves seconds to write the file (srun kills the step ~1 s after scancel). An open
    # space's columns are known only at the end.
    follow = spare_core and not workflow.space.open
    take_exit_record(exp_dir)  # its room is taken now: the run's status reaches the launcher even from a full disk
    # ids issued before this run (none is issued yet) that the store lacks never fill: not waited for
    settled = highest_id_on_disk(exp_dir) + 1 if follow else 0
    csv_follower = CsvFollower(exp_dir, workflow.space.names, settled_below=settled) if follow else None
    if csv_follower is not None:  # a cancelled task's id gets no result: the child steps over it
        spec.observers = (*spec.observers, CancelsToCsv(csv_follower))
    log.info("results.csv %s", "follows the store" if follow else "is written at the end")
    summary = run_optimizer_rank(
        spec, transport, workers, interrupt=interrupt, nodes=nodes, say_resumed=True, store=store
    )
    summary.error = said_of_the_starter(summary.error, lease)
    here = watch.now()
    if here != exp_dir:
        log.warning("%s", watch.moved_line(here))
        print(watch.moved_line(here), file=sys.stderr, flush=True)
    if here is None:
        status = EXIT_FAILED
    else:
        status = write_outputs(spec, workflow, here, summary, csv_follower)
        fill_exit_record(here, status)  # also on a disk with no room left for summary.json
    if not summary.all_stopped:
        log.error("workers did not confirm their stop (or the run went on without them); aborting the job")
        _let_output_drain()
        comm.Abort(status or EXIT_FAILED)  # type: ignore[attr-defined]
    # The run's status is in summary.json (``emews launch`` exits with it). To MPI this rank
    # exits 0: a rank that exits non-zero makes mpiexec SIGKILL the ranks still finishing.
    return EXIT_OK


def said_of_the_starter(error: BaseException | None, lease: LeaseRecord) -> BaseException | None:
    """A stop signal that came because the launch or resume that started this job ended (its ``kill
    -9``: ``mpiexec``'s parent-death SIGTERM) as :class:`LauncherEnded`; any other ``error`` as it is."""
    if type(error) is not Interrupted:  # not a stop signal, or the walltime margin's own stop
        return error
    gone = ended_starter(lease)
    return error if gone is None else LauncherEnded(error.signum, lease.command or "emews launch", gone.pid)


def take_exit_record(exp_dir: Path) -> None:
    """Reserve the run's exit record as it starts (``emews status`` then tells a run that ended
    before it could record how, killed); a problem is logged, the run goes on."""
    try:
        reserve_exit_record(exp_dir)
    except OSError:
        log.exception("cannot reserve the run's exit record")


def fill_exit_record(exp_dir: Path, status: int) -> None:
    """Record the run's exit ``status`` in its reserved record; a problem is logged."""
    try:
        record_exit(exp_dir, status)
    except OSError:
        log.exception("cannot record the run's exit status")


def _let_output_drain(limit: float = 2.0) -> None:
    """Wait (at most ``limit`` seconds) until the launcher has read what this rank wrote to its
    stdout and stderr: MPI_Abort kills the process that forwards it, and with it the last lines."""
    sys.stdout.flush()
    sys.stderr.flush()
    unread = array.array("i", [0])
    deadline = time.monotonic() + limit
    for fd in (1, 2):
        while time.monotonic() < deadline:
            try:
                fcntl.ioctl(fd, termios.FIONREAD, unread, True)  # bytes still in the pipe
            except OSError:
                break  # not a pipe (a file or a terminal): nothing to wait for
            if unread[0] == 0:
                break
            time.sleep(0.01)


def write_outputs(
    spec: RunSpec, workflow: Workflow, exp_dir: Path, summary: RunSummary, csv_follower: CsvFollower | None
) -> int:
    """summary.json, then results.csv, then the closing lines; return the run's exit status.

    The summary goes first: after a stop signal the batch system may kill the job soon after
    (Slurm's srun does within a second), and the summary holds the run's status.
    """
    csv_path = exp_dir / CSV_FILE
    try:
        store = open_store(exp_dir)
        try:
            total = totals(store, replicates=spec.replicates, direction=spec.direction)
        finally:
            if store is not None:
                store.close()
    except StoreUnreadable as exc:  # a PostgreSQL store away past store.retry: what it holds stays there
        return _store_unreachable(exp_dir, summary, exc)
    stopped = summary.interrupted
    problems = summary.worker_errors
    if stopped is not None:
        status = stopped.exit_status
    elif summary.error is not None or problems:
        status = EXIT_FAILED
    else:
        status = EXIT_OK
    full = None if summary.error is None else storage_problem(summary.error)
    unwritten = _write_or_amend(
        exp_dir, status, lambda: _write_summary_and_csv(workflow, exp_dir, summary, total, status, csv_follower)
    )
    if unwritten is not None:  # the results are in the store (emews results writes the CSV)
        status = status or EXIT_FAILED
        full = full or _disk_problem(unwritten)
        unwritten = None if full else unwritten  # not the disk's: its own line
    if (exp_dir / STORE_FILE).is_file() and not leave_wal(exp_dir / STORE_FILE):
        log.info("results.db stays in WAL mode: another process has it open")
    text = summary_text(total, spec.budget, summary.elapsed, summary.resumed)
    stored = f"{total.done}{'' if spec.budget is None else f'/{spec.budget}'} evaluations stored"
    log.info("finished: %s", text.replace("\n", " | "))
    if unwritten is not None:
        return _csv_failed(exp_dir, total, spec.budget, unwritten, status)
    if full is not None:
        log.error("run stopped: cannot write the experiment: %s", full, exc_info=summary.error)
        print(
            f"emews: cannot write the experiment: {full}; {stored}; "
            f"free space, then continue with: emews resume {shlex.quote(str(exp_dir))}",
            file=sys.stderr,
        )
        return status
    if stopped is not None:
        log.warning("%s: results so far are stored", stopped)
        print(f"emews: {stopped}: {stored}; continue with: emews resume {shlex.quote(str(exp_dir))}", file=sys.stderr)
        return status
    print(text, file=sys.stderr)
    ended = summary.budget_reached or ended_under_budget(
        workflow.model.optimizer.name, total.done, spec.budget, summary
    )
    if ended is not None:
        log.info(ended)
        print(ended, file=sys.stderr)
    print(f"results: {store_place(exp_dir)} and {csv_path}", file=sys.stderr)
    for rank, text in sorted(problems.items()):
        log.error("worker %d: %s", rank, text)
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        print(
            f"emews: worker rank {rank}: {lines[0].rstrip(':')}: {lines[-1].strip()} (details in {exp_dir / LOG_FILE})",
            file=sys.stderr,
        )
    if isinstance(summary.error, FailedFast):
        line = fail_fast_line(summary.error, spec.runs_root, csv_path)
        log.error(line)
        print(f"emews: {line}", file=sys.stderr)
    elif isinstance(summary.error, Stranded):  # the job has to end: one line, and how to go on
        log.error("%s", summary.error)
        print(
            f"emews: {summary.error}; {stored}; continue with: emews resume {shlex.quote(str(exp_dir))}",
            file=sys.stderr,
        )
    elif summary.error is not None:
        detail = summary.error.traceback if isinstance(summary.error, OptimizerFailed) else repr(summary.error)
        log.error("run failed: %s\n%s", summary.error, detail)
        print(f"\nemews: {summary.error}\n{detail}", file=sys.stderr)
    return status


def _write_or_amend(exp_dir: Path, status: int, write: Callable[[], None]) -> Exception | None:
    """``write`` summary.json and results.csv; on any failure (a full disk, a SQLite I/O error,
    another) correct the exit status of the summary written first (it may say 0) and return the error."""
    try:
        write()
    except Exception as exc:  # was: OSError and emews' own only, another one ended in MPI_Abort
        log.exception("cannot write the run's summary or CSV")
        _amend_exit_status(exp_dir, status or EXIT_FAILED)
        return exc
    return None


def _disk_problem(exc: Exception) -> str | None:
    """The line of a failure writing the experiment's files (a full disk, an I/O error, a path in
    the way); ``None`` for another error."""
    return storage_problem(exc) or (str(exc) if isinstance(exc, (OSError, EmewsError)) else None)


def _csv_failed(exp_dir: Path, total: Totals, budget: int | None, exc: Exception, status: int) -> int:
    """The run's end when its summary or CSV failed for another reason than the disk (was: MPI_Abort
    after summary.json said exit status 0): one line naming the error and how to write the CSV."""
    stored = f"{total.done}{'' if budget is None else f'/{budget}'} evaluations stored"
    print(
        f"emews: cannot write {exp_dir / CSV_FILE}: {type(exc).__name__}: {exc} (details in {exp_dir / LOG_FILE}); "
        f"{stored}; write it with: emews results {shlex.quote(str(exp_dir))}",
        file=sys.stderr,
    )
    return status


def _store_unreachable(exp_dir: Path, summary: RunSummary, exc: StoreUnreadable) -> int:
    """The run's end when its store cannot be read to sum it up: the summary says so (without the
    store's totals), one line says how to go on, exit status 1 (was: a traceback and MPI_Abort)."""
    earlier = earlier_runs(exp_dir)
    why = f"the results store cannot be read: {exc.message}"
    try:
        write_summary(
            exp_dir,
            {
                "this_run": {"elapsed": summary.elapsed, "resumed": summary.resumed, "requeued": summary.requeued},
                "elapsed": earlier.elapsed + summary.elapsed,
                "runs": earlier.runs + 1,
                "interrupted": None if summary.interrupted is None else summary.interrupted.args[0],
                "error": why if summary.error is None else f"{summary.error}; {why}",
                "exit_status": EXIT_FAILED,
                "finished": time.time(),
            },
        )
    except OSError:
        log.exception("cannot write the run's summary")
    log.error("run ended: %s (the run's own error: %s)", why, summary.error)
    print(
        f"emews: {why}; what it stored stays stored; once it can be, continue with: "
        f"emews resume {shlex.quote(str(exp_dir))}",
        file=sys.stderr,
    )
    return EXIT_FAILED


def _write_summary_and_csv(
    workflow: Workflow,
    exp_dir: Path,
    summary: RunSummary,
    total: Totals,
    status: int,
    csv_follower: CsvFollower | None,
) -> None:
    stopped, problems = summary.interrupted, summary.worker_errors
    earlier = earlier_runs(exp_dir)
    write_summary(
        exp_dir,
        {
            "completed": total.done,
            "failed": total.done - total.counts.get("ok", 0),
            "endings": {e.value: total.endings[e.value] for e in Ending if e.value in total.endings},
            "this_run": {
                "completed": summary.completed - summary.resumed,
                "elapsed": summary.elapsed,
                "resumed": summary.resumed,
                "requeued": summary.requeued,
            },
            "elapsed": earlier.elapsed + summary.elapsed,
            "runs": earlier.runs + 1,
            "best": _best_of(total),
            "interrupted": None if stopped is None else stopped.args[0],
            "budget_reached": summary.budget_reached,
            "worker_errors": {str(rank): text for rank, text in problems.items()},
            "lost_ranks": [lost.to_json() for lost in summary.lost_ranks],
            "error": None if summary.error is None else str(summary.error),
            "failure_cause": None
            if total.failure is None
            else {"cause": total.failure.line, "count": total.failure.count},
            "exit_status": status,
            "finished": time.time(),
        },
    )
    if csv_follower is None or csv_follower.finish() is None:
        export_csv(exp_dir, workflow.space.names, with_stored_keys=workflow.space.open)


def _best_of(total: Totals) -> dict[str, Any] | None:
    """summary.json's ``best``: the best evaluation, or of an ensemble its best point (its first
    task's id, its mean objective, its parameters, and its replicates' statistics and tasks)."""
    point = total.best_point
    if point is not None and point.stats.mean is not None:
        stats = point.stats
        return {
            "id": point.task_ids[0],
            "objective": stats.mean,
            "params": point.point,
            "replicates": {
                "count": stats.count,
                "failed": stats.failed,
                "std": stats.std,
                "tasks": list(point.task_ids),
            },
        }
    if total.best is None:
        return None
    return {"id": total.best.id, "objective": total.best.objective, "params": dict(total.best.params)}


@dataclass(frozen=True)
class EarlierRuns:
    """What the summaries of an experiment's earlier runs add up to: their count and wall time."""

    runs: int = 0
    elapsed: float = 0.0


def earlier_runs(exp_dir: Path) -> EarlierRuns:
    """The runs before this one, as the last ``summary.json`` counts them (a run killed with
    ``kill -9`` wrote none, and is not counted)."""
    data = read_summary(exp_dir)
    elapsed, runs = data.get("elapsed"), data.get("runs", 1)
    if not isinstance(elapsed, (int, float)) or not isinstance(runs, int):
        return EarlierRuns()
    return EarlierRuns(runs, float(elapsed))


def ended_under_budget(optimizer: str, done: int, budget: int | None, summary: RunSummary | None = None) -> str | None:
    """The line saying that the optimizer ended on its own before the evaluation budget was spent (a
    GA's ``generations`` done, a user's optimizer that returned), so that ``76/96`` is not read as a
    stop; ``None`` when the budget was spent or there is none, or the run ended with an error."""
    if budget is None or done >= budget or (summary is not None and summary.error is not None):
        return None
    return (
        f"the {optimizer} optimizer ended on its own after {done} of the {budget} evaluations the budget "
        "allows: it asked for no more points (docs/optimizers.md, 'Budget')"
    )


def fail_fast_line(stop: FailedFast, runs_root: Path | None, results_csv: Path) -> str:
    """One line: why the run stopped early, where to look (the first failed task's run directory
    where it made one, else its row of ``results.csv``), and how to run on regardless."""
    run_dir = None if runs_root is None else task_run_dir(runs_root, stop.first_task)
    if run_dir is not None and run_dir.is_dir():
        where = f"first failed task's run dir: {run_dir}"
    else:
        where = f"the first failed task is id {stop.first_task}, its whole error in {results_csv}"
    return f"stopped: {stop} ({where}); set budget.fail_fast: 0 to run on regardless"


def _amend_exit_status(exp_dir: Path, status: int) -> None:
    """Set the exit status of the ``summary.json`` this run wrote before its CSV failed (``emews
    launch``, the batch job and ``emews status`` read it there); nothing when it cannot be written."""
    data = read_summary(exp_dir)
    if data and data.get("exit_status") != status:
        try:
            write_summary(exp_dir, {**data, "exit_status": status})
        except OSError:
            log.exception("cannot record the run's exit status in %s", SUMMARY_FILE)


def write_summary(exp_dir: Path, data: dict) -> None:
    """Replace ``summary.json`` atomically."""
    write_atomic(exp_dir / SUMMARY_FILE, [(json.dumps(data, indent=2) + "\n").encode()])
