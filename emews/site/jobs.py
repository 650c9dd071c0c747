"""Batch jobs of an experiment: ``job.sh`` and ``job.json`` in the experiment dir."""

from __future__ import annotations

import contextlib
import json
import logging
import shlex
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from emews.config.experiment import JOB_RECORD as JOB_RECORD  # the job's record, named where status finds it
from emews.config.experiment import LOG_FILE, LOG_FORMAT, run_exit_status
from emews.core.errors import EXIT_CONFIG, EXIT_FAILED, EmewsError
from emews.core.textfiles import write_atomic
from emews.site.batch_schedulers import BATCH_SCHEDULERS, DONE, UNKNOWN, state_of
from emews.site.schema import SchedulerConfig
from emews.site.site import Site

JOB_SCRIPT = "job.sh"


def job_command(exp_dir: Path, lease_token: str | None = None, pool_dir: Path | None = None) -> list[str]:
    """What every rank runs inside the job (with the token of the lease the job joins; of an attached
    pool's job, with the pool's folder)."""
    command = [sys.executable or "python3", "-m", "emews", "run", str(exp_dir)]
    command += ["--lease", lease_token] if lease_token else []
    return command + ["--pool", str(pool_dir)] if pool_dir is not None else command


def exit_command(exp_dir: Path, lease_token: str | None = None, pool_dir: Path | None = None) -> list[str]:
    """What ``job.sh`` runs once the launcher line has ended, with the launcher's exit status and
    the job's start time appended: it exits with the run's status (:func:`job_exit_status`; an
    attached pool's job: the launcher's)."""
    return [*job_command(exp_dir, lease_token, pool_dir), "--job-exit"]


def watch_command(exp_dir: Path, lease_token: str | None, ranks: int, pool_dir: Path | None = None) -> list[str]:
    """What ``job.sh`` runs beside the launcher line, with the launcher's pid appended: the watch of
    the job's start (``emews.job.job_start.watch_batch_start``), ``ranks`` ranks."""
    return [*job_command(exp_dir, lease_token, pool_dir), "--watch-start", str(ranks)]


def job_exit_status(exp_dir: Path, launcher_status: int, since: float) -> int:
    """The batch job's exit status: the one the run that ended after ``since`` recorded (every
    rank exits 0 to the launcher, so the launcher's says nothing of a run that stopped itself or
    failed), else the launcher's when it failed, else 1 with a line saying so."""
    recorded = run_exit_status(exp_dir, since)
    if recorded is not None:
        return recorded
    if launcher_status in (EXIT_FAILED, EXIT_CONFIG):  # rank 0 said why itself (a configuration error)
        return launcher_status
    if launcher_status != 0:  # a rank killed (kill -9, the OOM killer, a segfault): the launcher's banner only
        say_ended_before_run(exp_dir, f"the launcher exited with status {launcher_status}: a rank was killed or exited")
        return launcher_status
    say_ended_before_run(exp_dir, f"no summary of it in {exp_dir}")
    return EXIT_FAILED


def say_ended_before_run(exp_dir: Path, why: str) -> None:
    """The line that says the job ended before its run wrote its summary (``why``), and how to go on;
    ``emews.log`` gets it too (the run itself could not say it there)."""
    log_error(exp_dir, f"the job ended before its run did ({why})")
    print(
        f"emews: the job ended before its run did ({why}); what it stored stays stored; continue with: "
        f"emews resume {shlex.quote(str(exp_dir))}",
        file=sys.stderr,
    )


def say_pool_not_started(exp_dir: Path, pool_dir: Path, why: str) -> None:
    """The line that says an attached pool's job ended before its pool ran (``why``); the pool's
    ``emews.log`` gets it too. Nothing was held (its rank 0 never registered): the experiment goes on
    without it."""
    log_error(pool_dir, f"the pool's job ended before it ran ({why})")
    print(
        f"emews: the pool's job ended before it ran ({why}); the experiment goes on without it; attach "
        f"another with: emews attach {shlex.quote(str(exp_dir))}",
        file=sys.stderr,
    )


