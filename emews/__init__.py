"""emews: large-scale model exploration on HPC machines over MPI.

The public API: optimizers implement :class:`Optimizer` (or :class:`AskTellOptimizer`)
and talk to an :class:`Evaluator`; objectives may call :func:`current_task` for
their :class:`TaskContext`.
"""

from emews.core.evaluator import BudgetExhausted, Evaluator, EvaluatorObserver
from emews.core.optimizer import AskTellOptimizer, Optimizer
from emews.core.results import Result, Status
from emews.objective.context import TaskContext, current_task
from emews.core.space import Categorical, Constant, Float, Int, Ordered, Space

__all__ = ["AskTellOptimizer", "BudgetExhausted", "Categorical", "Constant", "Evaluator", "EvaluatorObserver", "Float", "Int",
           "Optimizer", "Ordered", "Result", "Space", "Status", "TaskContext", "current_task"]
