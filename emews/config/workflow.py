"""Workflow files: optimizer + objective + space + budget + task options.

``emews launch NAME`` finds ``./workflows/NAME.yaml`` first, then the built-in
workflows; a path to a ``.yaml`` file works too. Relative paths inside a
workflow (objective module, space file, optimizer file) are resolved once, at
load time, so the copy written into the experiment directory is self-contained.
"""

from __future__ import annotations

import copy
import functools
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from emews.config.planned_budget import planned_evaluations
from emews.config.plugin_calls import ask_optimizer
from emews.config.plugins import OPTIMIZERS, TRIAL_SCHEDULERS, validate_options
from emews.config.space_section import build_space
from emews.config.validation import config_error
from emews.config.workflow_checks import check_inline_teams, check_replicates, check_trial_scheduler, check_workflow
from emews.config.workflow_paths import (
    find_workflow_file,
    is_workflow_path,
    resolve_class_file,
    resolve_objective,
    resolve_task_size,
)
from emews.config.workflow_schema import BUDGET_ALLOWED, OptimizerSection, WorkflowModel
from emews.config.yamlio import file_key, load_mapping, set_dotted
from emews.core.errors import ConfigError
from emews.core.space import Space
from emews.core.task_size import TaskSize, parse_task_size
from emews.objective.command import CommandRef
from emews.objective.function import ObjectiveRef


class Workflow:
    """A validated workflow with its paths resolved."""

    def __init__(self, model: WorkflowModel, source: Path, space: Space, label: str | None = None) -> None:
        self.model = model
        self.source = source  # relative paths were resolved against its folder
        self.space = space
        self.label = label or str(source)  # what error messages call it: the file, or ``emews.run``
        self.task_size: TaskSize = parse_task_size(model.task.ranks, space)

    def check_task_size(self, workers: int) -> None:
        """Raise a ConfigError when ``task.ranks`` cannot fit a job of ``workers`` worker ranks."""
        problem = self.task_size.check(workers, self.space)
        if problem is not None:
            raise ConfigError(
                problem,
                file=self.label,
                key="task.ranks",
                allowed=f"sizes from 1 to {workers} (the job's worker ranks)",
            )

    @property
    def name(self) -> str:
        return self.model.name or self.source.stem

    @property
    def seed(self) -> int:
        if self.model.seed is not None:
            return self.model.seed
        seed = self.model.optimizer.options.get("seed")
        return seed if isinstance(seed, int) else 0

    @property
    def objective(self) -> ObjectiveRef | CommandRef:
        return self.model.objective.ref()

    def warnings(self) -> list[str]:
        """What may fail at run time though it need not (said at check and launch, not refused): a
        command objective's ``#!`` interpreter missing here (a site's ``module load`` may bring it)."""
        objective = self.objective
        problem = objective.interpreter_problem() if isinstance(objective, CommandRef) else None
        if problem is None:
            return []
        return [
            f"{self.label}: objective.command: {problem} (fine if the site's environment.setup, a "
            f"module load, provides it; emews check --try runs the command here)"
        ]

    def optimizer_class(self) -> type:
        return OPTIMIZERS.resolve(self.model.optimizer.name)

    def make_optimizer(self) -> Any:
        """The optimizer, built from the options validated against its signature (Paths as ``Path``)."""
        cls = self.optimizer_class()
        return cls(**validate_options(cls, self.model.optimizer.options))

    def make_trial_scheduler(self) -> Any:
        """The trial scheduler (``None`` when the workflow has none), built from its validated options."""
        section = self.model.trial_scheduler
        if section is None:
            return None
        cls = TRIAL_SCHEDULERS.resolve(section.name, self.source.parent)
        return cls(**validate_options(cls, section.options))

    def to_dict(self) -> dict[str, Any]:
        """The resolved workflow (space inlined, paths absolute), as written to the experiment dir."""
        data = self.model.model_dump(exclude_none=True)
        data["name"] = self.name
        data["space"] = {name: dim.to_spec() for name, dim in self.space.dimensions.items()}
        return data


