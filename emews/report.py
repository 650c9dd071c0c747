"""Reading an experiment's results back: CSV export and the end-of-run summary.

Everything here opens the store read-only and writes only its own private temp
file, so any number of ``emews results`` / ``status`` may run beside a live job.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from emews.errors import ConfigError
from emews.experiment import CSV_FILE, STORE_FILE, require_experiment
from emews.results import Result, Status
from emews.runtime.store import ResultsStore


@dataclass(frozen=True)
class Totals:
    """What a summary needs: counts by status and the best evaluation."""

    counts: dict[str, int]
    best: Result | None

    @property
    def done(self) -> int:
        return sum(self.counts.values())


def open_store(exp_dir: Path) -> ResultsStore | None:
    """The experiment's store, read-only (``None`` before the first result)."""
    path = require_experiment(exp_dir) / STORE_FILE
    return ResultsStore(path, readonly=True) if path.exists() else None


def totals(store: ResultsStore | None) -> Totals:
    if store is None:
        return Totals({}, None)
    return Totals(store.status_counts(), store.best())


def _ts(column: str) -> str:
    """SQL for ISO-8601 UTC with milliseconds, as ``datetime.isoformat`` writes it."""
    return (f"CASE WHEN {column} IS NULL THEN '' ELSE "
            f"strftime('%Y-%m-%dT%H:%M:%f', {column}, 'unixepoch') || '+00:00' END")


def write_csv(store: ResultsStore, path: Path, param_names: Sequence[str]) -> int:
    """Write ``results.csv`` (id, status, objective, p:*, m:*, error, rank, host, times) from the store.

    Rows go straight from SQLite to the CSV writer (no Result objects) into a private
    temp file that replaces ``path`` atomically; returns the row count.
    """
    metric_names = store.metric_names()
    header = (["id", "status", "objective"] + [f"p:{p}" for p in param_names]
              + [f"m:{m}" for m in metric_names]
              + ["error", "rank", "host", "submitted", "started", "finished"])
    cursor = store.execute(f"SELECT id, status, objective, params, metrics, COALESCE(error, ''), rank, "
                           f"COALESCE(host, ''), {_ts('submitted')}, {_ts('started')}, {_ts('finished')} "
                           "FROM results ORDER BY id")
    loads, empty, plain = json.JSONDecoder().decode, {}, _PLAIN
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"cannot write the CSV: {exc.strerror}", file=str(path)) from None
    rows = 0
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            while chunk := cursor.fetchmany(4096):
                out = []
                for id_, status, objective, params, metrics, *tail in chunk:
                    p = loads(params)
                    m = loads(metrics) if metrics != "{}" else empty
                    out.append([id_, status, objective,
                                *[v if type(v) in plain else _cell(v) for v in map(p.get, param_names)],
                                *[v if type(v) in plain else _cell(v) for v in map(m.get, metric_names)],
                                *tail])
                writer.writerows(out)
                rows += len(out)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return rows


#: values the CSV writer takes as they are
_PLAIN = frozenset((int, float, str, bool))


def _cell(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def stored_param_names(store: ResultsStore, listed: Sequence[str] = ()) -> list[str]:
    """``listed``, then every other parameter name the stored points hold, in order of first appearance
    (points of an open space, a CANDLE points file, differ in their keys)."""
    rows = store.execute("SELECT j.key FROM results, json_each(results.params) AS j "
                         "GROUP BY j.key ORDER BY MIN(results.id), MIN(j.id)").fetchall()
    seen = set(listed)
    return [*listed, *(key for (key,) in rows if key not in seen)]


def export_csv(exp_dir: Path, param_names: Sequence[str], store: ResultsStore | None = None, *,
               with_stored_keys: bool = False) -> tuple[Path, int]:
    """(Re)write ``results.csv`` of ``exp_dir``; return its path and row count. ``with_stored_keys``:
    also a column for each parameter the stored points hold beyond ``param_names``."""
    exp_dir = require_experiment(exp_dir)
    path = exp_dir / CSV_FILE
    own = store is None
    store = store or open_store(exp_dir)
    if store is None:
        return path, 0
    try:
        if with_stored_keys:
            param_names = stored_param_names(store, param_names)
        return path, write_csv(store, path, param_names)
    finally:
        if own:
            store.close()


def summary_text(total: Totals, budget: int | None, elapsed: float | None = None) -> str:
    """A few lines: counts by status, the best evaluation and its parameters."""
    counts = ", ".join(f"{n} {s.value}" for s in Status if (n := total.counts.get(s.value, 0)))
    lines = [f"{total.done}{'/' + str(budget) if budget else ''} evaluations"
             + (f": {counts}" if counts else "")
             + (f" in {elapsed:.1f} s" if elapsed is not None else "")]
    best = total.best
    if best is None:
        lines.append("no successful evaluation")
    else:
        lines.append(f"best objective {best.objective:.6g} (task {best.id}) with parameters:")
        lines.append("  " + json.dumps(dict(best.params), sort_keys=False))
    return "\n".join(lines)
