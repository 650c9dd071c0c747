"""Finding the files a workflow names: the workflow itself, its objective, defaults, scripts,
plug-in classes and task-size functions, each made absolute once, at load time, so the copy
written into the experiment directory is self-contained.

A relative path is looked up in the current folder, the workflow's folder and its parent.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Sequence
from pathlib import Path

from emews.config.workflow_schema import ObjectiveSection, OptimizerSection, TrialSchedulerSection, WorkflowModel
from emews.core.errors import ConfigError, closest, did_you_mean
from emews.core.space import Space
from emews.core.task_size import ALLOWED as TASK_SIZE_ALLOWED
from emews.core.task_size import FunctionSize, ParameterSize, TaskSizeError, parse_task_size
from emews.objective.shellscript import find_script, rewrite_words


def builtin_workflow_dir() -> Path:
    return Path(str(importlib.resources.files("emews.workflows")))


def available_workflows() -> list[str]:
    names = {p.stem for p in builtin_workflow_dir().glob("*.yaml")}
    names.update(p.stem for p in Path("workflows").glob("*.yaml"))
    return sorted(names)


def is_workflow_path(ref: str) -> bool:
    """Whether ``ref`` names a workflow by its path (else by name: ``./workflows/REF.yaml`` or a built-in)."""
    return ref.endswith((".yaml", ".yml")) or "/" in ref


def find_workflow_file(ref: str) -> Path:
    """A path, ``./workflows/REF.yaml``, or the built-in ``REF.yaml``."""
    if is_workflow_path(ref):
        path = Path(ref)
        if not path.is_file():
            raise ConfigError("workflow file does not exist" + _near_miss(ref, Path.cwd()), file=ref)
        return path.resolve()
    for folder in (Path("workflows"), builtin_workflow_dir()):
        candidate = folder / f"{ref}.yaml"
        if candidate.is_file():
            return candidate.resolve()
    typed = [f"{ref}{suffix}" for suffix in (".yaml", ".yml") if Path(f"{ref}{suffix}").is_file()]
    raise ConfigError(
        f"unknown workflow {ref!r}"
        + (f"; did you mean {typed[0]!r}?" if typed else did_you_mean(ref, available_workflows())),
        key="WORKFLOW",
        allowed=", ".join(available_workflows()) + ", or a path to a .yaml file",
    )


def resolve_path(text: str, workflow_dir: Path, builtin_dir: Path | None = None) -> Path | None:
    """Find a relative path: cwd, the workflow's folder, its parent, then a built-in folder."""
    path = Path(text)
    if path.is_absolute():
        return path if path.exists() else None
    candidates = [Path.cwd() / path, workflow_dir / path, workflow_dir.parent / path]
    if builtin_dir is not None:
        candidates.append(builtin_dir / path.name)
    return next((c.resolve() for c in candidates if c.exists()), None)


def existing_path(
    text: str,
    workflow_dir: Path,
    *,
    what: str,
    file: str,
    key: str,
    allowed: str,
    builtin_dir: Path | None = None,
    file_only: bool = False,
) -> Path:
    """:func:`resolve_path` (a file when ``file_only``), or the ConfigError that names ``key``:
    "``what`` TEXT does not exist"."""
    found = resolve_path(text, workflow_dir, builtin_dir)
    if found is None or (file_only and not found.is_file()):
        raise ConfigError(
            f"{what} {text} does not exist" + _near_miss(text, workflow_dir), file=file, key=key, allowed=allowed
        )
    return found


def _near_miss(text: str, workflow_dir: Path) -> str:
    """``"; did you mean 'objectives/model.py'?"`` when a file in the folder ``text`` names (from
    the current or the workflow's folder) has a name close to its own (``modle.py``, ``model``)."""
    path = Path(text)
    folders = [path.parent] if path.is_absolute() else [Path.cwd() / path.parent, workflow_dir / path.parent]
    names: set[str] = set()
    for folder in folders:
        try:
            names.update(entry.name for entry in folder.iterdir() if entry.is_file())
        except OSError:
            continue
    close = f"{path.name}.py" if f"{path.name}.py" in names else closest(path.name, sorted(names))  # .py left out
    return f"; did you mean {str(path.parent / close)!r}?" if close is not None else ""


