"""Plug-ins: the class a workflow names, found one way for every kind, and the schema of its options.

Each kind a workflow names by class is a :class:`PluginKind`: :data:`OPTIMIZERS` (the
``optimizer:`` section, contract :class:`~emews.core.optimizer.Optimizer`) and
:data:`TRIAL_SCHEDULERS` (the trial-scheduler section, contract
:class:`~emews.training.schedulers.TrialScheduler`). :meth:`PluginKind.resolve` reads every
form of reference the same way:

``name``                   a built-in (``random``, ``asha``), else an entry point of the kind's group
``package.module:Class``   a class of an importable module
``path/to/file.py:Class``  a class of a file (a relative path is also tried under the workflow's folder)

and returns a concrete subclass of the kind's contract (an ABC), or raises :class:`PluginNotFound`
in one line. A package makes its classes known by name through the entry-point groups
``emews.optimizers`` and ``emews.trial_schedulers``::

    [options.entry_points]
    emews.optimizers =
        my-search = my_package.search:MySearch
    emews.trial_schedulers =
        my-rule = my_package.rules:MyRule

A class's options are its constructor's keywords: :func:`options_model` checks a workflow's
``options:`` against them before launch.
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, Strict, create_model

from emews.core.errors import EmewsError, did_you_mean
from emews.core.imports import UserImportError, import_user_module, is_file_ref
from emews.core.optimizer import Optimizer
from emews.training.schedulers import TrialScheduler

#: what a reference may be besides a name, for messages
CLASS_FORMS = "package.module:Class or file.py:Class"


class PluginNotFound(EmewsError, LookupError):
    """A reference that names no class of its kind that can be loaded (the message says why)."""


@dataclass(frozen=True, eq=False)
class PluginKind:
    """One kind of plug-in: its name in messages, its contract, its built-ins and its entry-point group
    (each kind is one object, compared and hashed as such)."""

    what: str  # "optimizer", "trial scheduler"
    contract: type  # the ABC every class of the kind derives from
    group: str  # the entry-point group that names classes of installed packages
    builtins: Mapping[str, str]  # short name -> ``package.module:Class``
    #: names people bring from other tools -> what to write instead (said when such a name is unknown)
    elsewhere: Mapping[str, str] = field(default_factory=dict)

    def entry_points(self) -> dict[str, list[EntryPoint]]:
        """The group's entry points by name (several when installed packages disagree)."""
        found: dict[str, list[EntryPoint]] = {}
        for point in entry_points(group=self.group):
            found.setdefault(point.name, []).append(point)
        return found

    def names(self) -> list[str]:
        """Every short name: the built-ins and the entry points."""
        return sorted({*self.builtins, *self.entry_points()})

    def allowed(self) -> str:
        """What a reference may be, for messages."""
        return f"{', '.join(self.names())}, {CLASS_FORMS}"

    def resolve(self, ref: str, base_dir: Path | None = None) -> type:
        """The class ``ref`` names (``base_dir``: where a relative ``file.py`` is also looked for)."""
        target = self._target(ref)
        module_ref, _, attribute = target.rpartition(":")
        if not module_ref or not attribute:
            raise PluginNotFound(f"{self.what} {ref!r}: expected a name, {CLASS_FORMS}")
        try:
            module = import_user_module(module_ref, what=self.what, base_dir=base_dir)
        except UserImportError as exc:
            raise PluginNotFound(str(exc)) from exc
        except Exception as exc:  # a package module that raised while importing (a file's is a UserImportError)
            raise PluginNotFound(f"cannot load {self.what} {ref!r}: {type(exc).__name__}: {exc}") from exc
        found: Any = module
        for part in attribute.split("."):
            found = getattr(found, part, None)
        name = self.contract.__name__
        if not (isinstance(found, type) and issubclass(found, self.contract)):
            raise PluginNotFound(f"{module_ref} has no {name} subclass named {attribute!r}")
        if inspect.isabstract(found):
            missing = ", ".join(sorted(getattr(found, "__abstractmethods__", ())))
            raise PluginNotFound(f"{module_ref}:{attribute} does not implement {missing} of {name}")
        return found

    def resolve_or_none(self, ref: str, base_dir: Path | None = None) -> type | None:
        """The class ``ref`` names, or ``None`` when it cannot be loaded (``check_workflow`` says why):
        for asking the class before that check. Its own errors are not this method's to swallow."""
        try:
            return self.resolve(ref, base_dir)
        except PluginNotFound:
            return None

    def _target(self, ref: str) -> str:
        """``ref`` as ``module:Class``: a built-in's or an entry point's, else ``ref`` itself."""
        if ref in self.builtins:
            return self.builtins[ref]
        if ":" in ref or is_file_ref(ref):
            return ref
        points = self.entry_points().get(ref, [])
        if not points:
            raise PluginNotFound(f"unknown {self.what} {ref!r}" + self._suggestion(ref))
        targets = sorted({f"{point.module}:{point.attr}" for point in points})
        if len(targets) > 1:
            raise PluginNotFound(
                f"{self.what} {ref!r} is named by several installed packages "
                f"({', '.join(targets)}): name one as package.module:Class"
            )
        return targets[0]

    def _suggestion(self, ref: str) -> str:
        """``; did you mean 'bayes'?`` (difflib over the names), or what a name from another tool is here."""
        hint = self.elsewhere.get(ref.lower().replace("-", "").replace("_", ""))
        return f"; {hint}" if hint else did_you_mean(ref, self.names())


