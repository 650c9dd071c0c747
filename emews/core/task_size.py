"""How many worker ranks one task runs on (``task.ranks`` in the workflow).

Four kinds, one small class each; every one is called with a point and returns its size:

* ``task.ranks: 4``           :class:`FixedSize`: every task runs on 4 ranks (default 1);
* ``task.ranks: model_size``  :class:`ParameterSize`: the value of that parameter of the point;
* ``task.ranks: pkg.mod:fn``  :class:`FunctionSize`: ``fn(point)`` (``file.py:fn`` works too);
* ``task.ranks: optimizer``   :class:`OptimizerSize`: 1 unless the optimizer gives sizes with
  ``evaluator.put(points, ranks=...)`` (which every kind but ``FixedSize(1)`` accepts).

A size that is not a whole number raises :class:`TaskSizeError`; whether it fits the job (at least
1, at most the job's worker ranks) is checked where the worker count is known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from emews.core.errors import EmewsError
from emews.core.imports import UserImportError, import_user_module, is_file_ref
from emews.core.space import Categorical, Constant, Int, Space, to_builtin
from emews.core.wording import counted

#: ``task.ranks`` value meaning "the optimizer says, per point"
OPTIMIZER = "optimizer"


class TaskSizeError(EmewsError, ValueError):
    """A task size that is not a whole number of ranks, or a size function that failed."""


def whole_ranks(value: Any, source: str) -> int:
    """``value`` as a number of ranks (``2`` and ``2.0`` yes; ``2.5``, ``"2"`` and ``True`` no)."""
    value = to_builtin(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TaskSizeError(f"{source} gave {value!r}, not a whole number of ranks")
    return value


class TaskSize:
    """The size of each task: ``size(point) -> ranks``."""

    #: whether tasks may be larger than one rank (False: the single-rank fast path)
    gang = True

    def __call__(self, params: Mapping[str, Any]) -> int:
        raise NotImplementedError

    def check(self, workers: int, space: Space | None = None) -> str | None:
        """Why this size cannot fit a job of ``workers`` worker ranks (``None``: it may)."""
        return None

    def on_resume(self, params: Mapping[str, Any], stored: int) -> int:
        """The size of a task run again on resume; ``stored`` is the size it had (the workflow's
        ``task.ranks`` decides again: it may have been changed with ``--set``)."""
        return self(params)


@dataclass(frozen=True)
class FixedSize(TaskSize):
    ranks: int = 1

    @property
    def gang(self) -> bool:  # type: ignore[override]
        return self.ranks != 1

    def __call__(self, params: Mapping[str, Any]) -> int:
        return self.ranks

    def check(self, workers: int, space: Space | None = None) -> str | None:
        return None if 1 <= self.ranks <= workers else _too_large(self.ranks, workers)


@dataclass(frozen=True)
class OptimizerSize(TaskSize):
    """1 unless the optimizer gives each point's size (``evaluator.put(points, ranks=...)``)."""

    def __call__(self, params: Mapping[str, Any]) -> int:
        return 1

    def on_resume(self, params: Mapping[str, Any], stored: int) -> int:
        """The size the optimizer gave it (kept in the store)."""
        return stored


