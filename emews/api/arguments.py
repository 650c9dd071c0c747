"""``emews.run``'s arguments as a workflow: the same mapping a workflow file holds.

The mapping is validated by :func:`emews.config.workflow.workflow_from_mapping`, as a file is (the
same ConfigErrors, with ``emews.run`` where a file name would be), and the experiment directory
gets the resolved ``workflow.yaml`` that ``emews resume`` reads.

A Python function objective becomes a ``module``/``function`` pair the worker processes import:

- a function of a package module (``mypackage.models:train``): by its dotted name, as pickle
  refers to a function; the package must be importable where the job runs (installed, or on
  ``PYTHONPATH``);
- a function of a plain module file, the script being run included (``__main__``): by its file's
  path. The workers import the file again, so a script calls ``emews.run`` under
  ``if __name__ == "__main__":`` (as ``multiprocessing`` asks);
- a function defined in a notebook cell or an interactive session, a lambda or a nested function:
  no file can be imported, and the ConfigError says what to do (write it to a file, e.g. with
  ``%%writefile model.py``, and pass ``objective="model.py:run"``).

A string names the objective as the workflow's ``module`` does (``"model.py:run"``,
``"model.py"`` for its ``run``, ``"package.module:function"``); a list is a command objective
(``["python3", "train.py"]``); a mapping is the workflow's ``objective`` section itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from emews.core.errors import ConfigError
from emews.core.space import DimensionType

#: what messages call a workflow given as arguments (where a file name would be)
LABEL = "emews.run"
#: what ``objective=`` may be
OBJECTIVE_FORMS = (
    "a function of a module or script file, 'model.py:function', 'model.py' (its run), "
    "'package.module:function', a command list ['python3', 'train.py'], or an objective mapping"
)


def workflow_data(
    objective: Any,
    space: Any,
    optimizer: Any,
    budget: Any,
    trial_scheduler: Any,
    metric: str | None,
    direction: str | None,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """The workflow mapping of ``emews.run``'s arguments (``options``: the workflow's other keys)."""
    section = objective_section(objective)
    if metric is not None:
        section["metric"] = metric
    if direction is not None:
        section["direction"] = direction
    data: dict[str, Any] = {"name": _default_name(objective, section), **options}
    data["optimizer"] = {"name": optimizer} if isinstance(optimizer, str) else _mapping(optimizer)
    data["objective"] = section
    data["space"] = space_section(space)
    if budget is not None:
        data["budget"] = _budget(budget)
    if trial_scheduler is not None:
        data["trial_scheduler"] = (
            {"name": trial_scheduler} if isinstance(trial_scheduler, str) else _mapping(trial_scheduler)
        )
    return data


def objective_section(objective: Any) -> dict[str, Any]:
    """The workflow's ``objective`` section for ``objective=`` (see the module's docstring)."""
    if isinstance(objective, Mapping):
        return dict(objective)
    if isinstance(objective, (list, tuple)):
        return {"command": [str(arg) for arg in objective]}
    if isinstance(objective, (str, Path)):
        module, sep, function = str(objective).rpartition(":")
        if not sep:  # a file or module alone: its function run
            return {"module": str(objective)}
        return {"module": module, "function": function}
    if callable(objective):
        return _function_section(objective)
    raise ConfigError(
        f"cannot run {type(objective).__name__} {objective!r}", file=LABEL, key="objective", allowed=OBJECTIVE_FORMS
    )


def _function_section(fn: Callable[..., Any]) -> dict[str, Any]:
    """``module`` and ``function`` that import ``fn`` in another process (or a ConfigError saying why not)."""
    name = getattr(fn, "__name__", repr(fn))
    qualname = getattr(fn, "__qualname__", name)
    module_name = getattr(fn, "__module__", None)
    module = sys.modules.get(module_name or "")
    if name == "<lambda>" or qualname != name:
        raise ConfigError(
            f"{qualname} is not a module-level function, which the worker processes could import",
            file=LABEL,
            key="objective",
            allowed="a function defined with def at the top of a module or script file",
        )
    source = getattr(module, "__file__", None)
    if module is None or source is None or not Path(source).is_file():  # a cell, <stdin>, a REPL
        raise ConfigError(
            f"the function {name} is defined in a notebook or an interactive session, which the "
            "worker processes cannot import; write it to a file (in a notebook: a cell starting "
            f"with %%writefile model.py) and pass objective='model.py:{name}'",
            file=LABEL,
            key="objective",
            allowed=OBJECTIVE_FORMS,
        )
    packaged = "." in (module_name or "") or any(
        part in ("site-packages", "dist-packages") for part in Path(source).parts
    )
    if packaged and module_name != "__main__":
        return {"module": module_name, "function": name}  # by reference, as pickle does
    return {"module": str(Path(source).resolve()), "function": name}


def space_section(space: Any) -> dict[str, Any]:
    """The workflow's ``space``: a mapping of specs or dimensions (``emews.Float(0, 1)``), or a
    CANDLE GA parameter file's path; none for a sweep over a points file."""
    if space is None:
        return {}
    if isinstance(space, (str, Path)):
        return {"file": str(space)}
    if not isinstance(space, Mapping):
        raise ConfigError(
            f"expected a mapping of parameters, not {type(space).__name__}",
            file=LABEL,
            key="space",
            allowed="{name: {type: float, lower: 0, upper: 1}} or {name: emews.Float(0, 1)}, "
            "or a CANDLE GA parameter file",
        )
    return {str(name): spec.to_spec() if isinstance(spec, DimensionType) else spec for name, spec in space.items()}


def _budget(budget: Any) -> Any:
    """``50`` evaluations, ``"2h"`` of time, or the workflow's ``budget`` mapping."""
    if isinstance(budget, int) and not isinstance(budget, bool):
        return {"evaluations": budget}
    if isinstance(budget, str):
        return {"time": budget}
    return _mapping(budget)


def _mapping(value: Any) -> Any:
    """A mapping argument as a dict (anything else is left for validation to refuse, naming its key)."""
    return dict(value) if isinstance(value, Mapping) else value


def _default_name(objective: Any, section: Mapping[str, Any]) -> str:
    """The experiment's name when none is given: the function's (a function, ``"model.py:train"``), else
    the objective file's stem or the module's last part (``"model.py"``, whose function is ``run``)."""
    if callable(objective) and not isinstance(objective, type) and hasattr(objective, "__name__"):
        return str(objective.__name__)
    function = section.get("function")
    if isinstance(function, str) and function:
        return function
    module = section.get("module")
    if isinstance(module, str):
        name = Path(module).name
        return (name.removesuffix(".py") if name.endswith(".py") else name.rpartition(".")[2]) or "experiment"
    return "experiment"
