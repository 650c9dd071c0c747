"""emews: large-scale model exploration on HPC machines over MPI.

The public API: optimizers implement :class:`Optimizer` (or :class:`AskTellOptimizer`)
and talk to an :class:`Evaluator`; objectives may call :func:`current_task` for
their :class:`TaskContext`. From Python or a notebook, :func:`run` runs a search as
``emews launch`` does and :func:`load` reads an experiment (:class:`Experiment`): both are
imported on first use (``emews.api``), so a worker rank that imports ``emews`` loads neither
pandas nor the configuration layer.
"""

from typing import Any

from emews.core.evaluator import BudgetExhausted, Evaluator, EvaluatorObserver
from emews.core.optimizer import AskTellOptimizer, Optimizer
from emews.core.results import Result, Status
from emews.core.space import Categorical, Constant, Float, Int, Ordered, Space
from emews.objective.context import TaskContext, current_task

__all__ = ["AskTellOptimizer", "BudgetExhausted", "Categorical", "Constant", "Evaluator", "EvaluatorObserver",
           "Experiment", "Float", "Int", "Optimizer", "Ordered", "Result", "RunFailed", "Space", "Status",
           "TaskContext", "current_task", "load", "run"]

#: names of ``emews.api``, imported when first asked for (PEP 562)
_LAZY = ("run", "load", "Experiment", "RunFailed")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import emews.api

        return getattr(emews.api, name)
    raise AttributeError(f"module 'emews' has no attribute {name!r}")
