"""Checks of a loaded workflow that need more than its schema: the parts that must agree with each
other (replicates, inline teams, the trial scheduler) and, in :func:`check_workflow`, the imports
and the optimizer built as the job would build them: fail now, not in the job.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from emews.config.candle_points import check_candle_points
from emews.config.plugin_calls import ask_optimizer, refusal
from emews.config.plugins import (
    OPTIMIZERS,
    TRIAL_SCHEDULERS,
    PluginNotFound,
    options_model,
    path_options,
    validate_options,
)
from emews.config.shadowing import shadowing_problem
from emews.config.validation import config_error
from emews.config.workflow_paths import existing_path
from emews.config.workflow_schema import ObjectiveSection, WorkflowModel
from emews.core.errors import ConfigError
from emews.core.imports import is_file_ref
from emews.core.replicates import REPLICATE
from emews.core.space import Dimension, Space
from emews.core.task_size import ALLOWED as TASK_SIZE_ALLOWED
from emews.core.task_size import FunctionSize, TaskSizeError
from emews.objective.candle_params import expression_problem
from emews.objective.command import TASK_PLACEHOLDERS
from emews.objective.function import ObjectiveFunctionError, ObjectiveLoadError

if TYPE_CHECKING:
    from emews.config.workflow import Workflow


def check_replicates(model: WorkflowModel, space: Space, file: str) -> None:
    if REPLICATE in space.dimensions:
        raise ConfigError(
            f"the parameter name {REPLICATE!r} is the replicate index when replicates > 1",
            file=file,
            key=f"space.{REPLICATE}",
            allowed="another name",
        )
    if model.budget.evaluations is not None and model.budget.evaluations < model.replicates:
        raise ConfigError(
            f"a budget of {model.budget.evaluations} evaluations cannot run one point {model.replicates} times",
            file=file,
            key="budget.evaluations",
            allowed=f"at least replicates ({model.replicates}); each point costs that many",
        )


def check_inline_teams(workflow: Workflow, file: str) -> None:
    """Inline multi-rank tasks need ``task.timeout``: a member blocked in ``ctx.comm`` cannot be
    interrupted, and only the timeout tells the job to end (``runtime.teams.TeamStranded``)."""
    task = workflow.model.task
    if task.isolation == "inline" and task.timeout is None and workflow.task_size.gang:
        raise ConfigError(
            "inline multi-rank tasks (task.ranks) need a timeout: a member blocked in ctx.comm "
            "cannot be interrupted, and the job ends when a team has not ended after it",
            file=file,
            key="task.timeout",
            allowed="a number of seconds > 0, or isolation: process",
        )


def check_trial_scheduler(workflow: Workflow, file: str) -> None:
    """The ``trial_scheduler:`` section names a scheduler whose options are valid together."""
    section = workflow.model.trial_scheduler
    if section is None:
        return
    try:
        cls = TRIAL_SCHEDULERS.resolve(section.name, workflow.source.parent)
    except PluginNotFound as exc:
        raise ConfigError(str(exc), file=file, key="trial_scheduler.name", allowed=TRIAL_SCHEDULERS.allowed()) from None
    try:
        validate_options(cls, section.options)
    except ValidationError as exc:
        raise config_error(exc, options_model(cls), file, ("trial_scheduler", "options")) from None
    if getattr(cls, "exploits", False) and workflow.model.replicates > 1:  # a TrialScheduler class
        raise ConfigError(
            f"trial_scheduler {section.name} exploits (a trial takes another point's parameters and "
            f"replicate index), so the replicates of a point would mix points",
            file=file,
            key="replicates",
            allowed="1 with this trial_scheduler, or a trial_scheduler that does not exploit (asha, hyperband, median)",
        )
    try:
        workflow.make_trial_scheduler().bind(
            metric=workflow.model.objective.metric,
            direction=workflow.model.objective.direction,
            space=workflow.space,
            seed=workflow.seed,
        ).check()
    except (TypeError, ValueError) as exc:
        doing = f"cannot build trial scheduler {section.name!r}"
        raise refusal(exc, "trial_scheduler", cls, section.options, file, doing) from None


def _point_keys(workflow: Workflow) -> frozenset[str] | None:
    """The keys of every point of an open space, when the optimizer says (``Optimizer.point_keys``)."""
    optimizer = workflow.model.optimizer
    return ask_optimizer(
        optimizer, workflow.label, workflow.source.parent, lambda cls: cls.point_keys(optimizer.options)
    )


def _check_placeholders(
    objective: ObjectiveSection, space: Space, defaults: Mapping[str, Any], file: str, keys: frozenset[str] | None
) -> None:
    """Every ``{name}`` in the command names a parameter, a model default or a task value (in an open
    space, one of the optimizer's point ``keys``; a points file's, known only per line: not checked)."""
    if objective.command is None or (space.open and keys is None):
        return
    names = sorted(keys) if space.open and keys is not None else list(space.dimensions)
    known = set(space.names) | set(names) | set(defaults) | set(TASK_PLACEHOLDERS)
    unknown = sorted(objective.ref().placeholders - known)  # type: ignore[union-attr]
    if unknown:
        raise ConfigError(
            f"{{{unknown[0]}}} names no parameter",
            file=file,
            key="objective.command",
            allowed=", ".join(f"{{{n}}}" for n in [*names, *TASK_PLACEHOLDERS]),
        )


def _check_candle_values(objective: ObjectiveSection, space: Space, defaults: Mapping[str, Any], file: str) -> None:
    """What a CANDLE model run as a command would not read as meant: with ``params: candle``, a
    value of the space that is a Python expression as text (:func:`expression_problem`); with
    ``params: flags`` and a CANDLE default model (``defaults:``), a boolean of the space or a true
    default, which flags pass as a bare ``--name`` (``false`` left out) where CANDLE's parser takes
    ``--name True`` (``str2bool``) and refuses a bare flag."""
    if objective.command is None:
        return
    listed = {name: _listed_values(dim) for name, dim in space.dimensions.items()}
    if objective.params == "candle":
        for name, values in listed.items():
            problem = next(filter(None, map(expression_problem, values)), None)
            if problem is not None:
                raise ConfigError(problem, file=file, key=f"space.{name}")
    elif (objective.params or "flags") == "flags" and objective.defaults is not None:
        used = objective.ref().placeholders  # type: ignore[union-attr]  # {name}: no flag of its own
        booleans = [name for name, values in listed.items() if any(isinstance(v, bool) for v in values)]
        booleans += [name for name, value in defaults.items() if value is True and name not in listed]
        booleans = [name for name in booleans if name not in used]
        if booleans:
            raise ConfigError(
                f"{booleans[0]} is a boolean, which params: flags passes as a bare --{booleans[0]} (false: "
                "left out), and the model reads a CANDLE default model (defaults:), whose parser takes "
                f"a boolean as --{booleans[0]} True and refuses a bare flag",
                file=file,
                key="objective.params",
                allowed="params: candle, which hands a CANDLE model its parameters as it reads its defaults",
            )


def _listed_values(dim: Dimension) -> list[Any]:
    """The values a categorical, ordered or constant dimension lists (none for a range)."""
    spec = dim.to_spec()
    return list(spec["values"]) if "values" in spec else [spec["value"]] if "value" in spec else []


def check_workflow(workflow: Workflow) -> Any:
    """Import the objective and optimizer and build the optimizer: fail now, not in the job.

    Path options are made absolute here. Returns the optimizer that was built.
    """
    file = workflow.label
    section = workflow.model.objective
    _check_shadowing(section, file)
    try:
        loaded = workflow.objective.load()
    except ObjectiveFunctionError as exc:
        raise ConfigError(str(exc), file=file, key="objective.function") from None
    except ObjectiveLoadError as exc:
        raise ConfigError(str(exc), file=file, key=_objective_key(section, str(exc))) from None
    _check_placeholders(section, workflow.space, loaded.defaults, file, _point_keys(workflow))
    _check_candle_values(section, workflow.space, loaded.defaults, file)
    if isinstance(workflow.task_size, FunctionSize):
        try:
            workflow.task_size.load()
        except TaskSizeError as exc:
            raise ConfigError(str(exc), file=file, key="task.ranks", allowed=TASK_SIZE_ALLOWED) from None
    cls = _optimizer_class(workflow, file)
    _check_options(workflow, cls, file)
    try:
        optimizer = workflow.make_optimizer()
        optimizer.check(workflow.space)
        if section.command is not None and section.params == "candle":
            check_candle_points(optimizer, file)
    except Exception as exc:  # noqa: BLE001 - the plug-in's own code: said in one line
        options, doing = workflow.model.optimizer.options, f"cannot build optimizer {workflow.model.optimizer.name!r}"
        raise refusal(exc, "optimizer", cls, options, file, doing) from None
    return optimizer


def _check_shadowing(section: ObjectiveSection, file: str) -> None:
    """No file in the launch folder or the objective's hides a module the ranks import (``random.py``)."""
    folders = [Path.cwd()]
    if section.module is not None and is_file_ref(section.module):
        folders.append(Path(section.module).parent)
    problem = shadowing_problem(folders)
    if problem is not None:
        key = "objective.module" if section.module is not None else "objective.command"
        raise ConfigError(problem, file=file, key=key)