#: built-in optimizers by short name
BUILTIN_OPTIMIZERS = {
    "random": "emews.optimizers.random:RandomSearch",
    "sweep": "emews.optimizers.sweep:Sweep",
    "ga": "emews.optimizers.ga:GeneticAlgorithm",
    "bayes": "emews.optimizers.bayes:BayesianOptimizer",
    "mbo": "emews.optimizers.mbo:MBO",
    "hyperspace": "emews.optimizers.hyperspace:HyperSpace",
    "bohb": "emews.optimizers.bohb:BOHB",
    "eqpy": "emews.optimizers.eqpy:EQPy",
    "eqsql": "emews.optimizers.eqsql:EQSQL",
}
#: built-in trial schedulers by short name
BUILTIN_TRIAL_SCHEDULERS = {
    "asha": "emews.training.schedulers.asha:ASHA",
    "hyperband": "emews.training.schedulers.hyperband:Hyperband",
    "median": "emews.training.schedulers.median:MedianStopping",
    "pbt": "emews.training.schedulers.pbt:PBT",
}

_OPTUNA = "emews.contrib.optuna:OptunaSampler with options: {{sampler: {}}} (pip install 'emews-mpi[optuna]')"
_TRIAL_SCHEDULER = "{} is a trial scheduler: trial_scheduler: {{name: {}}}"
OPTIMIZERS = PluginKind(
    "optimizer",
    Optimizer,
    "emews.optimizers",
    BUILTIN_OPTIMIZERS,
    elsewhere={
        "tpe": "TPE is Optuna's: " + _OPTUNA.format("TPESampler"),
        "cmaes": "CMA-ES is Optuna's: " + _OPTUNA.format("CmaEsSampler") + ", or Nevergrad's "
        "(emews.contrib.nevergrad:NevergradOptimizer)",
        "grid": "a grid is the sweep optimizer: sweep",
        "gridsearch": "a grid is the sweep optimizer: sweep",
        "randomsearch": "did you mean 'random'?",
        "bayesian": "did you mean 'bayes'?",
        "gp": "did you mean 'bayes'?",
        "genetic": "did you mean 'ga'?",
        "deap": "did you mean 'ga'?",
        **{name: _TRIAL_SCHEDULER.format(name, name) for name in BUILTIN_TRIAL_SCHEDULERS},
    },
)
TRIAL_SCHEDULERS = PluginKind(
    "trial scheduler",
    TrialScheduler,
    "emews.trial_schedulers",
    BUILTIN_TRIAL_SCHEDULERS,
    elsewhere={
        "successivehalving": "did you mean 'asha'?",
        "sha": "did you mean 'asha'?",
        "medianstopping": "did you mean 'median'?",
        **{name: f"{name} is an optimizer: optimizer: {{name: {name}}}" for name in BUILTIN_OPTIMIZERS},
    },
)
#: every pluggable kind
KINDS = (OPTIMIZERS, TRIAL_SCHEDULERS)


@functools.cache
def options_model(cls: type) -> type[BaseModel]:
    """A pydantic model of ``cls``'s keyword options, built from ``__init__``'s signature and type hints.

    int, float, bool and str (alone, in unions or ``Annotated``) are strict: ``"100"`` or
    ``true`` is not an int. Other types (``Path``, lists) are lax, so a YAML
    string becomes a ``Path``. ``**kwargs`` allows unknown options. Constraints come with the
    hint: ``Annotated[int, Field(ge=1)]``.
    """
    try:
        hints = get_type_hints(cls.__init__, include_extras=True)  # type: ignore[misc]
    except Exception:  # noqa: BLE001 - an unresolvable hint only loses checking, not loading
        hints = {}
    fields: dict[str, Any] = {}
    extra: Literal["allow", "forbid"] = "forbid"
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
        return Union[tuple(_strict(arg) for arg in get_args(annotation))]  # noqa: UP007 - built from a tuple
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        return Annotated[tuple([_strict(base), *metadata])]
    return Annotated[annotation, Strict()] if annotation in (int, float, bool, str) else annotation


def _mentions(annotation: Any, target: type) -> bool:
    return annotation is target or any(_mentions(arg, target) for arg in get_args(annotation))
