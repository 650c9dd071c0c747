"""The durable results store: SQLite, one row per dispatched task and per finished evaluation.

:class:`ResultsStore` is the SQLite backend of :class:`~emews.store.base.Store`: these two tables,
the training tables beside them (:class:`~emews.store.trial_store.TrialStore`) and the reads of
the exports and reports (:class:`~emews.store.queries.ReadQueries`), over one connection.

Two tables: ``tasks`` (every task handed to a worker: id, point, seed, attempt, ranks) and
``results`` (every finished evaluation; ``team_ranks``: the world ranks a multi-rank task's team
held, a JSON list with team rank 0 first, NULL for a task that ran on ``rank`` alone). A task
without a result was running when the run stopped; ``emews resume`` runs it again, once. Rows are
only ever inserted: a colliding id is an error, never a silent replacement.

The schema's version is the database's ``PRAGMA user_version`` (:data:`SCHEMA_VERSION`), checked
whenever a store is opened: an older store is migrated when opened for writing, a newer one is
refused, and so is a table that lacks a column this version reads (or has one it cannot fill).
Every ``INSERT`` names its columns, so the columns a newer version adds are left to their defaults.
A change of the schema bumps :data:`SCHEMA_VERSION` and adds its step to ``_migrate``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from emews.core.disk_room import full
from emews.core.errors import write_failure
from emews.core.jsoncodec import dumps_point, loads_metrics, loads_point
from emews.core.results import Result, Status, Task
from emews.store.base import (
    Durability,
    Store,
    StoreCorrupt,
    StoreIncompatible,
    StoreNewer,
    StoreUnreadable,
    is_json_object,
)
from emews.store.queries import ReadQueries
from emews.store.tables import column_names, in_slices, record_tasks
from emews.store.trial_store import TRIAL_SCHEMA, TrialStore

#: ``PRAGMA synchronous`` per durability mode (WAL journal in every mode)
_SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL", "off": "OFF"}

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
    finished REAL,
    team_ranks TEXT,
    seed INTEGER
);
CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY,
    params TEXT NOT NULL,
    seed INTEGER NOT NULL,
    submitted REAL,
    attempt INTEGER NOT NULL DEFAULT 0,
    ranks INTEGER NOT NULL DEFAULT 1
);
"""
COLUMNS = (
    "id",
    "status",
    "objective",
    "loss",
    "params",
    "metrics",
    "error",
    "rank",
    "host",
    "submitted",
    "started",
    "finished",
)


def row_result(row: Sequence[Any], status: Status, params: Mapping[str, Any], metrics: dict[str, Any]) -> Result:
    """A row of ``results`` (:data:`COLUMNS`) as a :class:`Result`, with its status, point and metrics
    already decoded (the readers decode them their own way; a missing loss is ``inf``)."""
    id_, _, objective, loss, _, _, error, rank, host, submitted, started, finished = row
    return Result(
        id=id_,
        params=params,
        status=status,
        objective=objective,
        loss=math.inf if loss is None else loss,
        metrics=metrics,
        error=error,
        rank=rank,
        host=host,
        submitted=submitted,
        started=started,
        finished=finished,
    )


#: the columns of ``tasks`` this version reads (``ranks``: added by the migration from version 0)
_TASK_COLUMNS = ("id", "params", "seed", "submitted", "attempt")
#: 0: written before the version was kept (``tasks.ranks`` may be missing); 1: ``tasks.ranks``;
#: 2: ``results.team_ranks`` (read when present: a store without it is read as before); 3: ``results.seed``
#: (the task's ``ctx.seed``; a store without it has the seeds of the tasks that ran long enough to be in ``tasks``);
#: 4: ``decisions.report`` (the seq of the report a decision answered; a store without it matches them by step)
SCHEMA_VERSION = 4
#: the columns a result is written to: :data:`COLUMNS`, ``team_ranks`` and ``seed``
WRITTEN_COLUMNS = (*COLUMNS, "team_ranks", "seed")
_INSERT_RESULT = f"INSERT INTO results ({','.join(WRITTEN_COLUMNS)}) VALUES ({','.join('?' * len(WRITTEN_COLUMNS))})"
#: every column that holds task ids, the training tables' (:mod:`emews.store.trial_store`) included: an id
#: that any of them holds is never issued again (a trial reports and checkpoints from its start)
TASK_ID_COLUMNS = (
    ("results", "id"),
    ("tasks", "id"),
    ("reports", "trial"),
    ("checkpoints", "trial"),
    ("attempts", "task"),
    ("pauses", "task"),
    ("waits", "task"),
    ("lineage", "trial"),
    ("lineage", "donor"),
    ("decisions", "trial"),
    ("promotions", "trial"),
)