def _objective_key(section: ObjectiveSection, message: str) -> str:
    """The key a load failure blames: the defaults file, the function, or the module or command."""
    if section.defaults is not None and message.startswith(section.defaults):
        return "objective.defaults"
    if section.command is not None:
        return "objective.command"
    return "objective.function" if "has no function" in message else "objective.module"


def _optimizer_class(workflow: Workflow, file: str) -> type:
    try:
        return workflow.optimizer_class()
    except PluginNotFound as exc:  # unknown, or its module failed to import
        raise ConfigError(str(exc), file=file, key="optimizer.name", allowed=OPTIMIZERS.allowed()) from None


def _check_options(workflow: Workflow, cls: type, file: str) -> None:
    """Validate ``optimizer.options`` against ``cls``'s signature; make its Path options absolute."""
    options = workflow.model.optimizer.options
    try:
        validate_options(cls, options)
    except ValidationError as exc:
        raise config_error(exc, options_model(cls), file, ("optimizer", "options")) from None
    for name in path_options(cls):
        if options.get(name) is None:
            continue
        found = existing_path(
            str(options[name]),
            workflow.source.parent,
            what="file",
            file=file,
            key=f"optimizer.options.{name}",
            allowed="a path relative to the current folder or the workflow's folder",
        )
        options[name] = str(found)
