"""The in-job entry point, ``emews run EXP_DIR``: every rank of the MPI job runs this."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

from emews.experiment import LOG_FILE, SITE_FILE, STORE_FILE, WORKFLOW_FILE, require_experiment
from emews.report import export_csv, load_results, summary_text
from emews.runtime.job import OptimizerFailed, RunSpec, run_optimizer_rank, run_worker_rank
from emews.runtime.transport import MPITransport
from emews.site import bind_gpus, load_site, local_rank
from emews.workflow import Workflow, load_workflow

log = logging.getLogger("emews")


def run_spec(workflow: Workflow, exp_dir: Path) -> RunSpec:
    task = workflow.model.task
    return RunSpec(space=workflow.space, make_optimizer=workflow.make_optimizer, objective=workflow.objective,
                   budget=workflow.model.budget.evaluations, direction=workflow.model.objective.direction,
                   seed=workflow.seed, isolation=task.isolation, timeout=task.timeout,
                   memory_limit=task.memory_limit, exp_dir=exp_dir)  # type: ignore[arg-type]


def run_experiment(exp_dir: Path) -> int:
    """Run this rank's part of the experiment; return the process exit status."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    exp_dir = require_experiment(exp_dir.absolute())
    workflow = load_workflow(str(exp_dir / WORKFLOW_FILE), check_imports=False)
    spec = run_spec(workflow, exp_dir)
    transport = MPITransport(comm)
    if comm.Get_size() < 2:
        print("emews run: needs at least 2 MPI ranks (1 optimizer + workers)", file=sys.stderr)
        return 2
    if comm.Get_rank() != 0:
        gpu_ids = bind_gpus(load_site(str(exp_dir / SITE_FILE)), local_rank())
        run_worker_rank(spec, transport, gpu_ids)
        return 0
    return _optimizer_rank(spec, workflow, transport, comm, exp_dir)


def _optimizer_rank(spec: RunSpec, workflow: Workflow, transport: MPITransport, comm: object,
                    exp_dir: Path) -> int:
    logging.basicConfig(filename=exp_dir / LOG_FILE, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")
    os.environ["EMEWS_EXP_DIR"] = str(exp_dir)
    workers = list(range(1, transport.size))
    log.info("start: %s workers, optimizer %s, budget %d", len(workers), workflow.model.optimizer.name, spec.budget)
    summary = run_optimizer_rank(spec, transport, workers)
    if summary.replayed:
        log.info("resumed: %d evaluations answered from the results store", summary.replayed)
        print(f"resumed: {summary.replayed} evaluations answered from the results store", file=sys.stderr)
    results = load_results(exp_dir)
    csv_path, _ = export_csv(exp_dir, results)
    text = summary_text(results, spec.budget, summary.elapsed)
    (exp_dir / "summary.json").write_text(json.dumps({
        "completed": summary.completed, "failed": summary.failed, "elapsed": summary.elapsed,
        "best": None if summary.best is None else {"id": summary.best.id, "objective": summary.best.objective,
                                                   "params": dict(summary.best.params)},
        "error": None if summary.error is None else str(summary.error), "finished": time.time()}, indent=2) + "\n")
    log.info("finished: %s", text.replace("\n", " | "))
    print(text, file=sys.stderr)
    print(f"results: {exp_dir / STORE_FILE} and {csv_path}", file=sys.stderr)
    if summary.error is None:
        return 0
    detail = summary.error.traceback if isinstance(summary.error, OptimizerFailed) else repr(summary.error)
    log.error("run failed: %s\n%s", summary.error, detail)
    print(f"\nemews: {summary.error}\n{detail}", file=sys.stderr)
    sys.stderr.flush()
    if not summary.all_stopped:
        comm.Abort(1)  # type: ignore[attr-defined]
    return 1
