"""Loading an objective module and turning what it returns into an Outcome."""

from __future__ import annotations

import contextvars
import inspect
import json
import math
import os
import socket
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Mapping, Protocol

from emews.training.checkpoints import CHECKPOINTS_DIR
from emews.core.imports import UserImportError, import_user_module
from emews.objective.model_defaults import ModelDefaultsError, read_model_defaults
from emews.core.results import Outcome, Status
from emews.core.space import plain_value, to_builtin
from emews.training.messages import CONTINUE, Decision


class ObjectiveLoadError(ImportError):
    """The objective module or function cannot be loaded."""


class EvaluationFailed(Exception):
    """An evaluation that ended badly for a reason the objective knows, said without a traceback.

    ``status`` is how it is recorded: a command that died of a signal is ``CRASHED``, one that
    exited non-zero or printed no result ``FAILED``.
    """

    def __init__(self, message: str, status: Status = Status.FAILED) -> None:
        super().__init__(message)
        self.status = status


#: what a run dir records: the parameters the objective was given (model defaults merged in)
PARAMS_RECORD = "params.json"


@dataclass
class TaskContext:
    """What an objective may want to know about the evaluation it runs.

    ``run_dir`` is created on first use, so cheap objectives that never
    touch it cost no file-system work.
    """

    task_id: int
    rank: int
    seed: int
    gpu_ids: list[int] = field(default_factory=list)
    host: str = field(default_factory=socket.gethostname)
    runs_root: Path | None = None
    pid: int | None = None  # the process that runs the objective (set when the call starts)
    # not dataclass fields (no cost per task): set when used, in the process running the objective
    link = None              # TrialLink | None: how trial messages reach the optimizer rank
    checkpoint_async = True  # write checkpoints on a background thread (False: in the report call)
    checkpoint_local_dir: str | None = None  # a node-local tier checkpoints are staged in first
    _session = None          # TrialSession | None: created by the first report or restore
    team = None              # emews.objective.team.Team | None: the members of a multi-rank task (task.ranks > 1)
    comm = None              # mpi4py communicator of the team's ranks only (inline isolation, size > 1)
    backend = "gloo"         # torch.distributed backend the site names (node.distributed_backend)
    launch_line: tuple[str, ...] = ()  # the site's launcher over the team's hosts ({ranks}: the count)
    _group = False           # whether ctx.process_group() initialised torch.distributed

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
    def checkpoints_root(self) -> Path | None:
        """``EXP/checkpoints``, beside ``EXP/runs``."""
        return None if self.runs_root is None else self.runs_root.parent / CHECKPOINTS_DIR

    @property
    def run_dir(self) -> Path:
        if self.runs_root is None:
            raise RuntimeError("this run has no experiment directory")
        path = task_run_dir(self.runs_root, self.task_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def report(self, step: int, metrics: Mapping[str, Any], checkpoint: Any = None, *,
               wait: bool = True) -> Decision:
        """Send a training step's ``metrics`` (and optionally a ``checkpoint``: any picklable
        object, or a ``pathlib.Path`` to a file written) to the optimizer rank; return its
        :class:`~emews.training.messages.Decision` (check ``.stop``). ``wait=False`` returns at once
        (with the previous report's decision): this one's comes with the next report.

        In a multi-rank task only team rank 0's report counts; every member gets its decision
        (shared over ``ctx.comm`` or the ``ctx.process_group()`` group; without either, the
        other members get "continue")."""
        if self.team_rank:
            return self._from_leader(None, CONTINUE)
        decision = self._trial().report(step, metrics, checkpoint, wait=wait)
        return decision if self.team is None else self._from_leader(decision, CONTINUE)

    def restore(self, default: Any = None) -> Any:
        """``(checkpoint, step)`` of this trial's newest durable checkpoint (after a retry, a
        resume, or of the trial it was cloned from), else ``default``. In a multi-rank task team
        rank 0 restores and the others get its answer (as for :meth:`report`)."""
        if self.team_rank:
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

    def _trial(self) -> Any:
        if self._session is None:
            from emews.training.session import TrialSession

            run_dir = None if self.runs_root is None else task_run_dir(self.runs_root, self.task_id)
            self._session = TrialSession(self.task_id, self.link, checkpoints_root=self.checkpoints_root,
                                         run_dir=run_dir, background=self.checkpoint_async,
                                         local_dir=self.checkpoint_local_dir)
        return self._session

    def end_attempt(self) -> Mapping[str, Any] | None:
        """After ``run`` returned: settle the trial's messages; parameters to run again with, if any."""
        if self._session is None:
            return None
        session, self._session = self._session, None
        return session.end()


def exit_if_forked(context: "TaskContext") -> None:
    """End a forked copy of the process that ran the objective: it returned from ``run`` in the
    copy (``os.fork()`` without exec) and must not go on to act as the worker."""
    if context.pid is not None and os.getpid() != context.pid:
        os._exit(0)


_current: contextvars.ContextVar[TaskContext | None] = contextvars.ContextVar("emews_task", default=None)


def current_task() -> TaskContext | None:
    """The context of the evaluation running now (``None`` outside one)."""
    return _current.get()


def task_run_dir(runs_root: Path, task_id: int) -> Path:
    """``runs/SHARD/ID``: a thousand tasks per shard, so a million tasks make no huge directory."""
    return runs_root / f"{task_id // 1000:03d}" / f"{task_id:06d}"


class Objective(Protocol):
    """A loaded objective as the runners use it (a module's function, or a command)."""

    defaults: dict[str, Any]

    def setup(self, context: "TaskContext | None" = None) -> None: ...

    def call(self, params: Mapping[str, Any], context: "TaskContext") -> Any: ...

    def teardown(self) -> None: ...


class ObjectiveSpec(Protocol):
    """Where an objective comes from (picklable: it travels to isolated children): ``load()`` it."""

    metric: str

    def load(self) -> Objective: ...


@dataclass(frozen=True)
class ObjectiveRef:
    """Where to find the objective: a ``.py`` path or a dotted module name."""

    module: str
    function: str = "run"
    metric: str = "value"
    defaults: str | None = None  # a CANDLE default model file merged under each point

    def load(self) -> "LoadedObjective":
        module = import_objective_module(self.module)
        fn = getattr(module, self.function, None)
        if not callable(fn):
            names = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                           and getattr(v, "__module__", None) == module.__name__)
            raise ObjectiveLoadError(
                f"{self.module} has no function {self.function!r}"
                + (f"; it defines: {', '.join(names)}" if names else ""))
        return LoadedObjective(self, module, fn, load_defaults(self.defaults))


