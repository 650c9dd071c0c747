"""The reads of the exports, ``emews status``/``report`` and the compute budget (SQLite), part of
:class:`~emews.store.results_store.ResultsStore`.

What ``emews report`` reads (``report_*``, :meth:`ReadQueries.count_unfinished`) is detected, not
assumed: a ``reports`` table of per-step metrics, in emews' layout (one JSON object per report) or
one column per metric, and checkpoint paths (a ``checkpoint`` column of ``results`` or a
``checkpoints`` table) are read when the store has them; an SQLite error there is
:class:`~emews.store.base.StoreUnreadable`.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable, Collection, Generator, Iterator
from pathlib import Path
from typing import Any, TypeVar

from emews.core.jsoncodec import loads_metrics, loads_point
from emews.core.results import Status
from emews.store.base import (
    RESULT_FIELDS,
    CsvRow,
    CurvePoint,
    ResultRow,
    ResultTable,
    RunRow,
    StoreUnreadable,
    TimedResultRow,
)
from emews.training.messages import Ending

#: names a ``reports`` table may give its trial column, in order of preference
TRIAL_COLUMNS = ("task_id", "trial", "trial_id", "id")
#: an id above every stored one (SQLite's INTEGER is 64-bit)
_NO_END = 2**63 - 1

_T = TypeVar("_T")


def _ts(column: str) -> str:
    """SQL for ISO-8601 UTC with milliseconds, as ``datetime.isoformat`` writes it."""
    return (
        f"CASE WHEN {column} IS NULL THEN '' ELSE strftime('%Y-%m-%dT%H:%M:%f', {column}, 'unixepoch') || '+00:00' END"
    )


_CSV_COLUMNS = (
    "SELECT r.id, r.status, r.objective, r.params, r.metrics, COALESCE(r.error, ''), r.rank, COALESCE(r.host, ''), "
    f"{_ts('r.submitted')}, {_ts('r.started')}, {_ts('r.finished')}"
)
_CSV_RANGE = "WHERE r.id >= ? AND r.id < ? ORDER BY r.id"


def csv_seed(results_columns: Collection[str], tables: Collection[str]) -> tuple[str, str]:
    """(select expression, join) for ``results.csv``'s ``seed``: ``results.seed`` (schema 3; SQLite's
    version 3, PostgreSQL's 6), else, in an older store, the ``tasks`` row's seed of a task that has one."""
    own = "seed" in results_columns
    if "tasks" not in tables:
        return ("r.seed" if own else "NULL"), ""
    return ("COALESCE(r.seed, t.seed)" if own else "t.seed"), "LEFT JOIN tasks t ON t.id = r.id"


def _team(stored: str | None) -> tuple[int, ...] | None:
    """A ``team_ranks`` value (a JSON list of world ranks) as a tuple; ``None`` when NULL."""
    return None if stored is None else tuple(int(r) for r in json.loads(stored))


def _seconds(stored: Any) -> float | None:
    """A stored time as seconds (``None``: NULL, or not a number), as the report's frame reads it."""
    try:
        return None if stored is None else float(stored)
    except (TypeError, ValueError):
        return None


def _reading(method: Callable[..., _T]) -> Callable[..., _T]:
    """An SQLite error of ``method`` as :class:`StoreUnreadable` naming the store."""

    @functools.wraps(method)
    def read(self: ReadQueries, *args: Any) -> _T:
        try:
            return method(self, *args)
        except sqlite3.Error as exc:
            raise StoreUnreadable(f"cannot read the results store: {exc}", file=self.path) from None

    return read


