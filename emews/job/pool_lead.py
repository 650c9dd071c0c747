"""Rank 0 of a job started by ``emews attach``: one more pool for a running experiment
(docs/postgres.md, "Pools").

It reads the experiment's workflow (what the workers run) and the pool's own site (where it runs:
``EXP/pools/NNN/site.yaml``), tells its workers what to run, registers the pool in the store and
feeds its workers from the shared queue until the optimizer says it is done and the pool holds
nothing, or a stop signal comes (then, its workers stopped, it hands what it held back to the
queue at once: another pool continues it). It
takes no lease on the experiment: any number of pools work for it at once.
"""

from __future__ import annotations

import logging
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from emews.config.experiment import (
    LOG_FILE,
    LOG_FORMAT,
    SITE_FILE,
    WORKFLOW_FILE,
    require_experiment,
    write_pool_record,
)
from emews.config.workflow import load_workflow
from emews.core.errors import EXIT_FAILED, EXIT_OK, ConfigError, TaskOutOfSpace
from emews.core.wording import counted
from emews.job import start_marks
from emews.job.job_environment import check_job_environment
from emews.job.pool_run import PoolRun
from emews.job.rank_zero import refuse, run_spec, set_allocation
from emews.job.wiring import trial_service
from emews.runtime.interrupt import Interrupt, Interrupted
from emews.runtime.team_comm import TeamWorld
from emews.runtime.transport import MPITransport, quiet_bcast
from emews.runtime.walltime_pause import WalltimeStop
from emews.site import load_site
from emews.site.gpus import gpu_binding
from emews.store import open_store
from emews.store.pool_queue import StoreLost, queue_for_a_pool

log = logging.getLogger("emews")


def lead_pool(exp_dir: Path, pool_dir: Path, comm: Any, interrupt: Interrupt) -> int:
    """The pool's whole part on rank 0; the process exit status (0 unless refused)."""
    try:
        require_experiment(exp_dir)
        workflow = load_workflow(str(exp_dir / WORKFLOW_FILE), check_imports=False)
        workflow.check_task_size(comm.Get_size() - 1)
        check_job_environment()
        site = load_site(str(pool_dir / SITE_FILE))
        queue = queue_for_a_pool(exp_dir)
    except ConfigError as exc:
        return refuse(comm, exc)
    queue.retry_s = workflow.model.store.retry_seconds
    spec = run_spec(workflow, exp_dir)
    gang = spec.task_size.gang
    plan = replace(  # its ranks' numbers are the optimizer job's too: their output spools are the pool's own
        spec.worker_plan(
            gpu_binding(site), site.config.node.cores, launch_line=site.team_launch_line if gang else None
        ),
        pool=pool_dir.name,
    )
    quiet_bcast(comm, plan)
    teams = TeamWorld(comm) if gang else None  # collective: every rank
    logging.basicConfig(filename=pool_dir / LOG_FILE, level=logging.INFO, format=LOG_FORMAT)
    transport = MPITransport(comm, threads=True)
    workers = list(range(1, transport.size))
    set_allocation(spec, workflow, site, time.time())
    # the distributor thread's own connection; checkpoint paths kept, and deleted, inside the experiment
    trial_store = open_store(exp_dir)
    trials = trial_service(spec, trial_store, shared=True)
    run = PoolRun(
        queue,
        transport,
        workers,
        site=site.name,
        sign=spec.sign,
        lease_s=workflow.model.store.lease_seconds,
        gang=gang,
        nodes=None if teams is None else teams.nodes,
        inline_timeout=spec.timeout if spec.isolation == "inline" else None,
        task_timeout=spec.timeout,
        fail_fast=spec.fail_fast,
        trials=trials,
        exp_dir=exp_dir,
    )
    try:
        write_pool_record(pool_dir, run.pool)
    except OSError as exc:  # status then shows the pool without its folder; the pool runs on
        log.warning("pool %s: could not record its id in %s: %s", run.pool, pool_dir, exc)
    # its ranks' start marks, done with (the watch of its start removes them too, once it sees the pool)
    start_marks.remove(pool_dir / start_marks.POOL_MARKS)
    print(
        f"pool {run.pool} of {exp_dir}: {counted(len(workers), 'worker')} on {site.name}", file=sys.stderr, flush=True
    )
    log.info("pool %s: %s workers on %s", run.pool, len(workers), site.name)
    stopped: BaseException | None = None
    # at the walltime margin no task starts and trials pause; once nothing runs the pool ends itself,
    # as a job's run does, rather than holding its paused and unstarted tasks until the batch system kills it
    walltime = WalltimeStop(trials.clock, lambda: run.distributor.idle, interrupt.stop_at_walltime).start()
    interrupt.warning = walltime.warn  # the batch system's early warning (SIGUSR1): pause now
    try:
        with interrupt.raising():
            run.run()
    except Interrupted as exc:
        stopped = exc
        run.stop()
    except Exception as exc:  # the store lost for good, the distributor failed: one line, what it stored kept
        stopped = exc
        log.error("pool %s stopped: %s", run.pool, exc, exc_info=not isinstance(exc, (StoreLost, TaskOutOfSpace)))
    finally:
        walltime.close()
        run.close(abort=stopped is not None)
        queue.store.close()
        trial_store.close()
    line = (
        f"pool {run.pool}: {len(run.feeder.stored)} results stored"
        + (f", {len(run.feeder.late)} late (another pool's stood)" if run.feeder.late else "")
        + (f", {counted(len(run.handed_back), 'task')} handed back to the queue" if run.handed_back else "")
    )
    print(
        line + ("" if stopped is None else f"; stopped: {stopped}{_going_on(stopped, exp_dir)}"),
        file=sys.stderr,
        flush=True,
    )
    log.info(line)
    status = EXIT_OK if stopped is None or isinstance(stopped, Interrupted) else EXIT_FAILED
    if not run.distributor.all_stopped:  # a worker that cannot be joined (stopped) held the job open for good
        log.error(
            "pool %s: workers did not confirm their stop (or it went on without them); aborting its job", run.pool
        )
        sys.stderr.flush()
        comm.Abort(status)  # MPICH's mpiexec exits with this status, every rank ended (the stopped one too)
    return status


def _going_on(stopped: BaseException, exp_dir: Path) -> str:
    """What the pool's last line adds to how it stopped: after a full disk, how to go on (its task
    is back in the queue; the optimizer and the other pools run on until they meet the disk too)."""
    if isinstance(stopped, TaskOutOfSpace):
        return f"; free space, then attach a pool again: emews attach {shlex.quote(str(exp_dir))}"
    return ""
