"""``emews serve EXP``: an experiment's optimizer on a node without workers (a login or workflow
node) while pools run its tasks (docs/postgres.md, "Pools").

It is ``emews resume`` less the job: the experiment's lease here, the store's optimizer lock on any
host, the optimizer rebuilt from the store, results learnt by ``LISTEN``, and ``summary.json`` and
``results.csv`` written at the end. Pools keep running queued work while no optimizer serves.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from emews.config.experiment import LOG_FILE, LOG_FORMAT, WORKFLOW_FILE, require_experiment
from emews.config.lease import SERVE_COMMAND, acquire
from emews.config.workflow import load_workflow
from emews.core.wording import counted
from emews.job.nothing_left import nothing_left, stored_and_unfinished
from emews.job.pool_size import pooled_size
from emews.job.rank_zero import fill_exit_record, run_spec, take_exit_record, take_optimizer_lock, write_outputs
from emews.job.wiring import run_optimizer_rank
from emews.runtime.interrupt import Interrupt
from emews.site.jobs import batch_job_over

if TYPE_CHECKING:
    from emews.store.pool_queue import PoolQueue

#: what a pool's row and the log call the optimizer's place under ``emews serve``
SERVE_SITE = "serve"


def serve(exp_dir: Path) -> int:
    """Run the optimizer of the pooled experiment ``exp_dir`` here until it finishes (or a stop
    signal); the run's exit status, as ``emews resume`` gives it."""
    exp_dir = require_experiment(Path(exp_dir).absolute())
    lock = take_optimizer_lock(exp_dir, SERVE_COMMAND)  # SQLite, no pools, or an optimizer elsewhere: refused now
    try:
        return _serve(exp_dir, lock)
    finally:
        lock.store.close()  # the server releases the lock (closed already after a run)


def _serve(exp_dir: Path, lock: PoolQueue) -> int:
    workflow = load_workflow(str(exp_dir / WORKFLOW_FILE), check_imports=True)
    with acquire(exp_dir, SERVE_COMMAND, job_done=batch_job_over(exp_dir)):
        done = nothing_left(exp_dir, stored_and_unfinished(lock.store))
        if done is not None:  # every evaluation stored, none queued or leased
            if not lock.finished():  # its optimizer failed after its last result: the pools wait for its word
                lock.finish()
            print(done.line("serve", exp_dir), file=sys.stderr)
            return done.status
        spec = run_spec(workflow, exp_dir)
        spec.pools, spec.site_name, spec.optimizer_lock = True, SERVE_SITE, lock
        spec.size_for, sized = pooled_size(exp_dir, lock, spec.pool_lease)  # the pools' (none of its own)
        logging.basicConfig(filename=exp_dir / LOG_FILE, level=logging.INFO, format=LOG_FORMAT)
        print(
            f"serving {exp_dir}: the pools run its tasks (emews attach adds one); the {workflow.model.optimizer.name} "
            f"optimizer is sized for {counted(spec.size_for, 'worker')} ({sized})",
            file=sys.stderr,
            flush=True,
        )
        interrupt = Interrupt().install()
        take_exit_record(exp_dir)  # status tells a serve that was killed from the launch's ending
        try:
            # says what it takes over, as emews resume does
            summary = run_optimizer_rank(spec, None, [], interrupt=interrupt, say_resumed=True)
        finally:
            interrupt.ignore_from_now()
        status = write_outputs(spec, workflow, exp_dir, summary, None)
        fill_exit_record(exp_dir, status)
        return status