class ReadQueries:
    """The read side beyond the engine's: rows for ``results.csv`` and the other exports, status
    and report, and what earlier runs spent (over the store's connection ``_db``)."""

    _db: sqlite3.Connection
    path: Path
    _has: Callable[[str], bool]  # whether the store has a table (the training half's, TrialStore._has)
    _columns: Callable[[str], list[str]]  # a table's columns, in order (TrialStore._columns)

    # -- results.csv and the other exports -------------------------------------------------
    def finished_ids(self) -> set[int]:
        return {i for (i,) in self._db.execute("SELECT id FROM results")}

    def failure_errors(self) -> Iterator[str | None]:
        for (error,) in self._db.execute("SELECT error FROM results WHERE status != ? ORDER BY id", (Status.OK.value,)):
            yield error

    def param_keys(self) -> list[str]:
        rows = self._db.execute(
            "SELECT j.key FROM results, json_each(results.params) AS j "
            "GROUP BY j.key ORDER BY MIN(results.id), MIN(j.id)"
        ).fetchall()
        return [key for (key,) in rows]

    def count_results(self, first_id: int = 0) -> int:
        ((count,),) = self._db.execute("SELECT COUNT(*) FROM results WHERE id >= ?", (first_id,))
        return int(count)

    def result_id_at(self, first_id: int, offset: int) -> int | None:
        row = self._db.execute(
            "SELECT id FROM results WHERE id >= ? ORDER BY id LIMIT 1 OFFSET ?", (first_id, offset)
        ).fetchone()
        return None if row is None else int(row[0])

    def csv_rows(self, first_id: int, end_id: int | None = None) -> Generator[CsvRow, None, None]:
        seed, join = csv_seed(self._columns("results"), self._tables())
        cursor = self._db.execute(
            f"{_CSV_COLUMNS}, {seed} FROM results r {join} {_CSV_RANGE}",
            (first_id, _NO_END if end_id is None else end_id),
        )
        try:
            yield from cursor
        finally:
            cursor.close()

    def point_results(self) -> list[ResultRow]:
        rows = self._db.execute("SELECT id, status, objective, params FROM results ORDER BY id").fetchall()
        return [ResultRow(id_, status, objective, json.loads(params)) for id_, status, objective, params in rows]

    def results_by_completion(self) -> list[TimedResultRow]:
        rows = self._db.execute(
            "SELECT id, status, objective, params, metrics, submitted, started, finished "
            "FROM results ORDER BY COALESCE(finished, submitted), id"
        ).fetchall()
        return [
            TimedResultRow(id_, status, objective, json.loads(params), loads_metrics(metrics), *times)
            for id_, status, objective, params, metrics, *times in rows
        ]

    # -- what earlier runs spent (the compute budget of a resumed run) -------------------------
    def top_steps(self) -> dict[int, int]:
        if not self._has("reports"):
            return {}
        return dict(self._db.execute("SELECT trial, MAX(step) FROM reports GROUP BY trial"))

    def busy_spans(self) -> list[tuple[float, float]]:
        spans: list[tuple[float, float]] = []
        if self._has("results"):
            spans += self._db.execute(
                "SELECT started, finished FROM results WHERE started IS NOT NULL AND finished IS NOT NULL"
            ).fetchall()
        if self._has("reports"):
            spans += self._db.execute(
                "SELECT MIN(time), MAX(time) FROM reports WHERE time IS NOT NULL "
                "AND trial NOT IN (SELECT id FROM results) GROUP BY trial"
            ).fetchall()
        return spans

    # -- emews report ----------------------------------------------------------------------
    @_reading
    def report_results(self) -> ResultTable:
        present = self._tables()
        attempt, team, tasks_join = self._attempt_and_team(present)
        checkpoint = self._checkpoint_source(present)
        select, checkpoint_join = (f", {checkpoint[0]}", checkpoint[1]) if checkpoint else ("", "")
        cols = ", ".join(f"r.{c}" for c in RESULT_FIELDS)
        rows = self._db.execute(
            f"SELECT {cols}, r.params, {attempt}, {team}{select} FROM results r {tasks_join} {checkpoint_join} "
            "ORDER BY r.id"
        ).fetchall()
        n = len(RESULT_FIELDS)
        return ResultTable(
            [(*r[:n], loads_point(r[n]), r[n + 1], _team(r[n + 2]), *r[n + 3 :]) for r in rows], checkpoint is not None
        )

    @_reading
    def run_rows(self) -> list[RunRow]:
        attempt, team, tasks_join = self._attempt_and_team(self._tables())
        rows = self._db.execute(
            f"SELECT r.submitted, r.started, r.finished, {attempt}, r.rank, {team} FROM results r {tasks_join} "
            "ORDER BY r.id"
        ).fetchall()
        return [
            RunRow(_seconds(submitted), _seconds(started), _seconds(finished), int(tried or 0), rank, _team(held))
            for submitted, started, finished, tried, rank, held in rows
        ]

    def _attempt_and_team(self, present: set[str]) -> tuple[str, str, str]:
        """(attempt, team ranks, join) of a result row as SQL: the ``tasks`` row's attempt (0 in a
        store without tasks) and ``results.team_ranks`` (NULL before version 2)."""
        attempt, tasks_join = (
            ("COALESCE(t.attempt, 0)", "LEFT JOIN tasks t ON t.id = r.id") if "tasks" in present else ("0", "")
        )
        team = "r.team_ranks" if "team_ranks" in self._columns("results") else "NULL"  # none before version 2
        return attempt, team, tasks_join

    @_reading
    def count_unfinished(self) -> int:
        if "tasks" not in self._tables():
            return 0
        return int(
            self._db.execute(
                "SELECT COUNT(*) FROM tasks t LEFT JOIN results r ON r.id = t.id WHERE r.id IS NULL"
            ).fetchone()[0]
        )

    @_reading
    def unfinished_ranks(self) -> int:
        if "tasks" not in self._tables():
            return 0
        size = "t.ranks" if "ranks" in self._columns("tasks") else "1"  # none before version 1
        return int(
            self._db.execute(
                f"SELECT COALESCE(SUM({size}), 0) FROM tasks t LEFT JOIN results r ON r.id = t.id WHERE r.id IS NULL"
            ).fetchone()[0]
        )

    @_reading
    def report_curves(self) -> list[CurvePoint] | None:
        if "reports" not in self._tables():
            return None
        cols = self._columns("reports")
        trial = next((c for c in TRIAL_COLUMNS if c in cols), None)
        if trial is None or "step" not in cols or self._db.execute("SELECT 1 FROM reports LIMIT 1").fetchone() is None:
            return None  # the table of a store whose tasks reported nothing, or not a table of reports
        when = "time" if "time" in cols else "NULL"
        if "metrics" in cols:  # one JSON object per report
            rows = self._db.execute(
                f"SELECT {trial}, step, metrics, {when} FROM reports ORDER BY {trial}, step"
            ).fetchall()
            decode = loads_metrics
            return [CurvePoint(t, step, decode(m) if isinstance(m, str) else {}, at) for t, step, m, at in rows]
        names = [c for c in cols if c not in (trial, "step", "time", "rowid")]  # one numeric column per metric
        rows = self._db.execute(
            f"SELECT {trial}, step, {', '.join(names) or 'NULL'}, {when} FROM reports ORDER BY {trial}, step"
        ).fetchall()
        return [CurvePoint(r[0], r[1], dict(zip(names, r[2:-1], strict=False)), r[-1]) for r in rows]

    @_reading
    def report_endings(self) -> dict[int, Ending]:
        if not {"trial", "step", "metrics"} <= set(self._columns("reports")):
            return {}
        return self.endings()  # type: ignore[attr-defined]  # the training tables' (TrialStore)

    def _tables(self) -> set[str]:
        return {name for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def _checkpoint_source(self, present: set[str]) -> tuple[str, str] | None:
        """(select expression, join) for each result's checkpoint path: a ``checkpoint`` column of
        ``results``, or the latest (durable, when states are kept) row of a ``checkpoints`` table."""
        if "checkpoint" in self._columns("results"):
            return "r.checkpoint", ""
        if "checkpoints" not in present:
            return None
        cols = self._columns("checkpoints")
        trial = next((c for c in TRIAL_COLUMNS if c in cols), None)
        if trial is None or "path" not in cols:
            return None
        durable = "WHERE state = 'durable'" if "state" in cols else ""
        if self._db.execute(f"SELECT 1 FROM checkpoints {durable} LIMIT 1").fetchone() is None:
            return None  # the table of a store whose tasks kept no checkpoint
        latest = "step" if "step" in cols else "rowid"
        return "c.path", (
            f"LEFT JOIN (SELECT {trial} AS trial, path, MAX({latest}) FROM checkpoints {durable} "
            f"GROUP BY {trial}) c ON c.trial = r.id"
        )
