"""``emews attach EXP``: one more pool of workers for an experiment launched with ``--pools``
(docs/postgres.md, "Pools").

The pool gets a folder of its own, ``EXP/pools/pool-NNN`` (its site, its batch script and job
record, its log); on the ``local`` site its job runs here, elsewhere it is submitted. Everything
that can be refused is refused before a folder is made or a job submitted: an experiment whose
store is SQLite or that was launched without pools, a database that does not answer, a site or a
size that does not fit. A finished experiment (its budget spent, nothing queued or leased) gets no
pool: ``emews attach`` says so in one line and exits as ``emews serve`` does (a dry run still
prints the pool's script).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from emews.config.experiment import (
    POOLS_DIR,
    SITE_FILE,
    WORKFLOW_FILE,
    next_numbered,
    read_info,
    require_experiment,
)
from emews.config.workflow import load_workflow
from emews.config.yamlio import dump_yaml, file_key, parse_override
from emews.core.errors import EXIT_FAILED, EXIT_OK, ConfigError
from emews.core.wording import counted
from emews.job.job_environment import check_job_environment
from emews.job.job_start import JobStart, job_ranks, start_seconds
from emews.job.launching import run_here
from emews.job.nothing_left import nothing_left, stored_and_unfinished
from emews.job.pool_started import PoolLead
from emews.job.shm_records import records_folder, sweep
from emews.job.start_marks import marks_folder
from emews.site import Site, load_site
from emews.site.jobs import (
    JOB_RECORD,
    JOB_SCRIPT,
    exit_command,
    job_command,
    say_pool_not_started,
    watch_command,
    write_script,
)
from emews.store.pool_queue import queue_for_a_pool


def refuse_workflow_keys(exp_dir: Path, overrides: Sequence[str]) -> None:
    """``--set`` of ``emews attach`` sets keys of the pool's site: a key of the workflow there (the
    budget, say, which is the optimizer's) is one :class:`ConfigError` naming it and where it is set."""
    from emews.config.workflow_schema import WorkflowModel
    from emews.site.schema import SiteConfig

    for item in overrides:
        key, _ = parse_override(item)
        said, in_file = file_key(key, "workflow")  # workflow.KEY says it outright
        top = in_file.split(".")[0]
        if said or (top in WorkflowModel.model_fields and top not in SiteConfig.model_fields):
            raise ConfigError(
                "a key of the experiment's workflow, which a pool does not change: emews attach --set "
                "sets keys of the pool's site",
                file="--set",
                key=key,
                allowed=f"site keys ({', '.join(SiteConfig.model_fields)}); the workflow's {top} changes with "
                f"emews resume {shlex.quote(str(exp_dir))} --set {key}=... once its optimizer stopped",
            )


def pool_command(exp_dir: Path, pool_dir: Path) -> list[str]:
    """What every rank of an attached pool's job runs."""
    return job_command(exp_dir, pool_dir=pool_dir)


def attach(
    exp_dir: Path,
    *,
    site: str | Site | None = None,
    workers: int | None = None,
    site_overrides: Sequence[str] = (),
    dry_run: bool = False,
    relay: bool = False,
) -> int:
    """Start a pool for ``exp_dir`` on ``site`` (default: the experiment's); the exit status (the
    pool job's on a local site, 0 once a batch job is submitted)."""
    exp_dir = require_experiment(Path(exp_dir).absolute())
    if workers is not None and workers < 1:
        raise ConfigError("must be at least 1", key="--workers")
    refuse_workflow_keys(exp_dir, site_overrides)
    with queue_for_a_pool(exp_dir).store as store:  # SQLite, no pools, no database, an older optimizer: refused now
        done = nothing_left(exp_dir, stored_and_unfinished(store))
    chosen = site if isinstance(site, Site) else load_site(site or str(exp_dir / SITE_FILE), list(site_overrides))
    workers = chosen.total_workers(workers or read_info(exp_dir).get("workers"))
    load_workflow(str(exp_dir / WORKFLOW_FILE), check_imports=False).check_task_size(workers)
    check_job_environment()
    if done is not None and not dry_run:  # every evaluation stored, none queued or leased: a pool would idle
        print(done.line("attach a pool to", exp_dir), file=sys.stderr)
        return done.status
    pool_dir = next_numbered(exp_dir / POOLS_DIR, "pool")
    command = pool_command(exp_dir, pool_dir)
    script = (  # validates
        None
        if chosen.is_local
        else chosen.render_batch_script(
            pool_dir,
            workers,
            command,
            exit_command=exit_command(exp_dir, pool_dir=pool_dir),
            watch_command=watch_command(exp_dir, None, workers + 1, pool_dir=pool_dir),  # its start, bounded
            lead="pool distributor",
        )
    )
    if dry_run:
        if script is None:
            print(shlex.join(chosen.launch_command(workers + 1, command)))
        else:
            print(script)
            print(
                "# dry run: nothing written; emews attach writes it to job.sh and submits it with: "
                + chosen.submit_line(pool_dir / JOB_SCRIPT)
            )
        return EXIT_OK
    pool_dir.mkdir(parents=True)
    (pool_dir / SITE_FILE).write_text(dump_yaml(chosen.to_dict()), encoding="utf-8")
    if script is None:
        print(f"pool for {exp_dir}: {counted(workers, 'worker')} on {chosen.name} (folder {pool_dir})", file=sys.stderr)
        lead = PoolLead(exp_dir)
        start = JobStart(  # its rank 0 registered in the store: the pool started
            lead,
            bound=start_seconds,
            marks=marks_folder(exp_dir, None, pool_dir),
            ranks=workers + 1,
            segments=records_folder(exp_dir, None, pool_dir),
            job_ranks=lambda: job_ranks(None, pool_dir),
        )
        try:
            status, received = run_here(chosen, command, workers, relay=relay, start=start)
        finally:
            lead.close()
            sweep(records_folder(exp_dir, None, pool_dir))  # what a killed rank left in /dev/shm
        if start.stuck is not None:
            say_pool_not_started(exp_dir, pool_dir, start.stuck)
            return EXIT_FAILED
        return 128 + received if received else status
    try:
        write_script(pool_dir / JOB_SCRIPT, script)
        job_id = chosen.submit(pool_dir / JOB_SCRIPT)
    except BaseException:
        shutil.rmtree(pool_dir, ignore_errors=True)
        raise
    record = {
        "job_id": job_id,
        "site": chosen.name,
        "scheduler": chosen.config.scheduler.type,
        "submitted": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "submit_command": chosen.submit_line(pool_dir / JOB_SCRIPT),  # as a shell runs it (LSF: "bsub < job.sh")
    }
    (pool_dir / JOB_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print(f"submitted pool job {job_id} to {chosen.name} for {exp_dir} (folder {pool_dir})")
    return EXIT_OK
