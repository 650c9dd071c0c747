"""A worker rank's whole part of a run, from a :class:`WorkerPlan` rank 0 sends it.

A worker needs far less than the optimizer rank: the objective, how to run it and which
GPUs it has. It neither reads the workflow or site file nor imports the configuration
layer (pydantic, YAML), so thousands of workers start fast and from one broadcast.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emews.core.followed_dir import FollowedDir
from emews.core.gpu_binding import GpuBinding
from emews.core.results import Task
from emews.objective.context import TaskContext
from emews.objective.function import ObjectiveSpec
from emews.objective.team import Team
from emews.objective.worker_context import WorkerContext
from emews.runtime.inline import InlineRunner
from emews.runtime.interrupt import Interrupt
from emews.runtime.isolated import ProcessRunner
from emews.runtime.spool import spool_dir
from emews.runtime.team_comm import TeamWorld
from emews.runtime.threads import cores_per_worker, limit_threads
from emews.runtime.transport import Transport
from emews.runtime.worker import Runner, worker_loop
from emews.training.messages import TrialLink

#: ``ctx.launch``'s command line for a team's world ranks, their hosts and the cores the launcher
#: bound each to (the site's :meth:`~emews.site.site.Site.team_launch_line`)
LaunchLine = Callable[[tuple[int, ...], tuple[str, ...], tuple[tuple[int, ...], ...]], tuple[str, ...]]


@dataclass(frozen=True)
class WorkerPlan:
    """Everything a worker rank needs to serve tasks."""

    objective: ObjectiveSpec
    isolation: str = "process"
    timeout: float | None = None
    memory_limit: int | None = None
    runs_root: Path | None = None
    checkpoint_async: bool = True  # ctx.report checkpoints are written on a background thread
    checkpoint_local_dir: str | None = None  # stage checkpoints on this node-local directory first
    pause_grace: float = 0.0  # seconds a stop signal leaves a running trial to pause at a report
    gpus: GpuBinding = field(default_factory=GpuBinding)
    node_cores: int | None = None  # the site's cores per node (None: what this process may use)
    backend: str = "gloo"  # torch.distributed backend of ctx.process_group() (the site's)
    gang: bool = False  # tasks may span several ranks (every rank joins the TeamWorld)
    launch_line: LaunchLine | None = None  # None: single-rank runs
    #: an attached pool's folder name (``pool-001``): its ranks' output spools are its own
    pool: str = ""


def make_runner(
    plan: WorkerPlan,
    rank: int,
    gpu_ids: list[int],
    *,
    use_alarm: bool = True,
    interrupt: Interrupt | None = None,
    teams: TeamWorld | None = None,
    local_rank: int = 0,
) -> Runner:
    """The objective runner for one worker rank, per ``plan.isolation``; ``teams`` (under MPI) makes a
    multi-rank task's communicator (inline isolation) and knows its members' cores (``ctx.launch``);
    ``local_rank``: the rank's among its node's (its objective's ``setup(ctx)`` is told)."""
    host, runs_root, launch_line = socket.gethostname(), plan.runs_root, plan.launch_line
    worker = WorkerContext(rank, host, local_rank, list(gpu_ids))
    # each task's run dir and checkpoints go where the experiment is then (mv EXP EXP2 while it runs)
    experiment = None if runs_root is None else FollowedDir(runs_root.parent)

    def make_context(
        task: Task, team: Team | None = None, *, link: TrialLink | None = None, comm: Any = None
    ) -> TaskContext:
        """The task's context: what this worker holds, and the channels its runner hands in."""
        ranks, hosts = (team.ranks, team.hosts) if team is not None else ((rank,), (host,))
        cores = () if teams is None else teams.team_cores(ranks)
        return TaskContext(
            task.id,
            rank,
            task.seed,
            list(gpu_ids),
            host,
            runs_root,
            team=team,
            experiment=experiment,
            attempt=task.attempt,
            backend=plan.backend,
            launch_line=() if launch_line is None else launch_line(ranks, hosts, cores),
            checkpoint_async=plan.checkpoint_async,
            checkpoint_local_dir=plan.checkpoint_local_dir or None,
            link=link,
            comm=comm,
        )

    if plan.isolation == "inline":
        return InlineRunner(
            plan.objective,
            timeout=plan.timeout if use_alarm else None,
            make_context=make_context,
            interrupt=interrupt,
            team_comm=None if teams is None else teams.communicator,
            worker=worker,
        )
    spool = None if runs_root is None else spool_dir(runs_root, rank, plan.pool)
    return ProcessRunner(
        plan.objective,
        timeout=plan.timeout,
        memory_limit=plan.memory_limit,
        make_context=make_context,
        spool=spool,
        worker=worker,
    )


def serve(
    plan: WorkerPlan,
    transport: Transport,
    gpu_ids: list[int],
    *,
    use_alarm: bool = True,
    interrupt: Interrupt | None = None,
    teams: TeamWorld | None = None,
    local_rank: int | None = None,
) -> int:
    """Serve tasks until the distributor says stop (or a stop signal arrives); the count served.
    ``local_rank``: the rank's among its node's (``None``: its rank, as workers that are threads of one process)."""
    interrupt = interrupt or Interrupt()
    where = transport.rank if local_rank is None else local_rank
    runner = make_runner(
        plan, transport.rank, gpu_ids, use_alarm=use_alarm, interrupt=interrupt, teams=teams, local_rank=where
    )
    return worker_loop(transport, runner, interrupted=interrupt, aborting=interrupt.aborting)


def serve_on_node(
    plan: WorkerPlan,
    transport: Transport,
    ranks_on_node: int,
    rank_on_node: int,
    interrupt: Interrupt,
    teams: TeamWorld | None = None,
) -> int:
    """A worker rank of an MPI job: bind its GPUs (``rank_on_node``: its rank among the node's, from
    MPI, not a launcher variable it may have inherited), share the node's cores, serve."""
    gpu_ids = plan.gpus.bind(rank_on_node)
    interrupt.grace = plan.pause_grace  # a stop signal pauses a running trial at its next report
    limit_threads(cores_per_worker(ranks_on_node, plan.node_cores))
    return serve(plan, transport, gpu_ids, interrupt=interrupt, teams=teams, local_rank=rank_on_node)
