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
from typing import Any, Sequence

from emews.errors import ConfigError
from emews.experiment import CSV_FILE, STORE_FILE, require_experiment
from emews.jsoncodec import loads_point
from emews.results import Result, Status
from emews.runtime.store import ResultsStore
from emews.runtime.trial_store import TrialState, TrialStore


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


_SELECT_FROM = (f"SELECT id, status, objective, params, metrics, COALESCE(error, ''), rank, COALESCE(host, ''), "
                f"{_ts('submitted')}, {_ts('started')}, {_ts('finished')} FROM results WHERE id >= ? ORDER BY id")


def write_csv(store: ResultsStore, path: Path, param_names: Sequence[str]) -> int:
    """Write ``results.csv`` (id, status, objective, p:*, m:*, error, rank, host, times) from the store.

    Rows go straight from SQLite to the CSV writer (no Result objects) into a private
    temp file that replaces ``path`` atomically; returns the row count.
    """
    csv_file = CsvFile(path, param_names)
    try:
        return csv_file.finish(store)
    finally:
        csv_file.discard()


class CsvFile:
    """``results.csv`` written from the store in id order: in one go (:meth:`finish`), or while a
    run goes on (:meth:`follow` after each batch of results, then :meth:`finish`), with the same bytes.

    Following writes the rows whose ids run on without a gap from the last one written (a lower
    id may still be running); :meth:`finish` writes all the rest. A metric that first appears
    after rows were written changes the header: the file is then started again.
    """

    def __init__(self, path: Path, param_names: Sequence[str]) -> None:
        self.path = path
        self._params = list(param_names)
        self._metrics: list[str] | None = None
        self._fh: Any = None
        self._tmp: str | None = None
        self._next_id = 0
        self.rows = 0
        self._trained = False

    def follow(self, store: ResultsStore) -> None:
        """Write the rows that continue the file without a gap."""
        if self._metrics is None:
            self._start(store.metric_names(), _trained(store))
        self._write(store, contiguous=True)

    def finish(self, store: ResultsStore) -> int:
        """Write every row not written yet and put the file in place; return the row count."""
        metrics, trained = store.metric_names(), _trained(store)
        if self._metrics != metrics or self._trained != trained:
            self._start(metrics, trained)
        self._write(store, contiguous=False)
        self._fh.close()
        self._fh = None
        try:
            os.chmod(self._tmp, 0o666 & ~_umask())  # type: ignore[arg-type]
            os.replace(self._tmp, self.path)  # type: ignore[arg-type]
        except OSError as exc:
            raise ConfigError(f"cannot write the CSV: {exc.strerror}", file=str(self.path)) from None
        self._tmp = None
        return self.rows

    def discard(self) -> None:
        """Remove the temp file, if one is left (after a failure)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._tmp is not None:
            Path(self._tmp).unlink(missing_ok=True)
            self._tmp = None

    def _start(self, metric_names: list[str], trained: bool) -> None:
        self.discard()
        try:
            fd, self._tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        except OSError as exc:
            raise ConfigError(f"cannot write the CSV: {exc.strerror}", file=str(self.path)) from None
        self._fh = os.fdopen(fd, "w", newline="")
        self._writer = csv.writer(self._fh)
        self._metrics = list(metric_names)
        self._trained = trained
        self._writer.writerow(["id", "status", "objective"] + [f"p:{p}" for p in self._params]
                              + [f"m:{m}" for m in self._metrics] + (list(TRIAL_COLUMNS) if trained else [])
                              + ["error", "rank", "host", "submitted", "started", "finished"])
        self._next_id = 0
        self.rows = 0

    def _write(self, store: ResultsStore, *, contiguous: bool) -> None:
        params, metrics, writer = self._params, self._metrics or [], self._writer
        known = set(metrics)
        load_metrics, load_point, empty, plain = json.JSONDecoder().decode, loads_point, {}, _PLAIN
        out: list[list[Any]] = []
        states = TrialStore(store.connection, readonly=True).trial_states(self._next_id) if self._trained else None
        cursor = store.execute(_SELECT_FROM, (self._next_id,))
        for id_, status, objective, p_json, m_json, *tail in cursor:
            if contiguous and id_ != self._next_id:
                break  # a lower id is still running
            m = load_metrics(m_json) if m_json != "{}" else empty
            if contiguous and not m.keys() <= known:
                break  # a new metric: finish() writes the file again with it in the header
            p = load_point(p_json)
            out.append([id_, status, objective,
                        *[v if type(v) in plain else csv_cell(v) for v in map(p.get, params)],
                        *[v if type(v) in plain else csv_cell(v) for v in map(m.get, metrics)],
                        *(() if states is None else _trial_cells(states.get(id_))),
                        *tail])
            self._next_id = id_ + 1
            if len(out) == 4096:
                writer.writerows(out)
                self.rows += len(out)
                out = []
        cursor.close()
        writer.writerows(out)
        self.rows += len(out)
        self._fh.flush()


#: training trials' columns: the last step reported, and the last answer to it other than continue
TRIAL_COLUMNS = ("t:step", "t:decision")


def _trained(store: ResultsStore) -> bool:
    """Whether the experiment's tasks reported training steps (its CSV then has ``TRIAL_COLUMNS``)."""
    return TrialStore(store.connection, readonly=True).has_reports()


def _trial_cells(state: TrialState | None) -> tuple[Any, str]:
    return ("", "") if state is None else (state.step, state.action)


#: values the CSV writer takes as they are
_PLAIN = frozenset((int, float, str, bool))


def csv_cell(value: object) -> object:
    """A parameter or metric value as a CSV cell: ``None`` empty, lists and dicts as JSON."""
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
