"""emews: large-scale model exploration on HPC machines over MPI.

The public API: optimizers implement :class:`Optimizer` (or :class:`AskTellOptimizer`)
and talk to an :class:`Evaluator`; objectives may call :func:`current_task` for
their :class:`TaskContext`. From Python or a notebook, :func:`run` runs a search as
``emews launch`` does and :func:`load` reads an experiment (:class:`Experiment`): both are
imported on first use (``emews.api``), as are the checkpoint catalog, the results per point, the
R bridge and the test kits, so a worker rank that imports ``emews`` loads neither
pandas nor the configuration layer.
"""

from importlib import import_module
from typing import Any

from emews.core.direction import Direction
from emews.core.errors import ConfigError, EmewsError, OptionError
from emews.core.evaluator import BudgetExhausted, Evaluator, EvaluatorObserver, Room
from emews.core.optimizer import AskTellOptimizer, Optimizer
from emews.core.results import Result, Status
from emews.core.space import Categorical, Constant, DimensionType, Float, Int, Ordered, Space, registered
from emews.objective.context import TaskContext, current_task

#: public names imported when first asked for (PEP 562): name -> module
_LAZY = {
    "run": "emews.api",
    "load": "emews.api",
    "Experiment": "emews.api",
    "RunFailed": "emews.api",
    "TrialScheduler": "emews.training.schedulers.trial_scheduler",
    "Decision": "emews.training.messages",
    "Action": "emews.training.messages",
    "CONTINUE": "emews.training.messages",
    "candle_point": "emews.objective.candle_params",
    "resumed_seed": "emews.core.seeds",
    "WorkerContext": "emews.objective.worker_context",
    "load_best": "emews.output.catalog",
    "list_checkpoints": "emews.output.catalog",
    "results_by_point": "emews.output.by_point",
    "ROptimizer": "emews.contrib.rbridge",
    "OptimizerConformance": "emews.testing",
    "SchedulerConformance": "emews.testing",
    "check_optimizer": "emews.testing",
    "check_scheduler": "emews.testing",
}

__all__ = [
    "CONTINUE",
    "Action",
    "AskTellOptimizer",
    "BudgetExhausted",
    "Categorical",
    "ConfigError",
    "Constant",
    "Decision",
    "DimensionType",
    "Direction",
    "EmewsError",
    "Evaluator",
    "EvaluatorObserver",
    "Experiment",
    "Float",
    "Int",
    "OptimizerConformance",
    "OptionError",
    "Optimizer",
    "Ordered",
    "ROptimizer",
    "Result",
    "Room",
    "RunFailed",
    "SchedulerConformance",
    "Space",
    "Status",
    "TaskContext",
    "TrialScheduler",
    "WorkerContext",
    "candle_point",
    "check_optimizer",
    "check_scheduler",
    "current_task",
    "list_checkpoints",
    "load",
    "load_best",
    "registered",
    "results_by_point",
    "resumed_seed",
    "run",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'emews' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