_encode = json.JSONEncoder(separators=(",", ":")).encode


def unopenable(path: Path, exc: sqlite3.Error) -> StoreUnreadable:
    """The store at ``path`` could not be opened: SQLite's words, or, when it failed to write (its
    WAL's shared-memory file finds no room: ``disk I/O error``) on a full disk, the disk's."""
    failed_write = str(getattr(exc, "sqlite_errorname", "")).startswith(("SQLITE_FULL", "SQLITE_IOERR"))
    if failed_write and full(path.parent):
        disk = write_failure(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        return StoreUnreadable(f"cannot open the results store: {disk} (SQLite: {exc})", file=path)
    return StoreUnreadable(f"cannot open the results store: {exc}", file=path)


class ResultsStore(TrialStore, ReadQueries, Store):
    """The SQLite :class:`~emews.store.base.Store`: WAL mode, so a killed job loses at most the
    results not yet received.

    ``readonly`` opens without writing anything (``status``/``results`` on a running
    or read-only experiment); otherwise the schema (the training tables' too) is created or
    migrated if needed. ``root``: the experiment directory checkpoint paths are relative to.
    """

    def __init__(
        self, path: str | Path, *, durability: Durability = "normal", readonly: bool = False, root: Path | None = None
    ) -> None:
        self.path = Path(path)
        try:
            self._db = _connect_readonly(self.path) if readonly else self._connect(durability)
        except sqlite3.Error as exc:
            raise unopenable(self.path, exc) from None
        try:
            self._db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            self._check_version()
            if not readonly:
                self._migrate()
            self._check_columns(writing=not readonly)
            TrialStore.__init__(self, self._db, readonly=readonly, root=root, schema=False)  # made by _migrate
            if not readonly:
                self._relocate()
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error):
                raise unopenable(self.path, exc) from None
            raise

    @property
    def location(self) -> str:
        return str(self.path)

    def _connect(self, durability: Durability) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={_SYNCHRONOUS[durability]}")
        return db

    # -- the schema ------------------------------------------------------------
    def _check_version(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreNewer(version, SCHEMA_VERSION, file=self.path)

    def _migrate(self) -> None:
        """Create what is missing (the training tables too) and bring an older store to
        :data:`SCHEMA_VERSION`, in one transaction: a job killed while it migrates leaves the store
        of the old version or of the new one, never the new tables under the old version."""
        db = self._db
        with db:  # executescript commits what is pending, then begins this transaction
            db.executescript(f"BEGIN IMMEDIATE;\n{_SCHEMA}{TRIAL_SCHEMA}")
            if "ranks" not in column_names(db, "tasks"):  # version 0: before tasks had sizes
                db.execute("ALTER TABLE tasks ADD COLUMN ranks INTEGER NOT NULL DEFAULT 1")
            if "team_ranks" not in column_names(db, "results"):  # version 1: before teams were recorded
                db.execute("ALTER TABLE results ADD COLUMN team_ranks TEXT")
            if "seed" not in column_names(db, "results"):  # version 2: before results kept the task's seed
                db.execute("ALTER TABLE results ADD COLUMN seed INTEGER")
            if "report" not in column_names(db, "decisions"):  # version 3: before decisions named their report
                db.execute("ALTER TABLE decisions ADD COLUMN report INTEGER")
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _column_info(self, table: str) -> list[tuple[str, bool]]:
        """``(name, must be filled)`` for each column of ``table`` (empty: no such table): a
        column must be filled when it is NOT NULL without a default and not the key. The one
        catalogue read a backend overrides; :meth:`_check_columns` judges what it finds."""
        info = self._db.execute(f"PRAGMA table_info({table})").fetchall()
        return [(row[1], bool(row[3] and row[4] is None and not row[5])) for row in info]

    def _check_columns(self, *, writing: bool) -> None:
        """Every column this version reads is there; when ``writing``, every other one can be left
        to its default (a column of a newer version)."""
        for table, needed in (("results", COLUMNS), ("tasks", _TASK_COLUMNS)):
            info = self._column_info(table)
            if not info:
                continue  # a table an older store lacks: created when writing, read as empty
            present = {name for name, _ in info}
            missing = [c for c in needed if c not in present]
            if missing:
                raise StoreIncompatible(
                    f"table {table} has no column {missing[0]} (a store of another emews version?)",
                    file=self.location,
                )
            unfillable = [name for name, must_fill in info if must_fill and name not in needed]
            if writing and unfillable:
                raise StoreIncompatible(
                    f"table {table} has a column {unfillable[0]} that this emews cannot "
                    "fill (NOT NULL without a default: a store of a newer version?)",
                    file=self.location,
                )

    def made(self) -> bool:
        return self._has("results")

    def verify(self, *, writing: bool = False) -> None:
        """What opening checks, and a scan of every row (before a command that reads them all, or
        writes): :class:`StoreIncompatible` for a column this version cannot fill when ``writing``,
        :class:`StoreCorrupt` naming the first row it cannot read."""
        self._check_columns(writing=writing)
        statuses = ",".join(f"'{s.value}'" for s in Status)
        row = self._db.execute(
            f"SELECT id, status FROM results WHERE status NOT IN ({statuses}) ORDER BY id LIMIT 1"
        ).fetchone()
        if row is not None:
            raise _unknown_status(self.path, *row)
        for table, column in (("results", "params"), ("results", "metrics"), ("tasks", "params")):
            if table == "tasks" and not self._has("tasks"):
                continue
            # SQLite's json_valid is strict JSON; metrics may hold NaN and Infinity, which Python's
            # json writes and reads: the rows it refuses are read again as emews reads them
            suspects = self._db.execute(
                f"SELECT id, {column} FROM {table} WHERE CASE WHEN json_valid({column}) THEN "
                f"json_type({column}) END IS NOT 'object' ORDER BY id"
            )
            for id_, text in suspects:
                if not is_json_object(text):
                    raise StoreCorrupt(f"{column} is not a JSON object", file=self.path, key=f"{table} row id {id_}")

    # -- writing (the distributor thread only) --------------------------------
    def commit(self, tasks: Sequence[Task] = (), results: Sequence[Result] = ()) -> None:
        """Record dispatched ``tasks`` and finished ``results`` in one transaction."""
        if not tasks and not results:
            return
        with self._db:
            self._db.execute("BEGIN")
            if tasks:
                record_tasks(self._db, tasks)
            if results:
                self._db.executemany(_INSERT_RESULT, [_result_row(r) for r in results])

    def mark_attempted(self, ids: Sequence[int]) -> None:
        """Count one more attempt of each task in ``ids`` (they are being run again)."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("UPDATE tasks SET attempt = attempt + 1 WHERE id = ?", [(i,) for i in ids])

    # -- reading ---------------------------------------------------------------
    def __iter__(self) -> Iterator[Result]:
        cursor = self._db.execute(f"SELECT {','.join(COLUMNS)} FROM results ORDER BY id")
        for row in cursor:
            yield self._result(row)

    def task_seeds(self, ids: Sequence[int]) -> dict[int, int]:
        """Task id -> its ``ctx.seed``, for the ids among ``ids`` the store has one of: the result's
        (``results.seed``, schema 3), else the ``tasks`` row's (a task that ran long enough to get one)."""
        found: dict[int, int] = {}
        for table in ("tasks", "results"):  # a result's seed is read last: it wins
            if "seed" not in self._columns(table):
                continue
            for chunk, marks in in_slices(ids):
                rows = self._db.execute(
                    f"SELECT id, seed FROM {table} WHERE seed IS NOT NULL AND id IN ({marks})", chunk
                )
                found.update({i: int(seed) for i, seed in rows})
        return found

    def results_by_id(self, ids: Sequence[int]) -> list[Result]:
        """The stored results among ``ids``, by id (read in chunks: a statement's parameters are bounded)."""
        found: list[Result] = []
        unique = sorted(set(ids))
        for chunk, marks in in_slices(unique):
            cursor = self._db.execute(
                f"SELECT {','.join(COLUMNS)} FROM results WHERE id IN ({marks}) ORDER BY id", chunk
            )
            found += [self._result(row) for row in cursor]
        return found

    def unfinished(self) -> list[tuple[Task, int]]:
        """Tasks that were dispatched but have no result (with the ranks they ran on), and how
        often they were re-run."""
        if not self._has("tasks"):
            return []
        ranks = "t.ranks" if "ranks" in self._columns("tasks") else "1"
        rows = self._db.execute(
            f"SELECT t.id, t.params, t.seed, t.submitted, t.attempt, {ranks} FROM tasks t "
            "LEFT JOIN results r ON r.id = t.id WHERE r.id IS NULL ORDER BY t.id"
        )
        return [(Task(i, loads_point(p), s, sub, ranks=size), attempt) for i, p, s, sub, attempt, size in rows]

    def next_id(self) -> int:
        """One more than the largest task id ever issued in this experiment (:data:`TASK_ID_COLUMNS`)."""
        present = {t for t, _ in TASK_ID_COLUMNS if self._has(t)}
        top = max(
            (self._db.execute(f"SELECT MAX({c}) FROM {t}").fetchone()[0] or -1)
            for t, c in TASK_ID_COLUMNS
            if t in present
        )
        return top + 1

    def status_counts(self) -> dict[str, int]:
        return dict(self._db.execute("SELECT status, COUNT(*) FROM results GROUP BY status"))

    def best(self) -> Result | None:
        """The successful evaluation with the smallest loss."""
        row = self._db.execute(
            f"SELECT {','.join(COLUMNS)} FROM results WHERE status = 'ok' "
            "AND loss IS NOT NULL ORDER BY loss, id LIMIT 1"
        ).fetchone()
        return None if row is None else self._result(row)

    def _result(self, row: Sequence) -> Result:
        """A row of ``results`` (:data:`COLUMNS`) as a :class:`Result` (:class:`StoreCorrupt` if it cannot be)."""
        id_, status, params, metrics = row[0], row[1], row[4], row[5]
        try:
            status = Status(status)
        except ValueError:
            raise _unknown_status(self.path, id_, status) from None
        try:
            point, extra = loads_point(params), loads_metrics(metrics)
        except ValueError as exc:
            raise StoreCorrupt(
                f"params or metrics is not JSON: {exc}", file=self.path, key=f"results row id {id_}"
            ) from None
        return row_result(row, status, point, extra)

    def metric_names(self) -> list[str]:
        """Every metric key in the store, in order of first appearance."""
        names: dict[str, None] = {}
        for (metrics,) in self._db.execute("SELECT metrics FROM results WHERE metrics != '{}' ORDER BY id"):
            names.update(dict.fromkeys(loads_metrics(metrics)))
        return list(names)

    @property
    def connection(self) -> sqlite3.Connection:
        """The SQLite connection (tests and benchmarks build stores of other versions through it)."""
        return self._db

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ResultsStore:
        return self


def _unknown_status(path: Path, id_: object, status: object) -> StoreCorrupt:
    return StoreCorrupt(
        f"unknown status {status!r}", file=path, key=f"results row id {id_}", allowed=", ".join(s.value for s in Status)
    )


def _result_row(r: Result) -> tuple:
    return (
        r.id,
        r.status.value,
        r.objective,
        None if math.isinf(r.loss) else r.loss,
        dumps_point(r.params),
        _encode(r.metrics) if r.metrics else "{}",
        r.error,
        r.rank,
        r.host,
        r.submitted,
        r.started,
        r.finished,
        _encode(list(r.team)) if r.team is not None and len(r.team) > 1 else None,
        r.seed,
    )


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """Open without any write: ``mode=ro``, or ``immutable`` when even the WAL index cannot be made."""
    if not path.is_file():
        raise sqlite3.OperationalError("no such file")
    uri = "file:" + quote(str(path.absolute()))
    try:
        db = sqlite3.connect(uri + "?mode=ro", uri=True, check_same_thread=False)
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        return sqlite3.connect(uri + "?immutable=1", uri=True, check_same_thread=False)


def leave_wal(path: Path) -> bool:
    """Put the SQLite store ``path`` back in rollback-journal mode once a run has ended: its
    ``results.db-wal`` is checkpointed and removed with ``results.db-shm``, and the read-only
    openings of ``status``, ``results`` and ``report`` create neither again (a WAL store's reader
    makes both, and cannot remove them). The next writer (``resume``) turns WAL on again. False,
    and nothing changed, while another process has the store open (or it cannot be written)."""
    if not path.is_file():
        return False
    try:
        db = sqlite3.connect(path, timeout=0, isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        return str(db.execute("PRAGMA journal_mode=DELETE").fetchone()[0]).lower() == "delete"
    except sqlite3.Error:
        return False
    finally:
        db.close()
