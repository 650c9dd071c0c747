"""Loading an objective module and turning what it returns into an Outcome (the task context
it is called with is :mod:`emews.objective.context`)."""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from emews.core.errors import EmewsError
from emews.core.imports import UserImportError, import_user_module
from emews.core.results import Outcome, Status, not_finite, utf8_text
from emews.core.space import plain_value, to_builtin
from emews.core.textfiles import write_atomic
from emews.objective.context import Running, TaskContext
from emews.objective.model_defaults import ModelDefaultsError, read_model_defaults
from emews.objective.signatures import hook_problem, positional_count, run_problem
from emews.objective.worker_context import WorkerContext


class ObjectiveLoadError(EmewsError, ImportError):
    """The objective module or function cannot be loaded."""


class ObjectiveFunctionError(ObjectiveLoadError):
    """The objective function is there but cannot be called as emews calls it (``def run():``)."""


class EvaluationFailed(EmewsError):
    """An evaluation that ended badly for a reason the objective knows, said without a traceback.

    ``status`` is how it is recorded: a command that died of a signal is ``CRASHED``, one that
    exited non-zero or printed no result ``FAILED``.
    """

    def __init__(self, message: str, status: Status = Status.FAILED) -> None:
        super().__init__(message)
        self.status = status


#: what a run dir records: the parameters the objective was given (model defaults merged in)
PARAMS_RECORD = "params.json"


class Objective(Protocol):
    """A loaded objective as the runners use it (a module's function, or a command)."""

    defaults: dict[str, Any]

    def setup(self, context: WorkerContext | None = None) -> None: ...

    def call(self, params: Mapping[str, Any], context: TaskContext) -> Any: ...

    def teardown(self) -> None: ...


class ObjectiveSpec(Protocol):
    """Where an objective comes from (picklable: it travels to isolated children): ``load()`` it."""

    @property
    def metric(self) -> str: ...

    def load(self) -> Objective: ...


@dataclass(frozen=True)
class ObjectiveRef:
    """Where to find the objective: a ``.py`` path or a dotted module name."""

    module: str
    function: str = "run"
    metric: str = "value"
    defaults: str | None = None  # a CANDLE default model file merged under each point

    def load(self) -> LoadedObjective:
        module = import_objective_module(self.module)
        fn = getattr(module, self.function, None)
        if not callable(fn):
            names = sorted(
                n
                for n, v in vars(module).items()
                if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__
            )
            raise ObjectiveLoadError(
                f"{self.module} has no function {self.function!r}"
                + (f"; it defines: {', '.join(names)}" if names else "")
            )
        problem = run_problem(fn, self.function)
        if problem is not None:
            raise ObjectiveFunctionError(f"{self.module}: {problem}")
        for hook in ("setup", "teardown"):
            found = getattr(module, hook, None)
            problem = hook_problem(found, hook) if callable(found) else None
            if problem is not None:
                raise ObjectiveLoadError(f"{self.module}: {problem}")
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
    text = json.dumps({k: plain_value(v, repr) for k, v in params.items()}, indent=1) + "\n"
    write_atomic(path, [text.encode()], durable=False)  # a multi-rank task's members each write it
    return path


def import_objective_module(ref: str) -> ModuleType:
    """Import ``ref``: a path to a ``.py`` file, or a dotted module name."""
    try:
        return import_user_module(ref, what="objective")
    except UserImportError as exc:
        raise ObjectiveLoadError(str(exc)) from exc


class LoadedObjective:
    """An imported objective: ``setup``/``teardown`` hooks and the call itself."""

    def __init__(
        self, ref: ObjectiveRef, module: ModuleType, fn: Callable[..., Any], defaults: Mapping[str, Any] | None = None
    ) -> None:
        self.ref = ref
        self.module = module
        self.fn = fn
        self.defaults = dict(defaults or {})
        self._wants_context = positional_count(fn) >= 2

    def setup(self, context: WorkerContext | None = None) -> None:
        """The module's ``setup``, once per worker: ``setup(ctx)`` with the worker's ``context`` when it
        takes an argument, else ``setup()``."""
        hook = getattr(self.module, "setup", None)
        if callable(hook):
            if positional_count(hook) >= 1:
                hook(context)
            else:
                hook()

    def teardown(self) -> None:
        hook = getattr(self.module, "teardown", None)
        if callable(hook):
            hook()

    def call(self, params: Mapping[str, Any], context: TaskContext) -> Any:
        """Run the objective; a PBT exploit runs it again with the explored parameters (its
        ``ctx.restore()`` then returns the cloned checkpoint). A ``run`` that returns nothing after
        reporting the metric returns its last report's metrics (a Ray Tune function trainable's
        result, an Optuna objective ported with a bare ``return`` once stopped)."""
        context.pid = os.getpid()
        if self.defaults:
            params = with_defaults(self.defaults, params)
            if context.runs_root is not None:
                record_params(context.run_dir, params)
        with Running(context):
            returned = self.fn(dict(params), context) if self._wants_context else self.fn(dict(params))
            while (again := context.end_attempt()) is not None:  # no report, no restore: None at once
                context.last_metrics = None
                returned = self.fn(dict(again), context)
        last = context.last_metrics
        if returned is None and last is not None and self.ref.metric in last:
            return last
        return returned


def outcome_from_exception(task_id: int, exc: BaseException, **where: Any) -> Outcome:
    """The failed (or crashed) outcome of an objective that raised ``exc`` (call from its ``except``)."""
    if isinstance(exc, EvaluationFailed):
        return Outcome(task_id, exc.status, error=str(exc), **where)
    error = traceback.format_exc()
    if isinstance(exc, MemoryError):
        error = "MemoryError: the objective ran out of memory\n" + error
    return Outcome(task_id, Status.FAILED, error=error, **where)


def outcome_from_return(task_id: int, returned: Any, metric: str, *, member: bool = False, **where: Any) -> Outcome:
    """Interpret ``run``'s return value: a number, or a dict holding ``metric``. A ``member`` of a
    multi-rank task other than team rank 0, whose value never counts, ended well whatever it
    returned (``None`` too: torchrun-style code returns or prints the metric on rank 0 only)."""
    if member:
        return Outcome(task_id, Status.OK, **where)
    metrics: dict[str, Any] = {}
    if isinstance(returned, Mapping):
        metrics = {utf8_text(str(k)): plain_value(v, repr, escape=True) for k, v in returned.items()}
        if metric not in metrics:
            return Outcome(
                task_id,
                Status.FAILED,
                metrics=metrics,
                **where,
                error=f"objective returned a dict without the metric {metric!r} (keys: {', '.join(metrics) or 'none'})",
            )
        value = metrics.pop(metric)
    else:
        value = returned
    value = to_builtin(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return Outcome(
            task_id,
            Status.FAILED,
            metrics=metrics,
            **where,
            error=f"objective returned {type(value).__name__} {value!r}, not a number",
        )
    said = not_finite(value)
    if said is not None:  # NaN, or inf (a diverged model): no optimizer can rank it as a loss
        return Outcome(task_id, Status.FAILED, metrics=metrics, error=f"objective returned {said}", **where)
    return Outcome(task_id, Status.OK, float(value), metrics=metrics, **where)
