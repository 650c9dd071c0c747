"""``emews cancel EXP``: the experiment's batch job and its attached pools' jobs, cancelled; with
``--queued``, the queued tasks of a pooled experiment (docs/postgres.md)."""

from __future__ import annotations

from pathlib import Path

from emews.config.experiment import POOLS_DIR
from emews.core.errors import ConfigError
from emews.site.batch_schedulers import DONE, NOT_FOUND
from emews.site.jobs import JOB_RECORD, cancel_experiment, job_lookup, read_job
from emews.store.pool_queue import OptimizerRunning, PoolQueue, queue_for_an_optimizer


def cancel_jobs(exp_dir: Path) -> list[str]:
    """Cancel the batch job of ``exp_dir`` and those of its attached pools (``EXP/pools/pool-NNN``)
    that have not ended: a pool whose optimizer is gone would hold its allocation idle until its
    walltime. One line each, saying what was cancelled, had ended already or is not known to the
    scheduler (forgotten after its end, or never submitted to it); ``ConfigError`` when
    no batch job was ever submitted for the experiment (a local run)."""
    folders = [exp_dir, *sorted((exp_dir / POOLS_DIR).glob("pool-*"))]
    recorded = [folder for folder in folders if (folder / JOB_RECORD).is_file()]
    if not recorded:  # a local run (or a --dry-run): a misuse of cancel, exit 2 (was 1)
        raise ConfigError(
            "no batch job was submitted for this experiment (a local run, or a --dry-run), and emews "
            "cancel cancels batch jobs; stop a local run with Ctrl-C or kill -TERM of its emews launch "
            "or resume (it stops cleanly; emews resume goes on)",
            file=exp_dir / JOB_RECORD,
        )
    lines = []
    for folder in recorded:
        job_id = read_job(folder)["job_id"]
        what = f"job {job_id} of {exp_dir.name}" if folder == exp_dir else f"pool job {job_id} ({folder.name})"
        state = job_lookup(folder)
        if state == NOT_FOUND:  # scancel of an unknown id exits 0 saying nothing: "cancelled" was a guess
            scheduler = read_job(folder).get("scheduler") or "the scheduler"
            lines.append(
                f"{what}: not found by {scheduler} (it ended and was forgotten, or was never submitted to "
                "this cluster); nothing cancelled"
            )
        elif state == DONE:
            lines.append(f"{what} had ended")
        else:
            cancel_experiment(folder)
            lines.append(f"cancelled {what}")
    return lines


def cancel_queued(exp_dir: Path) -> list[int]:
    """Cancel every task of ``exp_dir``'s shared queue that no pool claimed; their ids. Refused
    while an optimizer serves the experiment: it waits for those tasks' results, so cancel them
    from it (``evaluator.cancel``) or stop it first."""
    queue: PoolQueue | None = None
    try:
        try:
            queue = queue_for_an_optimizer(exp_dir)  # refused before the store is written while one runs
            queue.lock_optimizer()  # held while cancelling: no optimizer starts meanwhile
        except OptimizerRunning:
            raise ConfigError(
                "the experiment's optimizer is running and waits for its queued tasks",
                file=str(exp_dir),
                key="--queued",
                allowed="evaluator.cancel(ids) from the optimizer, or emews cancel EXP --queued once it stopped",
            ) from None
        return queue.cancel()
    finally:
        if queue is not None:
            queue.store.close()  # ends the session, and the lock with it
