"""Reading an experiment's results back: CSV export and the end-of-run summary."""

from __future__ import annotations

import json
import math
from pathlib import Path

from emews.experiment import CSV_FILE, STORE_FILE, WORKFLOW_FILE, require_experiment
from emews.results import Result, Status
from emews.runtime.store import ResultsStore, write_csv
from emews.yamlio import load_mapping


def load_results(exp_dir: Path) -> list[Result]:
    """Every finished evaluation in the experiment's results store (none if it has no store yet)."""
    path = require_experiment(exp_dir) / STORE_FILE
    if not path.exists():
        return []
    store = ResultsStore(path)
    try:
        return list(store)
    finally:
        store.close()


def export_csv(exp_dir: Path, results: list[Result] | None = None) -> tuple[Path, int]:
    """(Re)write ``results.csv`` from ``results`` (default: the store); return its path and row count."""
    exp_dir = require_experiment(exp_dir)
    names = list(load_mapping(exp_dir / WORKFLOW_FILE).get("space", {}))
    rows = write_csv(load_results(exp_dir) if results is None else results, exp_dir / CSV_FILE, names)
    return exp_dir / CSV_FILE, rows


def best_result(results: list[Result]) -> Result | None:
    ok = [r for r in results if r.ok and not math.isinf(r.loss)]
    return min(ok, key=lambda r: r.loss) if ok else None


def summary_text(results: list[Result], budget: int | None, elapsed: float | None = None) -> str:
    """A few lines: counts by status, the best evaluation and its parameters."""
    counts = ", ".join(f"{n} {s.value}" for s in Status if (n := sum(r.status is s for r in results)))
    lines = [f"{len(results)}{'/' + str(budget) if budget else ''} evaluations"
             + (f": {counts}" if counts else "")
             + (f" in {elapsed:.1f} s" if elapsed is not None else "")]
    best = best_result(results)
    if best is None:
        lines.append("no successful evaluation")
    else:
        lines.append(f"best objective {best.objective:.6g} (task {best.id}) with parameters:")
        lines.append("  " + json.dumps(dict(best.params), sort_keys=False))
    return "\n".join(lines)
