"""``emews check WORKFLOW --try``: the optimizer's first point, evaluated once here, before anything is submitted.

The optimizer starts as in a run: its own ``run`` against an evaluator with the workflow's budget
(R, the GA, the model-based and the sweeps alike). Its first ``put`` hands over the point:
:class:`FirstPoint` validates it as a run would, keeps it and ends ``run`` with
:class:`PointTaken`, a :class:`~emews.core.evaluator.BudgetExhausted` (which optimizers already treat
as the end of a run, and whose ``finally`` blocks stop their helper threads and processes).

The point then runs once through the engine as a job runs it (the distributor, the worker's runner
with the task's isolation, timeout and memory limit; a command or a Python function alike), the
worker on this process's main thread (the timer of an inline objective needs it) and the optimizer
rank on another, without MPI. It runs in a scratch directory, removed after a success and kept (its
task's run dir named) after a failure that made that run dir (a command's, or a Python objective's
that used ``ctx.run_dir``); nothing is written into an experiment directory.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from emews.config.workflow import Workflow
from emews.core.errors import EXIT_FAILED, EXIT_OK, EmewsError
from emews.core.evaluator import BudgetExhausted, Evaluator
from emews.core.failure_cause import FRAME, cause, command_ending, quoted_output, visible
from emews.core.optimizer import Optimizer
from emews.core.queues import QueuePair
from emews.core.replicates import ReplicatingEvaluator, replicated_space
from emews.core.results import Result
from emews.core.space import Space
from emews.core.task_size import FixedSize
from emews.core.wording import counted
from emews.job.rank_zero import run_spec
from emews.job.stored_task import StoredTask
from emews.job.wiring import RunSpec, RunSummary, run_optimizer_rank, run_worker_rank
from emews.objective.context import task_run_dir
from emews.runtime.interrupt import Interrupt, Interrupted
from emews.runtime.transport import ThreadHub

#: the last lines of a failed command's output shown under a cause that is their heading
QUOTED_LINES = 5


class PointTaken(BudgetExhausted):
    """The try has its point: the optimizer's ``run`` ends here."""


class OptimizerCannotStart(EmewsError):
    """The optimizer raised, or proposed nothing, before its first point."""


class FirstPoint(Evaluator):
    """An evaluator whose first ``put`` validates the first point, keeps it (:attr:`point`) and
    raises :class:`PointTaken`; so does every later ``put``."""

    point: dict[str, Any] | None = None

    def put(
        self, points: Iterable[Mapping[str, Any]], *, ranks: int | Sequence[int] | None = None, priority: float = 0.0
    ) -> list[int]:
        first = list(points)[:1]
        if self.point is None and first:
            super().put(first)
            self.point = dict(self._queues.tasks[0].params)
        raise PointTaken("emews check --try evaluates one point")


def first_point(workflow: Workflow) -> tuple[Space, dict[str, Any]]:
    """The space tasks are validated against (replicates included) and the optimizer's first point."""
    replicates = workflow.model.replicates
    space = workflow.space if replicates == 1 else replicated_space(workflow.space, replicates)
    evaluator = FirstPoint(
        QueuePair(),
        space,
        workers=1,
        budget=workflow.model.budget.evaluations,
        direction=workflow.model.objective.direction,
        seed=workflow.seed,
    )
    view = evaluator if replicates == 1 else ReplicatingEvaluator(evaluator, workflow.space, replicates)
    try:
        workflow.make_optimizer().run(view)
    except BudgetExhausted:
        pass
    except Exception as exc:
        raise OptimizerCannotStart(f"the optimizer raised {type(exc).__name__}: {exc}") from exc
    if evaluator.point is None:
        raise OptimizerCannotStart("the optimizer ended without proposing a point")
    return space, evaluator.point


class OnePoint(Optimizer):
    """Evaluates ``point`` and keeps its :attr:`result`."""

    def __init__(self, point: Mapping[str, Any]) -> None:
        self.point = dict(point)
        self.result: Result | None = None

    def run(self, evaluator: Evaluator) -> None:
        self.result = evaluator.map([self.point])[0]


@dataclass
class TryOutcome:
    """What ``--try`` found: the point, and its result or why there is none."""

    point: dict[str, Any]
    result: Result | None
    metric: str
    run_dir: Path | None  # the task's run dir, kept after a failure that left one (made only when used)
    error: str | None = None  # the run itself failed (no result)
    note: str | None = None
    stopped: Interrupted | None = None  # a stop signal (Ctrl-C) ended the try

    @property
    def exit_status(self) -> int:
        if self.stopped is not None:
            return self.stopped.exit_status
        return EXIT_OK if self.result is not None and self.result.ok else EXIT_FAILED

    def lines(self) -> list[str]:
        out = [f"try: point {json.dumps(self.point, default=str)}"] + ([f"try: {self.note}"] if self.note else [])
        result = self.result
        if result is not None and result.ok:
            seconds = (result.finished or 0.0) - (result.started or 0.0)
            return out + [f"try: ok: {self.metric} {result.objective:.6g} (in {seconds:.3g} s)"]
        if self.stopped is not None:
            out.append(f"try: {self.stopped}")
        elif result is not None:
            said = cause(result.error)
            out.append(f"try: {result.status.value}: {said}")
            frame = raising_frame(str(result.error or ""))
            if frame is not None:
                out.append(f"try: raised at: {frame}")
            out.extend(_how_the_command_ended(result.error, said))
        else:
            out.append(f"try: the run failed: {self.error}")
        if self.run_dir is not None:
            out.append(f"try: run dir (kept): {self.run_dir}")
            out.extend(_output_files(self.run_dir))
        return out


