"""``emews check EXP/workflow.yaml --try --task N``: task N of that experiment, to run again as it ran.

Its point and its ``ctx.seed`` are read from the experiment's store; a task's seed follows from the
workflow's ``seed`` and its id (:func:`~emews.core.seeds.task_seed`), so the try runs it as task N of
the same workflow: the same point, the same seed, a run folder ``runs/N`` of its own scratch directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emews.config.workflow import Workflow
from emews.core.errors import ConfigError
from emews.core.seeds import task_seed
from emews.store import open_store, store_exists


@dataclass(frozen=True)
class StoredTask:
    """A task as the store recorded it: its id, point and ``ctx.seed``."""

    id: int
    point: dict[str, Any]
    seed: int


def stored_task(workflow: Workflow, task_id: int) -> StoredTask:
    """Task ``task_id`` of the experiment whose ``workflow.yaml`` ``workflow`` was read from; a
    :class:`ConfigError` naming ``--task`` when the file is no experiment's, the store has no such task,
    or the workflow's seed (a ``--set seed=``) would give the task another ``ctx.seed``."""
    exp_dir = workflow.source.parent
    if not store_exists(exp_dir):
        raise ConfigError(
            f"{workflow.source} is not the workflow.yaml of an experiment with a store "
            "(give EXP/workflow.yaml of an experiment that ran)",
            key="--task",
        )
    if task_id < 0:
        raise ConfigError(f"a task id is a whole number of 0 or more, not {task_id}", key="--task")
    store = open_store(exp_dir, readonly=True)
    try:
        finished = store.results_by_id([task_id])
        point = finished[0].params if finished else store.task_params([task_id]).get(task_id)
        seed = store.task_seeds([task_id]).get(task_id)
        count = store.next_id()
    finally:
        store.close()
    if point is None or seed is None:
        raise ConfigError(
            f"{exp_dir} has no task {task_id} (its tasks are 0 to {count - 1}: the id column of results.csv)",
            key="--task",
        )
    if task_seed(workflow.seed, task_id) != seed:
        raise ConfigError(
            f"the workflow's seed {workflow.seed} gives task {task_id} another ctx.seed than the {seed} it ran with: "
            "run the experiment's workflow.yaml without --set seed=...",
            key="--task",
        )
    return StoredTask(task_id, dict(point), seed)