def load_defaults(path: str | None) -> dict[str, Any]:
    """The model defaults file's parameters (``{}`` without one), as an ObjectiveLoadError when unreadable."""
    if path is None:
        return {}
    try:
        return read_model_defaults(path)
    except ModelDefaultsError as exc:
        raise ObjectiveLoadError(str(exc)) from None


def with_defaults(defaults: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` over the model's ``defaults``: what a CANDLE model runs with."""
    return {**defaults, **params}


def record_params(run_dir: Path, params: Mapping[str, Any]) -> Path:
    """Write the parameters an evaluation ran with into its run dir (``params.json``)."""
    path = run_dir / PARAMS_RECORD
    path.write_text(json.dumps({k: plain_value(v, repr) for k, v in params.items()}, indent=1) + "\n")
    return path


def import_objective_module(ref: str) -> ModuleType:
    """Import ``ref``: a path to a ``.py`` file, or a dotted module name."""
    try:
        return import_user_module(ref, what="objective")
    except UserImportError as exc:
        raise ObjectiveLoadError(str(exc)) from exc


class LoadedObjective:
    """An imported objective: ``setup``/``teardown`` hooks and the call itself."""

    def __init__(self, ref: ObjectiveRef, module: ModuleType, fn: Callable[..., Any],
                 defaults: Mapping[str, Any] | None = None) -> None:
        self.ref = ref
        self.module = module
        self.fn = fn
        self.defaults = dict(defaults or {})
        self._wants_context = _accepts_two_arguments(fn)

    def setup(self, context: TaskContext | None = None) -> None:
        hook = getattr(self.module, "setup", None)
        if callable(hook):
            hook(context) if _accepts_one_argument(hook) else hook()

    def teardown(self) -> None:
        hook = getattr(self.module, "teardown", None)
        if callable(hook):
            hook()

    def call(self, params: Mapping[str, Any], context: TaskContext) -> Any:
        """Run the objective; a PBT exploit runs it again with the explored parameters (its
        ``ctx.restore()`` then returns the cloned checkpoint)."""
        context.pid = os.getpid()
        if self.defaults:
            params = with_defaults(self.defaults, params)
            if context.runs_root is not None:
                record_params(context.run_dir, params)
        token = _current.set(context)
        try:
            returned = self.fn(dict(params), context) if self._wants_context else self.fn(dict(params))
            if context._session is None:  # no report, no restore: nothing to settle
                return returned
            while (again := context.end_attempt()) is not None:
                returned = self.fn(dict(again), context)
            return returned
        finally:
            _current.reset(token)
            if context._group:
                context.end_team()


def outcome_from_exception(task_id: int, exc: BaseException, **where: Any) -> Outcome:
    """The failed (or crashed) outcome of an objective that raised ``exc`` (call from its ``except``)."""
    if isinstance(exc, EvaluationFailed):
        return Outcome(task_id, exc.status, error=str(exc), **where)
    error = traceback.format_exc()
    if isinstance(exc, MemoryError):
        error = "MemoryError: the objective ran out of memory\n" + error
    return Outcome(task_id, Status.FAILED, error=error, **where)


def outcome_from_return(task_id: int, returned: Any, metric: str, **where: Any) -> Outcome:
    """Interpret ``run``'s return value: a number, or a dict holding ``metric``."""
    metrics: dict[str, Any] = {}
    if isinstance(returned, Mapping):
        metrics = {str(k): plain_value(v, repr) for k, v in returned.items()}
        if metric not in metrics:
            return Outcome(task_id, Status.FAILED, metrics=metrics, **where,
                           error=f"objective returned a dict without the metric {metric!r} "
                                 f"(keys: {', '.join(metrics) or 'none'})")
        value = metrics.pop(metric)
    else:
        value = returned
    value = to_builtin(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return Outcome(task_id, Status.FAILED, metrics=metrics, **where,
                       error=f"objective returned {type(value).__name__} {value!r}, not a number")
    if math.isnan(value):
        return Outcome(task_id, Status.FAILED, metrics=metrics, error="objective returned NaN", **where)
    return Outcome(task_id, Status.OK, float(value), metrics=metrics, **where)


def _positional_count(fn: Callable[..., Any]) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _accepts_two_arguments(fn: Callable[..., Any]) -> bool:
    return _positional_count(fn) >= 2


def _accepts_one_argument(fn: Callable[..., Any]) -> bool:
    return _positional_count(fn) >= 1