def _takes_open_points(optimizer: OptimizerSection, file: str, workflow_dir: Path) -> bool:
    """Whether the optimizer, with its options, runs points that need no complete space (a UPF sweep)."""
    answer = ask_optimizer(optimizer, file, workflow_dir, lambda cls: cls.takes_open_points(optimizer.options))
    return bool(answer)


#: workflow keys renamed: old -> new. The old key still loads, for one release, with a notice, in a
#: file a user wrote; in an experiment's own workflow.yaml (a record emews wrote, which outlives the
#: version that wrote it) always, silently: an entry here is never removed.
RENAMED_KEYS = {"scheduler": "trial_scheduler"}


_noticed: set[tuple[str, str]] = set()  # (file, old key): one notice per file and process


def rename_old_keys(data: dict[str, Any], file: str) -> None:
    """Rename the old keys of ``data`` (read from ``file``) in place, with a one-line notice on
    stderr naming the file and the new key (none for an experiment's record: nobody is to edit it);
    the old and the new key together are an error."""
    from emews.config.experiment import is_experiment_record

    for old, new in RENAMED_KEYS.items():
        if old not in data:
            continue
        if new in data:
            raise ConfigError(
                f"both {old!r} and {new!r}: {old!r} is the old name of {new!r}",
                file=file,
                key=old,
                allowed=f"{new} only",
            )
        data[new] = data.pop(old)
        if (file, old) not in _noticed and not is_experiment_record(Path(file)):
            _noticed.add((file, old))
            print(
                f"emews: notice: {file}: {old!r} is now {new!r} (rename it; the old key is read until the "
                "next release)",
                file=sys.stderr,
            )


def load_workflow(ref: str, overrides: Mapping[str, Any] | None = None, *, check_imports: bool = True) -> Workflow:
    """Read, validate and resolve a workflow; raise ConfigError naming file and key. ``overrides``:
    ``--set`` keys as typed (``budget.evaluations`` or ``workflow.budget.evaluations``) and values."""
    path = find_workflow_file(ref)
    label = ref if is_workflow_path(ref) else str(path)  # messages name a file as the user typed it
    data = load_mapping(Path(label))
    rename_old_keys(data, label)
    keys = {typed: file_key(typed, "workflow") for typed in overrides or {}}  # -> (prefix, key in the file)
    created = {key.split(".")[0] for _, key in keys.values()} - set(data)  # sections only --set wrote
    alone = copy.deepcopy(data)
    for typed, value in (overrides or {}).items():
        prefix, key = keys[typed]
        _refuse_a_key_of_a_space_file(data, key, prefix)
        set_dotted(data, key, value, "--set", typed=prefix)
    try:
        return workflow_from_mapping(data, path, label=label, check_imports=check_imports)
    except ConfigError as exc:
        if not overrides:
            raise
        own = functools.partial(_problems, alone, path, label, check_imports)
        raise _blamed_on_overrides(exc, {key: prefix for prefix, key in keys.values()}, created, own) from None


def _refuse_a_key_of_a_space_file(data: Mapping[str, Any], key: str, prefix: str) -> None:
    """A ``--set space.NAME...`` where the space is a file (``space: {file: ...}``, Supervisor's GA
    file): the file holds its parameters, and the key would be set beside it (pydantic's words then
    said it: 'Unable to extract tag using discriminator')."""
    space = data.get("space")
    head, _, rest = key.partition(".")
    if head == "space" and rest and rest != "file" and isinstance(space, Mapping) and "file" in space:
        raise ConfigError(
            f"the space is read from {space['file']} (space.file): change its parameters in that file, "
            "or in a copy of it, not with --set",
            file="--set",
            key=prefix + key,
            allowed="--set space.file=OTHER_FILE",
        )


def _problems(data: dict[str, Any], path: Path, label: str, check_imports: bool) -> set[tuple[str | None, str]]:
    """The (key, message) of each problem of the workflow ``data`` (none when it loads)."""
    try:
        workflow_from_mapping(data, path, label=label, check_imports=check_imports)
    except ConfigError as exc:
        return {(p.key, p.message) for p in (exc, *exc.more)}
    return set()


