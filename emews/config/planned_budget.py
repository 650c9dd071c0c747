"""The evaluation budget of an optimizer that says how many points it runs (a sweep: its points file or grid).

Such an optimizer runs its points once each (``replicates`` times with replicates): without
``budget.evaluations`` that is the budget (the workflow's loading), and for a new experiment a
larger one is cut to it, with a note (:func:`fit_to_plan`), so that ``emews check``, the progress
line, ``emews status`` and ``summary.json`` count what will run (a 1-point sweep under
``budget: {evaluations: 30}`` said ``1/30``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emews.config.plugin_calls import ask_optimizer
from emews.core.wording import counted

if TYPE_CHECKING:
    from emews.config.workflow import Workflow


def planned_evaluations(workflow: Workflow) -> int | None:
    """The evaluations the optimizer runs with its options (each point ``replicates`` times);
    ``None`` when it does not say, or cannot be loaded (``check_workflow`` reports that); what it
    raises is said as :func:`~emews.config.plugin_calls.refusal` says it."""
    model = workflow.model
    options = model.optimizer.options
    points = ask_optimizer(
        model.optimizer,
        workflow.label,
        workflow.source.parent,
        lambda cls: cls.planned_evaluations(options, workflow.space),
    )
    return points * model.replicates if points else None


def plan_text(workflow: Workflow) -> str:
    """What ``emews check`` says the run evaluates: the optimizer's own words when its options say
    more than the space (a sweep's points file: its points and the keys they set), else the space's
    parameters."""
    model = workflow.model
    said = ask_optimizer(
        model.optimizer,
        workflow.label,
        workflow.source.parent,
        lambda cls: cls.describe_plan(model.optimizer.options, workflow.space),
    )
    return said or counted(len(workflow.space), "parameter")


def fit_to_plan(workflow: Workflow) -> str | None:
    """Cut a ``budget.evaluations`` larger than what the optimizer runs (its points) to that, for a new
    experiment (``emews check``, ``emews launch``; a resumed one keeps its total: its points file may
    have changed); the note to print when it did (``None``: the budget stands)."""
    budget = workflow.model.budget
    planned = planned_evaluations(workflow)
    if planned is None or budget.evaluations is None or budget.evaluations <= planned:
        return None
    given, budget.evaluations = budget.evaluations, planned
    name = workflow.model.optimizer.name
    replicates = workflow.model.replicates
    each = f", {counted(replicates, 'replicate')} each" if replicates > 1 else ""
    return (
        f"{workflow.label}: budget.evaluations {given}: the {name} optimizer runs "
        f"{counted(planned // replicates, 'point')}{each}, so {counted(planned, 'evaluation')} will run "
        "(the budget is cut to that)"
    )
