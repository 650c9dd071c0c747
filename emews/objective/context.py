"""The task context: what an objective may know about the evaluation it runs (``ctx``).

A worker makes one :class:`TaskContext` per task with everything it holds; the runner that runs
the objective hands in the two channels it owns (the trial link to the optimizer rank, and a
multi-rank task's communicator). Nothing is set on the context afterwards but its own state
(the process running the objective, the trial session, the process group).
"""

from __future__ import annotations

import contextvars
import os
import socket
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emews.core.followed_dir import FollowedDir
from emews.objective.run_dir_links import repoint_links
from emews.training.checkpoints import CHECKPOINTS_DIR
from emews.training.messages import CONTINUE, FOLLOWING, Action, Decision

if TYPE_CHECKING:
    from emews.objective.team import Team
    from emews.training.messages import TrialLink
    from emews.training.session import TrialSession


def task_run_dir(runs_root: Path, task_id: int) -> Path:
    """``runs/SHARD/ID``: a thousand tasks per shard, so a million tasks make no huge directory."""
    return runs_root / f"{task_id // 1000:03d}" / f"{task_id:06d}"


@dataclass
class TaskContext:
    """What an objective may want to know about the evaluation it runs.

    ``run_dir`` is created on first use, so cheap objectives that never touch it cost no
    file-system work. The keyword fields are the worker's (``team`` to ``checkpoint_local_dir``)
    and the runner's (``link``, ``comm``); their defaults are those of a single-rank task run
    without an optimizer rank to report to.
    """

    task_id: int
    rank: int
    seed: int
    gpu_ids: list[int] = field(default_factory=list)
    host: str = field(default_factory=socket.gethostname)
    runs_root: Path | None = None
    pid: int | None = None  # the process that runs the objective (set when the call starts)
    _: KW_ONLY
    #: the members of a multi-rank task (``task.ranks`` > 1); ``None`` for a single-rank task
    team: Team | None = None
    #: the task's run: how often it was started before (``Task.attempt``; its checkpoints' names)
    attempt: int = 0
    #: the torch.distributed backend the site names (``node.distributed_backend``)
    backend: str = "gloo"
    #: the site's launcher over the team's hosts (``{ranks}``: the count), for :meth:`launch`
    launch_line: tuple[str, ...] = ()
    #: write checkpoints on a background thread (``False``: in the report call)
    checkpoint_async: bool = True
    #: a node-local tier checkpoints are staged in first
    checkpoint_local_dir: str | None = None
    #: the experiment directory (``runs_root``'s parent) held open by the worker: the task's run dir
    #: and checkpoints are where it is now (``mv EXP EXP2`` while the task runs); ``None``: not followed
    experiment: FollowedDir | None = field(default=None, compare=False, repr=False)
    #: how trial messages reach the optimizer rank (the runner's; ``None``: no optimizer rank)
    link: TrialLink | None = field(default=None, compare=False, repr=False)
    #: mpi4py communicator of the team's ranks only (inline isolation under MPI; the runner's)
    comm: Any = field(default=None, compare=False, repr=False)
    _session: TrialSession | None = field(default=None, init=False, compare=False, repr=False)
    _group: bool = field(default=False, init=False, compare=False, repr=False)
    #: a member's (team rank > 0) parameters to run again with: the leader's PBT exploit it shared
    _member_restart: Mapping[str, Any] | None = field(default=None, init=False, compare=False, repr=False)
    #: the leader of a team returned an exploit from a report: its members run again with it
    _exploit_shared: bool = field(default=False, init=False, compare=False, repr=False)
    #: the metrics of this attempt's last report (team rank 0's): the result of a ``run`` that returns nothing
    last_metrics: dict[str, Any] | None = field(default=None, init=False, compare=False, repr=False)
    #: links in the run dir that a copied or moved experiment left were re-pointed (:attr:`run_dir`)
    _run_dir_ready: bool = field(default=False, init=False, compare=False, repr=False)

    @property
    def team_rank(self) -> int:
        """This member's rank in its task's team (0 for a single-rank task)."""
        return 0 if self.team is None else self.team.rank

    @property
    def team_size(self) -> int:
        """Ranks the task runs on (``task.ranks``)."""
        return 1 if self.team is None else self.team.size

    def process_group(self, backend: str | None = None, timeout: float | None = None) -> Any:
        """Initialise ``torch.distributed`` over the task's team (MASTER_ADDR/PORT, RANK, WORLD_SIZE
        and LOCAL_RANK are set) and return its default group; a single-rank task gets a group of one.
        ``backend`` overrides the site's (gloo here; NCCL/RCCL/XCCL on GPU sites). Ended with the task."""
        from emews.objective.team import init_process_group, solo_team

        if self._group:  # a PBT clone runs the objective again within the task: its group stands
            import torch.distributed as dist

            return dist.group.WORLD
        team = self.team if self.team is not None else solo_team(self.task_id)
        group = init_process_group(team, backend or self.backend, timeout)
        self._group = True
        return group

    def launch(self, argv: list[str], *, ranks: int | None = None, **run: Any) -> Any:
        """Run the MPI program ``argv`` on ``ranks`` ranks (default: the team's size) over the team's
        hosts with the site's launcher (srun, mpiexec, jsrun, aprun) and an environment without the
        job's own process-manager variables; return its ``subprocess.CompletedProcess`` (``run``:
        more ``subprocess.run`` arguments, e.g. ``capture_output=True``, ``timeout``). Team rank 0
        launches; the other members get ``None`` at once, and their ranks stay the team's until the
        task ends."""
        import subprocess

        from emews.objective.team import RANKS
        from emews.processes.environ import scrubbed_environ

        if self.team_rank:
            return None
        count = self.team_size if ranks is None else ranks
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"ctx.launch needs a positive number of ranks, got {count!r}")
        env = scrubbed_environ(os.environ)
        env.update(run.pop("env", None) or {})
        line = [part.replace(RANKS, str(count)) for part in self.launch_line]
        return subprocess.run([*line, *argv], env=env, **run)

    def end_team(self) -> None:
        """After the task: destroy the process group ``process_group`` made."""
        self._group = False
        from emews.objective.team import destroy_process_group

        destroy_process_group()

    @property
    def runs_now(self) -> Path | None:
        """``EXP/runs`` where the experiment is now: ``runs_root``, followed if it was moved since."""
        if self.runs_root is None or self.experiment is None:
            return self.runs_root
        return self.experiment.current() / self.runs_root.name

    @property
    def checkpoints_root(self) -> Path | None:
        """``EXP/checkpoints``, beside ``EXP/runs`` (where the experiment is now)."""
        runs = self.runs_now
        return None if runs is None else runs.parent / CHECKPOINTS_DIR

    @property
    def run_dir(self) -> Path:
        """The task's ``runs/SHARD/ID`` where the experiment is now, made on first use (never the
        experiment directory itself: one moved away is not made again under its old name)."""
        runs = self.runs_now
        if runs is None:
            raise RuntimeError("this run has no experiment directory")
        path = task_run_dir(runs, self.task_id)
        runs.mkdir(exist_ok=True)
        path.mkdir(parents=True, exist_ok=True)
        if not self._run_dir_ready:
            if self.team_rank == 0:  # a model's absolute links into the experiment this one was copied from
                repoint_links(path)
            self._run_dir_ready = True
        return path

    def report(self, step: int, metrics: Mapping[str, Any], checkpoint: Any = None, *, wait: bool = True) -> Decision:
        """Send a training step's ``metrics`` (and optionally a ``checkpoint``: any picklable
        object, or a ``pathlib.Path`` to a file written) to the optimizer rank; return its
        :class:`~emews.training.messages.Decision` (check ``.stop``). ``wait=False`` returns at once
        (with the previous report's decision): this one's comes with the next report.

        In a multi-rank task only team rank 0's report counts; every member gets its decision
        (shared over ``ctx.comm`` or the ``ctx.process_group()`` group; without either, the
        other members get "continue")."""
        if self.team_rank:
            if self.link is not None:
                self.link.post(FOLLOWING)  # a stop signal now waits for the leader's decision here
            decision = self._from_leader(None, CONTINUE)
            if decision.action is Action.EXPLOIT:  # the whole team runs again from the clone
                self._member_restart = decision.params
            return decision
        decision = self._trial().report(step, metrics, checkpoint, wait=wait)
        self.last_metrics = dict(metrics)
        if self.team is None:
            return decision
        self._exploit_shared = self._exploit_shared or decision.action is Action.EXPLOIT
        return self._from_leader(decision, CONTINUE)

    def restore(self, default: Any = None) -> Any:
        """``(checkpoint, step)`` of this trial's newest durable checkpoint (after a retry, a
        resume, or of the trial it was cloned from), else ``default``. In a multi-rank task team
        rank 0 restores and the others get its answer (as for :meth:`report`): in process isolation a
        member needs ``ctx.process_group()`` first, else it raises (it would train from ``default``)."""
        if self.team_rank:
            if self.comm is None and not self._group:
                raise RuntimeError(
                    f"ctx.restore on team rank {self.team_rank} of {self.team_size}: a member gets team rank 0's"
                    " checkpoint over the team's process group; call ctx.process_group() before ctx.restore"
                )
            return self._from_leader(None, default)
        restored = self._trial().restore(default)
        return restored if self.team is None else self._from_leader(restored, default)

    def _from_leader(self, value: Any, fallback: Any) -> Any:
        """Team rank 0's ``value`` on every member (``fallback`` where no channel joins them)."""
        if self.comm is not None:
            return self.comm.bcast(value, root=0)
        if self._group:
            import torch.distributed as dist

            box = [value]
            dist.broadcast_object_list(box, src=0)
            return box[0]
        return fallback if self.team_rank else value

    def _trial(self) -> TrialSession:
        if self._session is None:
            from emews.training.session import TrialSession

            runs = self.runs_now
            experiment = self.experiment
            if experiment is None and runs is not None:
                experiment = FollowedDir(runs.parent)
            self._session = TrialSession(
                self.task_id,
                self.link,
                experiment=experiment,
                run_dir=None if runs is None else lambda: self.run_dir,
                background=self.checkpoint_async,
                local_dir=self.checkpoint_local_dir,
                attempt=self.attempt,
            )
        return self._session

    def end_attempt(self) -> Mapping[str, Any] | None:
        """After ``run`` returned: settle the trial's messages; parameters to run again with, if any
        (a member gets the exploit its leader shared at a report)."""
        if self.team_rank:
            restart, self._member_restart = self._member_restart, None
            return restart
        if self._session is None:
            return None
        session, self._session = self._session, None
        restart = session.end()
        shared, self._exploit_shared = self._exploit_shared, False
        if self.team is not None and not shared:
            return None  # an exploit that came after run returned (wait=False): the members have returned
        return restart


_current: contextvars.ContextVar[TaskContext | None] = contextvars.ContextVar("emews_task", default=None)


def current_task() -> TaskContext | None:
    """The context of the evaluation running now (``None`` outside one)."""
    return _current.get()


class Running:
    """``with Running(context):`` while the objective runs, :func:`current_task` answers
    ``context``; after, the process group ``ctx.process_group()`` made is destroyed. (A class,
    not a generator: it is on every task's path.)"""

    __slots__ = ("_context", "_token")

    def __init__(self, context: TaskContext) -> None:
        self._context = context

    def __enter__(self) -> TaskContext:
        self._token = _current.set(self._context)
        return self._context

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._token)
        if self._context._group:
            self._context.end_team()


def exit_if_forked(context: TaskContext) -> None:
    """End a forked copy of the process that ran the objective: it returned from ``run`` in the
    copy (``os.fork()`` without exec) and must not go on to act as the worker."""
    if context.pid is not None and os.getpid() != context.pid:
        os._exit(0)
