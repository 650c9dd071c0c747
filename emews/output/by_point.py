"""Results per point: the replicates of each point (``replicates: N``) summarised.

``emews results EXP --by-point`` writes ``results_by_point.csv`` with these rows; from Python,
:func:`results_by_point` returns them. Rows of one point share its parameters (the replicate index
left out); the statistics are over the replicates that succeeded.
"""

from __future__ import annotations

from pathlib import Path

from emews.config.experiment import require_experiment
from emews.core.replicates import PointResult
from emews.output.csvrows import csv_cell, write_csv_file
from emews.output.export import open_store, points_of
from emews.store import Store

__all__ = ["BY_POINT_FILE", "PointResult", "points_of", "results_by_point", "write_by_point_csv"]

BY_POINT_FILE = "results_by_point.csv"


def results_by_point(exp_dir: Path) -> list[PointResult]:
    """Every point of the experiment (in the order of its first task) with its statistics."""
    store = open_store(Path(exp_dir))
    if store is None:
        return []
    try:
        return points_of(store)
    finally:
        store.close()


def write_by_point_csv(exp_dir: Path, store: Store | None = None) -> tuple[Path, int]:
    """Write ``results_by_point.csv`` (``p:*``, count, failed, mean, std, min, max) from ``store``
    (an open one of ``exp_dir``; none: the experiment's); its path and row count."""
    exp_dir = require_experiment(Path(exp_dir))
    points = results_by_point(exp_dir) if store is None else points_of(store)
    names: list[str] = []
    for p in points:
        names += [k for k in p.point if k not in names]
    path = exp_dir / BY_POINT_FILE
    header: list[object] = [*(f"p:{n}" for n in names), "count", "failed", "mean", "std", "min", "max"]
    rows: list[list[object]] = [header]
    for p in points:
        s = p.stats
        rows.append(
            [csv_cell(p.point.get(n)) for n in names]
            + [s.count, s.failed, *("" if v is None else v for v in (s.mean, s.std, s.min, s.max))]
        )
    write_csv_file(path, rows)
    return path, len(points)