def log_error(folder: Path, message: str) -> None:
    """Append ``message`` to ``folder``'s ``emews.log`` as an error (for what a job could not log itself)."""
    record = logging.makeLogRecord({"msg": message, "levelname": "ERROR"})
    with contextlib.suppress(OSError), (folder / LOG_FILE).open("a", encoding="utf-8") as log:
        log.write(logging.Formatter(LOG_FORMAT).format(record) + "\n")


def write_script(path: Path, text: str) -> None:
    """Write an executable script whole (temp file, then rename), its mode 0777 less the umask.

    The umask applies at creation, so a user who keeps files private (``umask 077``)
    gets a private job.sh: it may hold secrets from ``environment.vars``.
    """
    write_atomic(path, [text.encode("utf-8")], durable=False, mode=0o777)


def submit_experiment(
    site: Site, exp_dir: Path, workers: int, dry_run: bool = False, lease_token: str | None = None
) -> str | None:
    """Write ``exp_dir/job.sh`` and, unless ``dry_run``, submit it and record ``job.json``.

    Every ConfigError (account, walltime, sizes, GPUs) is raised before anything
    is submitted.  Returns the job id, or None on a dry run.
    """
    exp_dir = Path(exp_dir).resolve()
    script_text = site.render_batch_script(
        exp_dir,
        workers,
        job_command(exp_dir, lease_token),
        exit_command=exit_command(exp_dir, lease_token),
        watch_command=watch_command(exp_dir, lease_token, site.total_workers(workers) + 1),
    )
    exp_dir.mkdir(parents=True, exist_ok=True)
    script = exp_dir / JOB_SCRIPT
    write_script(script, script_text)
    if dry_run:
        return None
    job_id = site.submit(script)
    record = {
        "job_id": job_id,
        "site": site.name,
        "scheduler": site.config.scheduler.type,
        "submitted": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "submit_command": site.submit_line(script),  # as a shell runs it (LSF: "bsub < job.sh")
    }
    (exp_dir / JOB_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return job_id


def read_job(exp_dir: Path) -> dict[str, Any]:
    """The ``job.json`` record; EmewsError when the experiment was never submitted."""
    path = Path(exp_dir) / JOB_RECORD
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EmewsError(f"{path}: no batch job was submitted for this experiment") from None
    except (OSError, ValueError) as exc:
        raise EmewsError(f"{path}: unreadable job record: {exc}") from None


def _scheduler(record: dict[str, Any]):
    kind = record.get("scheduler")
    if kind not in BATCH_SCHEDULERS:
        raise EmewsError(f"job record names an unknown scheduler {kind!r}")
    return BATCH_SCHEDULERS[kind](SchedulerConfig(type=kind))


def job_status(exp_dir: Path) -> str:
    """``queued`` | ``running`` | ``done`` | ``unknown`` for the experiment's job (:func:`job_lookup`'s
    ``not found``: ``done``)."""
    return state_of(job_lookup(exp_dir))


def job_lookup(exp_dir: Path) -> str:
    """What the scheduler says of the experiment's job: :func:`job_status`'s states, or
    ``not found`` (:data:`~emews.site.batch_schedulers.NOT_FOUND`) for an id it does not know."""
    record = read_job(exp_dir)
    job_id = str(record.get("job_id") or "")
    return _scheduler(record).lookup(job_id) if job_id else UNKNOWN


def batch_job_over(exp_dir: Path) -> Callable[[str], bool]:
    """For a lease held by a batch job: whether that job (the one ``job.json`` records) is over."""

    def over(job_id: str) -> bool:
        return _scheduler(read_job(exp_dir)).job_state(job_id) == DONE

    return over


def job_output(exp_dir: Path) -> Path | None:
    """The output file the experiment's batch job writes (``job-ID.out``, ``job.out``), when its
    scheduler's name for it is known."""
    record = read_job(exp_dir)
    kind = record.get("scheduler")
    if kind not in BATCH_SCHEDULERS:
        return None
    job_id = str(record.get("job_id") or "")
    name = BATCH_SCHEDULERS[kind].output_name
    return Path(exp_dir) / name.replace("%j", job_id).replace("%J", job_id)


def cancel_experiment(exp_dir: Path) -> None:
    """Cancel the experiment's batch job (EmewsError with the scheduler's stderr on failure)."""
    record = read_job(exp_dir)
    _scheduler(record).cancel(str(record["job_id"]))
