"""The durable results store: one SQLite row per finished evaluation, committed as it arrives."""

from __future__ import annotations

import csv
import json
import math
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from emews.results import Result, Status

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY,
    status TEXT NOT NULL,
    objective REAL,
    loss REAL,
    params TEXT NOT NULL,
    metrics TEXT NOT NULL,
    error TEXT,
    rank INTEGER,
    host TEXT,
    submitted REAL,
    started REAL,
    finished REAL
)
"""
_COLUMNS = ("id", "status", "objective", "loss", "params", "metrics", "error", "rank", "host",
            "submitted", "started", "finished")


_encode = json.JSONEncoder(separators=(",", ":")).encode


class ResultsStore:
    """SQLite in WAL mode: a killed job loses at most the results not yet received."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(_SCHEMA)

    def add(self, results: Sequence[Result]) -> None:
        """Write ``results`` in one transaction."""
        rows = [(r.id, r.status.value, r.objective, None if math.isinf(r.loss) else r.loss,
                 _encode(r.params), _encode(r.metrics) if r.metrics else "{}", r.error, r.rank, r.host,
                 r.submitted, r.started, r.finished) for r in results]
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(f"INSERT OR REPLACE INTO results VALUES ({','.join('?' * len(_COLUMNS))})", rows)

    def __iter__(self) -> Iterator[Result]:
        cursor = self._db.execute(f"SELECT {','.join(_COLUMNS)} FROM results ORDER BY id")
        for row in cursor:
            rec = dict(zip(_COLUMNS, row))
            yield Result(id=rec["id"], params=json.loads(rec["params"]), status=Status(rec["status"]),
                         objective=rec["objective"], loss=math.inf if rec["loss"] is None else rec["loss"],
                         metrics=json.loads(rec["metrics"]), error=rec["error"], rank=rec["rank"],
                         host=rec["host"], submitted=rec["submitted"], started=rec["started"],
                         finished=rec["finished"])

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def close(self) -> None:
        self._db.close()


def _timestamp(t: float | None) -> str:
    if t is None:
        return ""
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="milliseconds")


def write_csv(results: Iterable[Result], path: str | Path, param_names: Sequence[str]) -> int:
    """Write ``results.csv`` (id, status, objective, p:*, m:*, error, rank, host, times); return the row count."""
    results = list(results)
    metric_names: list[str] = []
    for r in results:
        metric_names.extend(k for k in r.metrics if k not in metric_names)
    header = (["id", "status", "objective"] + [f"p:{p}" for p in param_names]
              + [f"m:{m}" for m in metric_names]
              + ["error", "rank", "host", "submitted", "started", "finished"])
    path = Path(path)
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for r in results:
            writer.writerow(
                [r.id, r.status.value, _cell(r.objective)]
                + [_cell(r.params.get(p)) for p in param_names]
                + [_cell(r.metrics.get(m)) for m in metric_names]
                + [r.error or "", _cell(r.rank), r.host or "",
                   _timestamp(r.submitted), _timestamp(r.started), _timestamp(r.finished)])
    tmp.replace(path)
    return len(results)


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value
