"""Finding optimizers (built-in short names, entry points, ``pkg.module:Class`` or ``file.py:Class``)
and the schema of their options."""

from __future__ import annotations

import functools
import inspect
import types
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, Strict, create_model

from emews.core.imports import UserImportError, import_user_module
from emews.core.optimizer import Optimizer

#: built-in optimizers by short name
BUILTIN_OPTIMIZERS = {
    "random": "emews.optimizers.random:RandomSearch",
    "sweep": "emews.optimizers.sweep:Sweep",
    "ga": "emews.optimizers.ga:GeneticAlgorithm",
    "bayes": "emews.optimizers.bayes:BayesianOptimizer",
    "mbo": "emews.optimizers.mbo:MBO",
    "hyperspace": "emews.optimizers.hyperspace:HyperSpace",
}
ENTRY_POINT_GROUP = "emews.optimizers"


class OptimizerNotFound(LookupError):
    """The optimizer reference names nothing that can be loaded."""


class SchedulerNotFound(LookupError):
    """The trial-scheduler reference names nothing that can be loaded."""


def resolve_scheduler(ref: str, base_dir: Path | None = None) -> type:
    """The trial-scheduler class ``ref`` names: a built-in name, ``package.module:Class`` or ``file.py:Class``."""
    from emews.training.schedulers import BUILTIN_SCHEDULERS, TrialScheduler

    target = BUILTIN_SCHEDULERS.get(ref, ref)
    module_ref, sep, class_name = target.rpartition(":")
    if not sep:
        raise SchedulerNotFound(f"unknown scheduler {ref!r}")
    try:
        module = import_user_module(module_ref, what="scheduler", base_dir=base_dir)
    except UserImportError as exc:
        raise SchedulerNotFound(str(exc)) from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, TrialScheduler)):
        raise SchedulerNotFound(f"{module_ref} has no TrialScheduler subclass named {class_name!r}")
    return cls


def available_optimizers() -> list[str]:
    names = set(BUILTIN_OPTIMIZERS)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def resolve_optimizer(ref: str, base_dir: Path | None = None) -> type[Optimizer]:
    """Return the optimizer class that ``ref`` names."""
    if ref in BUILTIN_OPTIMIZERS:
        target = BUILTIN_OPTIMIZERS[ref]
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == ref]
        target = found[0].value if found else ref
    if ":" not in target:
        raise OptimizerNotFound(f"unknown optimizer {ref!r}; use a built-in name "
                                f"({', '.join(available_optimizers())}), package.module:Class or file.py:Class")
    module_ref, _, class_name = target.rpartition(":")
    module = _import(module_ref, base_dir)
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Optimizer)):
        raise OptimizerNotFound(f"{module_ref} has no Optimizer subclass named {class_name!r}")
    return cls


def _import(module_ref: str, base_dir: Path | None) -> Any:
    try:
        return import_user_module(module_ref, what="optimizer", base_dir=base_dir)
    except UserImportError as exc:
        raise OptimizerNotFound(str(exc)) from exc


@functools.lru_cache(maxsize=None)
def options_model(cls: type) -> type[BaseModel]:
    """A pydantic model of ``cls``'s keyword options, built from ``__init__``'s signature and type hints.

    int, float, bool and str (alone, in unions or ``Annotated``) are strict: ``"100"`` or
    ``true`` is not an int. Other types (``Path``, lists) are lax, so a YAML
    string becomes a ``Path``. ``**kwargs`` allows unknown options. Constraints come with the
    hint: ``Annotated[int, Field(ge=1)]``.
    """
    try:
        hints = get_type_hints(cls.__init__, include_extras=True)
    except Exception:  # noqa: BLE001 - an unresolvable hint only loses checking, not loading
        hints = {}
    fields: dict[str, Any] = {}
    extra = "forbid"
    for name, param in inspect.signature(cls).parameters.items():
        if param.kind is param.VAR_KEYWORD:
            extra = "allow"
        elif param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY) and not name.startswith("_"):
            annotation = hints.get(name, Any)
            default = ... if param.default is param.empty else param.default
            fields[name] = (_strict(annotation), Field(default))
    config = ConfigDict(extra=extra, arbitrary_types_allowed=True, protected_namespaces=())
    return create_model(f"{cls.__name__}Options", __config__=config, **fields)


def validate_options(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against :func:`options_model`, as keywords for ``cls`` (raises ValidationError)."""
    model = options_model(cls).model_validate(options)
    given = {name: getattr(model, name) for name in model.model_fields_set if name in type(model).model_fields}
    return {**given, **(model.model_extra or {})}


def path_options(cls: type) -> list[str]:
    """The options of ``cls`` annotated as ``pathlib.Path`` (or ``Path | None``)."""
    return [name for name, field in options_model(cls).model_fields.items() if _mentions(field.annotation, Path)]


def _strict(annotation: Any) -> Any:
    """``annotation`` with int, float, bool and str made strict, in unions too."""
    if get_origin(annotation) in (Union, types.UnionType):
        return Union[tuple(_strict(arg) for arg in get_args(annotation))]
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        return Annotated[(_strict(base), *metadata)]
    return Annotated[annotation, Strict()] if annotation in (int, float, bool, str) else annotation


def _mentions(annotation: Any, target: type) -> bool:
    return annotation is target or any(_mentions(arg, target) for arg in get_args(annotation))
