"""``emews status``'s lines about an experiment's worker pools (docs/postgres.md, "Pools"): each
pool's site, job, host, workers, tasks done, last heartbeat and (an attached pool) its folder, and
the shared queue's counts."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from emews.core.wording import counted, duration
from emews.reporting.files import ExperimentFiles
from emews.store.opening import recorded_store
from emews.store.postgres_url import lease_seconds

if TYPE_CHECKING:
    from emews.core.lost_ranks import LostRank
    from emews.store.base import Store
    from emews.store.pool_queue import PoolRow

#: the queue's states, in the order the line names them
QUEUE_STATES = ("queued", "leased", "done", "cancelled")


@dataclass(frozen=True)
class PoolView:
    """What ``emews status`` shows of the pools: its lines, and the figures of the headline's
    ``workers busy`` (a pooled run's workers are the running pools', not the optimizer's job's;
    busy are their ranks running a task, not the tasks they hold: a team counts each of its
    ranks, a task taken ahead from the queue none)."""

    lines: list[str] = field(default_factory=list)
    workers: int = 0  # of the running pools
    busy: int = 0  # of their worker ranks, those running a task (as each pool last said)
    optimizer: bool = False  # whether an optimizer serves the experiment (a job, emews serve or resume, any host)
    #: the worker ranks the pools of the run went on without so far (those not stopped: since the first started)
    lost: list[LostRank] = field(default_factory=list)


def _busy_ranks(pool: PoolRow, told: dict[int, int], leased: dict[int, int]) -> int:
    """The worker ranks of the running ``pool`` that run a task: what it last said
    (:meth:`~emews.store.pool_queue.PoolQueue.say_busy`); a pool of an older emews says nothing,
    and its tasks under lease count, one rank each, up to its workers."""
    return min(told.get(pool.id, leased.get(pool.id, 0)), pool.workers)


def _batch_job_state(folder: Path) -> str | None:
    """What the scheduler says of the batch job of the attached pool in ``folder`` (its ``job.json``):
    :func:`~emews.site.jobs.job_lookup`'s state; ``None`` for a pool on ``local`` (no job) or where
    no scheduler can tell (a pool on another cluster: then its heartbeats tell)."""
    from emews.config.experiment import JOB_RECORD
    from emews.core.errors import EmewsError

    if not (folder / JOB_RECORD).is_file():
        return None
    from emews.site.jobs import job_lookup  # the sites only where a batch job's state is asked

    try:
        return job_lookup(folder)
    except (EmewsError, OSError):  # no scheduler command here
        return None


def _batch_job_ended(folder: Path) -> bool:
    """Whether the scheduler says the batch job of the attached pool in ``folder`` is over."""
    state = _batch_job_state(folder)
    if state is None:  # no batch job, or none a scheduler here can tell of
        return False
    from emews.site.batch_schedulers import DONE

    return state == DONE


def _process_ended(pool: PoolRow, processes: dict[int, tuple[int, float]]) -> bool:
    """Whether ``pool``'s process (its rank 0, as it registered) has ended, as this host can tell:
    ``False`` for a pool on another host, one that recorded no process, and one in a batch job
    (its scheduler tells, :func:`_batch_job_ended`: the job, not one process, is the pool there)."""
    from emews.config.lease import Owner

    if pool.id not in processes or pool.host is None or pool.job_id is not None:
        return False
    pid, started = processes[pool.id]
    return Owner(pool.host, pid, started).alive() is False


def _coming_back(lease_end: float | None, now: float, finished: bool) -> str:
    """What becomes of a lost pool's tasks, and when: the end of its last lease, from ``now``; they
    return to the queue, or, the optimizer having finished, are cancelled (nothing is pending)."""
    fate = "cancelled: the run has finished" if finished else "queued again at the next claim"
    if lease_end is None or lease_end <= now:
        return f"its tasks' leases ended: they are {fate}"
    if finished:
        return f"its tasks are cancelled when their leases end, in {duration(lease_end - now)}: the run has finished"
    return f"its tasks return to the queue when their leases end, in {duration(lease_end - now)}"


def pool_lines(files: ExperimentFiles, store: Store | None) -> PoolView:
    """The lines (none for an experiment without pools); a pool whose heartbeat is older than the
    workflow's ``store.lease`` and that did not say it stopped is *lost* while tasks are still
    leased to it (they return to the queue when their leases end), then *gone*: killed or cut
    off, its tasks taken over by other pools, it holds nothing of the run any more. An attached
    pool whose heartbeat is late (older than a third of the lease, its heartbeat period) and whose
    batch job its scheduler says ended is lost (or gone) at once: its job was killed under it; so is
    a pool on this host whose process (its rank 0, as it registered) has ended: nothing to ask
    about for a pool on ``local``. ``store``: the experiment's, open (``None``: none yet)."""
    exp_dir = files.exp_dir
    if store is None or recorded_store(exp_dir) is None:
        return PoolView()
    from emews.config.experiment import pool_folders
    from emews.store.pool_queue import PoolQueue  # PostgreSQL's modules only for such a store

    lease_s = lease_seconds((files.workflow.get("store") or {}).get("lease"))
    queue = PoolQueue(store)  # type: ignore[arg-type]
    if not queue.enabled():
        return PoolView()
    pools, counts = queue.pools(), queue.state_counts()
    told, leased, holding = queue.busy_by_pool(), queue.leased_by_pool(), queue.holding_by_pool()
    leases_end = queue.leases_end_by_pool()
    now = queue.server_time()
    optimizer = queue.optimizer_running()
    finished = queue.finished()
    processes = queue.processes()
    live = [pool.started for pool in pools if pool.stopped is None and pool.started is not None]
    lost = queue.lost_ranks(since=min(live)) if live else []
    said = [f"{counts.get(state, 0)} {state}" for state in QUEUE_STATES]
    if counts.get("expired"):  # leased by a pool that is gone: queued again at the next claim
        fate = "cancelled: the run has finished" if finished else "queued again at the next claim"
        said[1] += f" ({counts['expired']} of them past their lease: {fate})"
    folders = pool_folders(exp_dir)
    lines = ["queue: " + ", ".join(said)]
    lines.append(f"pools: {len(pools)}")
    workers = busy = 0
    for pool in pools:
        late = pool.heartbeat is None or now - pool.heartbeat > lease_s / 3  # it heartbeats every third
        ended = None  # what ended under a pool that did not say it stopped, when that is known
        if pool.stopped is None and _process_ended(pool, processes):
            ended = "its process"
        elif pool.stopped is None and late and pool.id in folders and _batch_job_ended(folders[pool.id]):
            ended = "its batch job"
        if pool.stopped is not None:
            state = "stopped"
        elif ended:  # killed (SIGKILL, its job scancelled past its grace, a node lost): it will not beat again
            state = (
                f"lost ({ended} ended without it stopping; {_coming_back(leases_end.get(pool.id), now, finished)})"
                if holding.get(pool.id)
                else f"gone ({ended} ended without it stopping; it held nothing)"
            )
        elif pool.heartbeat is not None and now - pool.heartbeat <= lease_s:
            state = "running"
            workers += pool.workers
            busy += _busy_ranks(pool, told, leased)
        elif holding.get(pool.id):
            state = f"lost ({_coming_back(leases_end.get(pool.id), now, finished)})"
        else:
            state = "gone (no heartbeat; its tasks were taken over)"
        beat = "-" if pool.heartbeat is None else f"{max(now - pool.heartbeat, 0.0):.0f} s ago"
        lines.append(
            f"  pool {pool.id}: {state}, {pool.site}, job {pool.job_id or '-'}, host {pool.host or '-'}, "
            f"{counted(pool.workers, 'worker')}, {counted(pool.tasks_done, 'task')} done, heartbeat {beat}"
            + (f", folder {folders[pool.id].relative_to(exp_dir)}" if pool.id in folders else "")
        )
    if not optimizer and not finished:  # killed or stopped: what is queued runs, nothing more is proposed
        lines.append(
            "optimizer: none runs: the pools run what is queued or leased, nothing more is proposed; "
            f"continue with: emews serve {shlex.quote(str(exp_dir))}"
        )
    lines += _unstarted_lines(exp_dir, set(folders.values()))
    return PoolView(lines, workers, busy, optimizer=optimizer, lost=lost)