def _how_the_command_ended(error: object, said: str) -> list[str]:
    """Of a failed command: its exit status or signal when the cause line does not say it (a last
    line of output that names no error), and the output its record quotes when the cause line is
    the heading over it (``...; last lines of stderr:``)."""
    ended = command_ending(error)
    lines = [] if ended is None or ended in said else [f"try: {ended}"]
    if said.endswith(("last lines of stderr:", "last lines of stdout:")):
        lines += [f"try:   {visible(line)}" for line in quoted_output(error)[-QUOTED_LINES:]]
    return lines


def _output_files(run_dir: Path) -> list[str]:
    """Where the task's stdout and stderr are (a command's, or a Python objective's captured output)."""
    lines = []
    for name in ("stdout", "stderr"):
        path = run_dir / f"{name}.txt"
        if path.is_file():
            size = path.stat().st_size
            lines.append(f"try: {name}: {path} ({'empty' if size == 0 else counted(size, 'byte')})")
    return lines


def _inside(path: Path, folders: set[Path]) -> bool:
    """Whether ``path`` (resolved: a symlinked home on a parallel file system) lies in one of ``folders``."""
    resolved = path.resolve()
    return any(resolved.is_relative_to(folder) for folder in folders)


def raising_frame(traceback_text: str) -> str | None:
    """Where a Python objective's traceback was raised, as ``PATH, line N, in NAME``: the innermost frame
    outside emews and the Python installation (the user's code), else the innermost; ``None``: no frames."""
    frames = [m for m in map(FRAME.match, traceback_text.splitlines()) if m is not None and m["name"] is not None]
    roots: list[str | Path] = [Path(__file__).parents[1], sys.prefix, sys.base_prefix, *sysconfig.get_paths().values()]
    library = {Path(root).resolve() for root in roots}
    own = [m for m in frames if not m["path"].startswith("<") and not _inside(Path(m["path"]), library)]
    chosen = (own or frames)[-1:] if frames else []
    return "".join(f"{m['path']}, line {m['line']}, in {m['name']}" for m in chosen) or None


@contextmanager
def _environment(variables: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``variables`` set (a site's ``environment.vars``, as its workers get them),
    restored afterwards."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def try_workflow(
    workflow: Workflow, environment: Mapping[str, str] | None = None, task: StoredTask | None = None
) -> TryOutcome:
    """Ask the optimizer for its first point and evaluate it once in a scratch directory;
    ``environment``: the variables the site's workers get (``environment.vars``), set for the try;
    ``task``: evaluate that stored task again instead, as it ran (its point, id and ``ctx.seed``)."""
    with _environment(environment or {}):
        return _try_workflow(workflow, task)


def _try_workflow(workflow: Workflow, task: StoredTask | None) -> TryOutcome:
    if task is None:
        space, point = first_point(workflow)
    else:
        replicates = workflow.model.replicates
        space = workflow.space if replicates == 1 else replicated_space(workflow.space, replicates)
        point = task.point
    first_id = 0 if task is None else task.id
    scratch = Path(tempfile.mkdtemp(prefix="emews-try-"))
    try:
        one = OnePoint(point)
        spec = replace(
            run_spec(workflow, scratch),
            space=space,
            make_optimizer=lambda: one,
            budget=1,
            replicates=1,
            retries=0,
            make_trial_scheduler=None,
            show_progress=False,
            fail_fast=0,
            task_size=FixedSize(1),
            first_id=first_id,
        )
        summary, stopped = _run_here(spec)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    result = one.result
    run_dir: Path | None = None
    kept = task_run_dir(scratch / "runs", first_id)  # the first task of a fresh store
    if result is not None and result.ok and stopped is None or not kept.is_dir():
        shutil.rmtree(scratch, ignore_errors=True)  # a success, or a task that wrote nothing of its own
    else:
        run_dir = kept
    notes = [f"task {task.id} again, as it ran: ctx.seed {task.seed}"] if task is not None else []
    if workflow.task_size.gang:
        notes.append("task.ranks: the try runs the point on one rank")
    note = "; ".join(notes) or None
    return TryOutcome(
        point,
        result,
        spec.objective.metric,
        run_dir,
        None if summary.error is None else str(summary.error),
        note,
        stopped,
    )


def _run_here(spec: RunSpec) -> tuple[RunSummary, Interrupted | None]:
    """One worker on this (main) thread, the optimizer rank on another; a stop signal ends both."""
    hub = ThreadHub(2)
    interrupt = Interrupt().install()
    done: list[RunSummary] = []
    optimizer_rank = threading.Thread(
        target=lambda: done.append(run_optimizer_rank(spec, hub.endpoint(0), [1], interrupt=interrupt)),
        name="emews-try-optimizer",
        daemon=True,
    )
    optimizer_rank.start()
    run_worker_rank(spec, hub.endpoint(1), [], interrupt=interrupt)
    optimizer_rank.join()
    return done[0], interrupt.error