def _blamed_on_overrides(
    exc: ConfigError,
    overrides: Mapping[str, str],
    created: set[str],
    own: Callable[[], set[tuple[str | None, str]]],
) -> ConfigError:
    """``exc`` with each problem whose key a ``--set`` gave (or lies under one, or in a section that
    only ``--set`` wrote) blamed on ``--set``, not on the workflow file (``--set
    budget.evaluations=abc`` named the file; ``--set trial_scheduler.options.max_t=9`` on a
    workflow without a trial scheduler named its missing ``trial_scheduler.name``). A problem with
    a section a ``--set`` changed (an optimizer refusing ``--set optimizer.options.x=2`` without naming
    the option: named as that ``--set`` key) is ``--set``'s when the file alone does not have it (``own``: the file's
    problems, found only then). ``overrides``: each ``--set`` key in the file -> the prefix it was typed
    with (``workflow.``, or none): a problem blamed on ``--set`` names its key as the user typed it."""
    found: list[set[tuple[str | None, str]]] = []

    def the_files(problem: ConfigError) -> bool:
        if not found:
            found.append(own())
        return (problem.key, problem.message) in found[0]

    def blamed(problem: ConfigError) -> ConfigError:
        key = problem.key or ""
        given = [k for k in overrides if key == k or key.startswith(k + ".")]
        made = [k for k in overrides if k.split(".")[0] == key.split(".")[0] and key.split(".")[0] in created]
        changed = [k for k in overrides if k.startswith(key + ".")] if key else []
        if problem.key is None or not (given or made or (changed and not the_files(problem))):
            return ConfigError(problem.message, file=problem.file, key=problem.key, allowed=problem.allowed)
        if given or made:
            return ConfigError(
                problem.message, file="--set", key=overrides[(given or made)[0]] + key, allowed=problem.allowed
            )
        typed = overrides[changed[0]] + changed[0]  # a section's problem: the key in it the user typed
        return ConfigError(problem.message, file="--set", key=typed, allowed=problem.allowed)

    return ConfigError.together([blamed(p) for p in (exc, *exc.more)])


def workflow_from_mapping(
    data: dict[str, Any], path: Path, *, label: str | None = None, check_imports: bool = True
) -> Workflow:
    """Validate and resolve a workflow given as data (a file's, or ``emews.run``'s arguments);
    ``path``: the file it is (or stands for: relative paths are looked up in its folder and the
    current one), ``label``: what messages call it (default: the path)."""
    file = label or str(path)
    try:
        model = WorkflowModel.model_validate(data)
    except ValidationError as exc:
        problems = [config_error(exc, WorkflowModel, file)]
        if isinstance(data.get("space"), dict):  # its parameters' mistakes too, in the same message
            try:
                build_space(data["space"], file, path.parent, open_points=True)
            except ConfigError as more:
                problems.append(more)
        raise ConfigError.together(problems) from None
    if model.task.memory_limit is not None and model.task.isolation != "process":
        raise ConfigError(
            "memory_limit needs isolation: process (an inline objective shares the worker's memory)",
            file=file,
            key="task.memory_limit",
        )
    space = build_space(model.space, file, path.parent, _takes_open_points(model.optimizer, file, path.parent))
    if model.replicates > 1:
        check_replicates(model, space, file)
    resolve_objective(model.objective, path.parent, file)
    for section in (model.optimizer, model.trial_scheduler):
        if section is not None:
            resolve_class_file(section, path.parent)
    resolve_task_size(model, space, path.parent, file)
    workflow = Workflow(model, path, space, file)
    check_inline_teams(workflow, file)
    check_trial_scheduler(workflow, file)
    if check_imports:
        check_workflow(workflow)
    _resolve_budget(workflow, file)
    return workflow


def _resolve_budget(workflow: Workflow, file: str) -> None:
    """Without ``budget.evaluations`` a sweep runs its points (each ``replicates`` times); a budget
    needs one of evaluations, steps and time."""
    budget = workflow.model.budget
    if budget.evaluations is None:
        budget.evaluations = planned_evaluations(workflow)
    if budget.evaluations is None and budget.steps is None and budget.time is None:
        raise ConfigError("no budget: the run would not end", file=file, key="budget", allowed=BUDGET_ALLOWED)