@dataclass(frozen=True)
class ParameterSize(TaskSize):
    """The value of parameter ``name`` of the point."""

    name: str

    def __call__(self, params: Mapping[str, Any]) -> int:
        if self.name not in params:
            raise TaskSizeError(
                f"task.ranks names parameter {self.name!r}, which the point {dict(params)!r} does not have"
            )
        return whole_ranks(params[self.name], f"parameter {self.name!r}")

    def check(self, workers: int, space: Space | None = None) -> str | None:
        """The sizes the parameter's dimension can take must lie in 1..workers."""
        sizes = self._sizes(space)
        if isinstance(sizes, str) or sizes is None:
            return sizes
        bad = [s for s in sizes if not 1 <= s <= workers]
        return _too_large(bad[0], workers) if bad else None

    def value_problem(self, space: Space | None) -> str | None:
        """What makes the parameter no size on any job (``'adam'``, ``0``), before a job's width is known."""
        sizes = self._sizes(space)
        if isinstance(sizes, str):
            return sizes + (
                " (task.ranks: optimizer names the space's parameter of that name here)"
                if self.name == OPTIMIZER
                else ""
            )
        small = [s for s in sizes or [] if s < 1]
        return f"parameter {self.name!r} gives {small[0]} ranks: a task needs at least 1" if small else None

    def _sizes(self, space: Space | None) -> list[int] | str | None:
        """The sizes the dimension can take (its bounds for an int), a message when they are no sizes,
        ``None`` when the space does not list it."""
        dim = None if space is None else space.dimensions.get(self.name)
        if isinstance(dim, Int):
            values: tuple[Any, ...] = (dim.lower, dim.upper)
        elif isinstance(dim, Constant):
            values = (dim.value,)
        elif isinstance(dim, Categorical):  # ordered too
            values = tuple(dim.values)
        else:
            return (
                None
                if dim is None
                else f"parameter {self.name!r} is not an int, constant, "
                "categorical or ordered parameter of whole numbers"
            )
        try:
            return [whole_ranks(v, f"parameter {self.name!r}") for v in values]
        except TaskSizeError as exc:
            return str(exc)


@dataclass(frozen=True)
class FunctionSize(TaskSize):
    """``function(point)``: ``ref`` is ``package.module:function`` or ``file.py:function``."""

    ref: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "_fn", None)

    def load(self) -> Callable[[Mapping[str, Any]], Any]:
        """Import the function (raises :class:`TaskSizeError` naming what is wrong)."""
        if self._fn is None:  # type: ignore[attr-defined]  # set in __post_init__
            module_ref, _, name = self.ref.rpartition(":")
            try:
                module = import_user_module(module_ref, what="task_size")
            except UserImportError as exc:
                raise TaskSizeError(str(exc)) from None
            fn = getattr(module, name, None)
            if not callable(fn):
                raise TaskSizeError(f"{module_ref} has no function {name!r}")
            object.__setattr__(self, "_fn", fn)
        return self._fn  # type: ignore[attr-defined,no-any-return]  # set above

    def __call__(self, params: Mapping[str, Any]) -> int:
        try:
            value = self.load()(dict(params))
        except TaskSizeError:
            raise
        except Exception as exc:
            raise TaskSizeError(f"task.ranks function {self.ref} raised {type(exc).__name__}: {exc}") from exc
        return whole_ranks(value, f"task.ranks function {self.ref}")


def _too_large(size: int, workers: int) -> str:
    return f"a task of {counted(size, 'rank')} cannot run on a job of {counted(workers, 'worker rank')}"


def parse_task_size(value: Any, space: Space | None = None) -> TaskSize:
    """The :class:`TaskSize` that a ``task.ranks`` value names (raises :class:`TaskSizeError`)."""
    if isinstance(value, bool):
        raise TaskSizeError(f"{value!r} is not a number of ranks")
    if isinstance(value, int):
        if value < 1:
            raise TaskSizeError(f"a task needs at least 1 rank, got {value}")
        return FixedSize(value)
    if not isinstance(value, str) or not value:
        raise TaskSizeError(f"{value!r} is neither a number of ranks nor a name")
    if space is not None and value in space.dimensions:
        return ParameterSize(value)
    if value == OPTIMIZER:
        return OptimizerSize()
    module, sep, name = value.rpartition(":")
    if (
        sep
        and module
        and name.isidentifier()
        and (is_file_ref(module) or all(p.isidentifier() for p in module.split(".")))
    ):
        return FunctionSize(value)
    if space is None:
        return ParameterSize(value)
    raise TaskSizeError(f"{value!r} names no parameter of the space and is not a module:function")


#: what the ``task.ranks`` key accepts, for messages
ALLOWED = (
    "a number of ranks (default 1), a parameter whose value is the size, "
    "package.module:function or file.py:function of the point, or 'optimizer'"
)
