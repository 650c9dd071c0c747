"""Results as DeepHyper writes them, so its analysis tools (``deephyper.analysis.hpo``) read them right.

DeepHyper's conventions (checked against a real DeepHyper 0.13 ``results.csv``):

- ``p:<name>`` per hyperparameter, sorted by name; constants of the space are left out;
- ``objective`` is **maximized**: a minimized metric is written negated;
- a failed evaluation has a string starting with ``F`` as its objective (``F_failed``,
  ``F_timeout``, ...) and ``job_status`` ``DONE`` like every finished job;
- ``job_id``, then ``m:<metric>`` columns, including ``m:timestamp_submit``, ``m:timestamp_start``,
  ``m:timestamp_end`` and ``m:timestamp_gather``: seconds since the first submission; for training
  trials ``m:budget`` (the last step reported) and ``m:stopped`` (stopped early by the scheduler),
  as DeepHyper's stoppers' examples record a trial's fidelity;
- rows in the order results were gathered (completion order).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emews.config.experiment import read_workflow, require_experiment
from emews.core.direction import Direction
from emews.output.csvrows import csv_cell, write_csv_file
from emews.output.export import open_store
from emews.store import Store, TrialState

DEEPHYPER_FILE = "results_deephyper.csv"
TIMESTAMPS = ("timestamp_submit", "timestamp_start", "timestamp_end", "timestamp_gather")
#: a training trial's columns, as DeepHyper's stoppers' examples record them (``m:budget``, ``m:stopped``)
TRIAL_METADATA = ("budget", "stopped")


def deephyper_rows(exp_dir: Path, store: Store | None = None) -> tuple[list[str], list[list[Any]]]:
    """The header and rows of the DeepHyper CSV of an experiment, read from ``store`` (an open one of
    ``exp_dir``; none: the experiment's, opened and closed here)."""
    workflow = read_workflow(exp_dir)
    space = workflow.get("space", {})
    constants = {name for name, spec in space.items() if isinstance(spec, dict) and spec.get("type") == "constant"}
    direction = Direction.of(workflow.get("objective", {}).get("direction"))
    if store is not None:
        rows, states = store.results_by_completion(), store.trial_states()
    else:
        opened = open_store(exp_dir)
        if opened is None:
            return ["job_id", "objective", "job_status"], []
        try:
            rows, states = opened.results_by_completion(), opened.trial_states()
        finally:
            opened.close()
    decoded = [(r.id, r.status, r.objective, r.params, r.metrics, [r.submitted, r.started, r.finished]) for r in rows]
    names = sorted({k for d in decoded for k in d[3]} - constants)
    metric_names = sorted({k for d in decoded for k in d[4]} - set(TIMESTAMPS))
    trial_names = [n for n in TRIAL_METADATA if states and n not in metric_names]  # a metric of that name wins
    origin = min((t[0] for *_, t in decoded if t[0] is not None), default=0.0)
    header = [
        *(f"p:{n}" for n in names),
        "objective",
        "job_id",
        "job_status",
        *(f"m:{m}" for m in metric_names),
        *(f"m:{n}" for n in trial_names),
        *(f"m:{t}" for t in TIMESTAMPS),
    ]
    out = []
    for id_, status, objective, params, metrics, (submitted, started, finished) in decoded:
        value: Any = f"F_{status}" if status != "ok" or objective is None else -direction.loss(objective)
        stamps = [submitted, started, finished, finished]
        out.append(
            [
                *(csv_cell(params.get(n)) for n in names),
                value,
                id_,
                "DONE",
                *(csv_cell(metrics.get(m)) for m in metric_names),
                *_trial_cells(states.get(id_), trial_names),
                *("" if t is None else round(t - origin, 6) for t in stamps),
            ]
        )
    return header, out


def _trial_cells(state: TrialState | None, names: list[str]) -> list[Any]:
    """A training trial's ``budget`` (its last reported step) and ``stopped`` (by its scheduler),
    those of ``names``; empty cells for a task that reported nothing."""
    if state is None:
        return [""] * len(names)
    values = {"budget": state.step, "stopped": state.stopped_early}
    return [values[n] for n in names]


def write_deephyper_csv(exp_dir: Path, path: Path | None = None, store: Store | None = None) -> tuple[Path, int]:
    """Write the DeepHyper CSV (``results_deephyper.csv`` by default) from ``store`` (an open one of
    ``exp_dir``; none: the experiment's); its path and row count."""
    exp_dir = require_experiment(Path(exp_dir))
    path = path or exp_dir / DEEPHYPER_FILE
    header, rows = deephyper_rows(exp_dir, store)
    write_csv_file(path, [header, *rows])
    return path, len(rows)