def _unstarted_lines(exp_dir: Path, registered: set[Path]) -> list[str]:
    """A line per attached pool's batch job whose pool has not registered (no ``pool.json``): still
    in the batch queue, starting, or ended before its pool started (its output named), as its
    scheduler says. A pool attached on ``local`` has no job to ask about."""
    from emews.config.experiment import JOB_RECORD, POOLS_DIR
    from emews.core.errors import EmewsError

    lines = []
    for folder in sorted((exp_dir / POOLS_DIR).glob("pool-*")):
        if folder in registered or not (folder / JOB_RECORD).is_file():
            continue
        from emews.site.batch_schedulers import DONE, NOT_FOUND, QUEUED, RUNNING  # only for a batch job's pool
        from emews.site.jobs import job_output, read_job

        name = folder.relative_to(exp_dir)
        try:
            job = f"batch job {read_job(folder).get('job_id') or '?'}"
        except EmewsError:  # an unreadable record
            continue
        state = _batch_job_state(folder)
        try:
            output = job_output(folder)
        except EmewsError:  # the record went away since it was read
            output = None
        if state == QUEUED:
            said = "waits in the batch queue; its pool has not started"
        elif state == RUNNING:
            said = "runs; its pool has not joined yet"
        elif state in (DONE, NOT_FOUND):
            shown = "" if output is None else f" (its output: {output.relative_to(exp_dir)})"
            said = f"ended before its pool started{shown}"
        else:
            said = "submitted; its pool has not started (the scheduler's state for it is unknown)"
        lines.append(f"  {name}: {job} {said}")
    return lines