def resolve_task_size(model: WorkflowModel, space: Space, workflow_dir: Path, file: str) -> None:
    """``task.ranks`` names a parameter, a function (its file made absolute) or a number."""
    try:
        size = parse_task_size(model.task.ranks, space)
    except TaskSizeError as exc:
        raise ConfigError(str(exc), file=file, key="task.ranks", allowed=TASK_SIZE_ALLOWED) from None
    problem = size.value_problem(space) if isinstance(size, ParameterSize) else None
    if problem is not None:  # no job runs it, whatever its width: said by emews check too
        raise ConfigError(problem, file=file, key="task.ranks", allowed=TASK_SIZE_ALLOWED)
    if isinstance(size, FunctionSize):
        module, _, name = size.ref.rpartition(":")
        if module.endswith(".py") or "/" in module:
            found = existing_path(
                module, workflow_dir, what="task size file", file=file, key="task.ranks", allowed=TASK_SIZE_ALLOWED
            )
            model.task.ranks = f"{found}:{name}"


def resolve_objective(objective: ObjectiveSection, workflow_dir: Path, file: str) -> None:
    if objective.defaults is not None:
        found = existing_path(
            objective.defaults,
            workflow_dir,
            what="model defaults file",
            file=file,
            key="objective.defaults",
            allowed="a CANDLE default model file ([Global_Params]) relative to the current or the workflow's folder",
            file_only=True,
        )
        objective.defaults = str(found)
    if objective.command is not None:
        command = [_resolve_argument(arg, workflow_dir) for arg in objective.command]
        _check_interpreted_script(command, file)
        script = find_script(command)
        if script is not None:  # the files a shell's command string names, as argv items
            command[script] = rewrite_words(command[script], lambda word: _resolve_argument(word, workflow_dir))
        objective.command = command
        return
    module = objective.module
    assert module is not None
    if module.endswith(".py") or "/" in module:
        builtin = Path(str(importlib.resources.files("emews.objectives")))
        found = existing_path(
            module,
            workflow_dir,
            what="objective file",
            file=file,
            key="objective.module",
            allowed="a path to a .py file (relative to the current or the workflow's folder) or an importable "
            "module name",
            builtin_dir=builtin,
        )
        objective.module = str(found)


#: programs whose first argument that is not an option is the script they run
_INTERPRETER = re.compile(r"^(?:python[0-9.]*|bash|sh|zsh|Rscript|perl|julia|ruby|node)$")


_SCRIPT_SUFFIXES = (".py", ".sh", ".R", ".r", ".jl", ".pl", ".rb", ".js")


def _check_interpreted_script(command: Sequence[str], file: str) -> None:
    """``[python3, nt4.py]`` whose script exists nowhere is refused now (every task failed with
    "can't open file" in its run dir, and only ``check --try`` said so): an interpreter's script
    argument that :func:`_resolve_argument` did not find (it stays relative) or that is missing."""
    if len(command) < 2 or not _INTERPRETER.match(Path(command[0]).name):
        return
    script = command[1]
    if script.startswith("-") or "{" in script or not script.endswith(_SCRIPT_SUFFIXES):
        return
    if not Path(script).is_absolute() or not Path(script).is_file():
        raise ConfigError(
            f"the script {script!r} that {command[0]} runs does not exist",
            file=file,
            key="objective.command",
            allowed="a script path relative to the current or the workflow's folder, or absolute",
        )


def _resolve_argument(arg: str, workflow_dir: Path) -> str:
    """A command argument naming an existing file (``model.py``, ``./model.sh``) made absolute: the
    command runs in the task's run dir. Options, placeholders and other words stay as written."""
    if arg.startswith("-") or "{" in arg or not arg:
        return arg
    found = resolve_path(arg, workflow_dir)
    return str(found) if found is not None and found.is_file() else arg


def resolve_class_file(section: OptimizerSection | TrialSchedulerSection, workflow_dir: Path) -> None:
    """A plug-in named as ``file.py:Class`` gets the file's absolute path, so that the workflow
    written into the experiment (and read there by the job and by ``emews resume``) names the same file."""
    module, sep, cls = section.name.rpartition(":")
    if sep and module.endswith(".py"):
        found = resolve_path(module, workflow_dir)
        if found is not None:
            section.name = f"{found}:{cls}"
