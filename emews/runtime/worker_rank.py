"""A worker rank's whole part of a run, from a :class:`WorkerPlan` rank 0 sends it.

A worker needs far less than the optimizer rank: the objective, how to run it and which
GPUs it has. It neither reads the workflow or site file nor imports the configuration
layer (pydantic, YAML), so thousands of workers start fast and from one broadcast.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from emews.gpu_binding import GpuBinding, local_rank
from emews.objective import ObjectiveSpec, TaskContext
from emews.results import Task
from emews.runtime.inline import InlineRunner
from emews.runtime.interrupt import Interrupt
from emews.runtime.isolated import ProcessRunner
from emews.runtime.threads import cores_per_worker, limit_threads
from emews.runtime.transport import Transport
from emews.runtime.worker import Runner, worker_loop


@dataclass(frozen=True)
class WorkerPlan:
    """Everything a worker rank needs to serve tasks."""

    objective: ObjectiveSpec
    isolation: str = "process"
    timeout: float | None = None
    memory_limit: int | None = None
    runs_root: Path | None = None
    checkpoint_async: bool = True   # ctx.report checkpoints are written on a background thread
    checkpoint_local_dir: str | None = None  # stage checkpoints on this node-local directory first
    pause_grace: float = 0.0        # seconds a stop signal leaves a running trial to pause at a report
    gpus: GpuBinding = field(default_factory=GpuBinding)
    node_cores: int | None = None   # the site's cores per node (None: what this process may use)


def make_runner(plan: WorkerPlan, rank: int, gpu_ids: list[int], *, use_alarm: bool = True,
                interrupt: Interrupt | None = None) -> Runner:
    """The objective runner for one worker rank, per ``plan.isolation``."""
    host, runs_root, background = socket.gethostname(), plan.runs_root, plan.checkpoint_async

    def make_context(task: Task) -> TaskContext:
        context = TaskContext(task.id, rank, task.seed, list(gpu_ids), host, runs_root)
        if not background:
            context.checkpoint_async = False
        if plan.checkpoint_local_dir:
            context.checkpoint_local_dir = plan.checkpoint_local_dir
        return context

    if plan.isolation == "inline":
        return InlineRunner(plan.objective, timeout=plan.timeout if use_alarm else None,
                            make_context=make_context, interrupt=interrupt)
    spool = None if runs_root is None else runs_root / ".spool" / f"rank{rank}"
    return ProcessRunner(plan.objective, timeout=plan.timeout, memory_limit=plan.memory_limit,
                         make_context=make_context, spool=spool)


def serve(plan: WorkerPlan, transport: Transport, gpu_ids: list[int], *, use_alarm: bool = True,
          interrupt: Interrupt | None = None) -> int:
    """Serve tasks until the distributor says stop (or a stop signal arrives); the count served."""
    interrupt = interrupt or Interrupt()
    runner = make_runner(plan, transport.rank, gpu_ids, use_alarm=use_alarm, interrupt=interrupt)
    return worker_loop(transport, runner, interrupted=interrupt, aborting=interrupt.aborting)


def serve_on_node(plan: WorkerPlan, transport: Transport, ranks_on_node: int, interrupt: Interrupt) -> int:
    """A worker rank of an MPI job: bind its GPUs, share the node's cores, serve."""
    gpu_ids = plan.gpus.bind(local_rank())
    interrupt.grace = plan.pause_grace  # a stop signal pauses a running trial at its next report
    limit_threads(cores_per_worker(ranks_on_node, plan.node_cores))
    return serve(plan, transport, gpu_ids, interrupt=interrupt)
