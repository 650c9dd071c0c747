"""The PostgreSQL backend of :class:`~emews.store.base.Store` (psycopg 3, the ``postgres`` extra).

One experiment is one PostgreSQL schema (its name is recorded in ``experiment.json``): the
connection's ``search_path`` is that schema, so the statements the two backends share run
unchanged and one experiment's store never reads another's rows. The tables and their columns
are the SQLite store's (:mod:`emews.store.postgres_queries`); the schema's version is kept in
``emews_meta`` and checked on every opening, as SQLite's ``user_version`` is.

:class:`PgConnection` gives psycopg the shape of the ``sqlite3`` connection the shared code
drives: ``?`` placeholders, ``INSERT OR IGNORE``, ``BEGIN`` then ``with db:`` to commit, and
``lastrowid``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterable, Sequence
from pathlib import Path
from typing import Any

from emews.core.build import Build, current_build
from emews.core.results import Status
from emews.store import postgres_queries as q
from emews.store.base import (
    CsvRow,
    Durability,
    LeaseLost,
    StoreCorrupt,
    StoreNewer,
    StoreUnreadable,
    is_json_object,
)
from emews.store.queries import csv_seed
from emews.store.results_store import ResultsStore
from emews.store.trial_store import TrialStore

_NO_END = 2**63 - 1
_OR_IGNORE = re.compile(r"^\s*INSERT OR IGNORE INTO (.*)$", re.S)

try:  # the ``postgres`` extra
    import psycopg
    from psycopg import sql as pgsql
except ImportError:  # pragma: no cover - reported when a PostgreSQL store is opened
    psycopg = None  # type: ignore[assignment]


def _translate(statement: str) -> str:
    """An SQLite statement of the shared code in PostgreSQL's dialect (``%s`` placeholders)."""
    ignored = _OR_IGNORE.match(statement)
    if ignored:
        statement = f"INSERT INTO {ignored.group(1)} ON CONFLICT DO NOTHING"
    return statement.replace("%", "%%").replace("?", "%s")


class _Inserted:
    """An INSERT's cursor with ``lastrowid``: the identity value it took (``lastval()``)."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    @property
    def lastrowid(self) -> int:
        return int(self._cursor.connection.execute(q.LAST_SEQ).fetchone()[0])


def without_nul(text: str) -> str:
    """``text`` with a NUL written as U+FFFD, as undecodable bytes already are: PostgreSQL's text
    has no NUL and would refuse the statement (an error quoting a command's stderr may hold one);
    SQLite stores it as it is. Every text the PostgreSQL store writes passes here."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _without_nul(params: Sequence[Any]) -> tuple[Any, ...]:
    """``params`` with each string :func:`without_nul`."""
    return tuple(without_nul(p) if isinstance(p, str) else p for p in params)


class PgConnection:
    """A psycopg connection (autocommit: each statement its own transaction) driven like the
    ``sqlite3`` one: ``execute("BEGIN")`` opens a transaction that ``with conn:`` commits (rolls
    back on an error), ``?`` placeholders, ``INSERT OR IGNORE``."""

    def __init__(self, conn: Any) -> None:
        self.raw = conn
        self._open = False

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        if statement == "BEGIN":
            self.raw.execute("BEGIN")
            self._open = True
            return None
        cursor = self.raw.execute(_translate(statement), _without_nul(params))
        return _Inserted(cursor) if statement.lstrip().upper().startswith("INSERT") else cursor

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> Any:
        cursor = self.raw.cursor()
        rows = [_without_nul(r) for r in rows]
        if rows:
            cursor.executemany(_translate(statement), rows)
        return cursor

    def __enter__(self) -> PgConnection:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if self._open:
            self._open = False
            self.raw.execute("ROLLBACK" if kind is not None else "COMMIT")

    def close(self) -> None:
        self.raw.close()


def connect(url: str) -> Any:
    """A psycopg connection to ``url`` (autocommit); :class:`StoreUnreadable` in one line when it
    cannot be made or psycopg is not installed."""
    if psycopg is None:
        raise StoreUnreadable("a PostgreSQL store needs psycopg: pip install 'emews-mpi[postgres]'", key="store.url")
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10, application_name="emews")
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise StoreUnreadable(f"cannot connect to {url}: {reason}", key="store.url") from None


def _set_session(raw: Any, schema: str, readonly: bool, durability: Durability) -> None:
    """The session's settings: the experiment's schema, durability, read-only, and a plan made for
    each execution's own parameters. psycopg prepares a statement run five times, and the server
    would then keep one generic plan for it: planned while the experiment's tables were empty, it
    reads them whole (a sequential scan for ``id = ANY(...)``: 22 ms per read of 100 results at
    20k rows in the pools' benchmark, where the index takes 0.1 ms), until an ANALYZE that a short
    run never sees. A custom plan costs a fraction of a millisecond per batch statement. Floats
    as text are exact whatever the server's default (``extra_float_digits``): the results a pool
    announces travel as JSON text (:mod:`emews.store.pool_queue`)."""
    raw.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
    raw.execute("SET plan_cache_mode TO force_custom_plan")
    raw.execute("SET extra_float_digits TO 3")
    if durability == "off":
        raw.execute("SET synchronous_commit TO off")
    if readonly:
        raw.execute("SET default_transaction_read_only TO on")


class PostgresStore(ResultsStore):
    """The PostgreSQL :class:`~emews.store.base.Store` of one experiment: schema ``schema`` of the
    database at ``url``. It shares the SQLite store's statements (through :class:`PgConnection`)
    and overrides what differs: the schema, the catalogue and a few reads. ``readonly``: the
    session is read-only and nothing is created."""

    def __init__(
        self,
        url: str,
        schema: str,
        *,
        readonly: bool = False,
        root: Path | None = None,
        durability: Durability = "normal",
    ) -> None:
        self.url, self.schema = url, schema
        self._present: set[str] = set()
        self.path = Path(self.location)  # messages name the store by its location
        raw = connect(url)
        self._db = PgConnection(raw)  # type: ignore[assignment]
        try:
            self._open(readonly, durability)
            TrialStore.__init__(self, self._db, readonly=readonly, root=root, schema=False)  # type: ignore[arg-type]
        except BaseException as exc:
            raw.close()
            if isinstance(exc, psycopg.Error):
                raise StoreUnreadable(
                    f"cannot open the results store {self.location}: {' '.join(str(exc).split())}", key="store.url"
                ) from None
            raise

    def _open(self, readonly: bool, durability: Durability) -> None:
        self._session = (readonly, durability)  # what :meth:`reconnect` sets again
        raw = self._db.raw  # type: ignore[attr-defined]
        exists = raw.execute(q.SCHEMA_EXISTS, (self.schema,)).fetchone() is not None
        if not exists and readonly:
            raise StoreUnreadable(
                f"the database has no schema {self.schema} (the experiment's store)", file=self.location
            )
        if not exists:
            raw.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(self.schema)))
        _set_session(raw, self.schema, readonly, durability)
        self._check_version()
        if not readonly:
            self._migrate()
        self._check_columns(writing=not readonly)

    @property
    def location(self) -> str:
        return f"{self.url}#{self.schema}"

    def reconnect(self) -> None:
        """Replace a lost connection by a new one to the same schema, with the session's settings
        (durability, read-only); a caller that LISTENed listens again. :class:`StoreUnreadable`
        when the server cannot be reached."""
        try:
            self._db.raw.close()  # type: ignore[attr-defined]
        except Exception:  # already broken: nothing to close cleanly
            pass
        raw = connect(self.url)
        readonly, durability = self._session
        try:
            _set_session(raw, self.schema, readonly, durability)
        except BaseException:
            raw.close()
            raise
        self._db = PgConnection(raw)  # type: ignore[assignment]

    def _require_held(self, task: int, pool: int) -> None:
        """:class:`LeaseLost` unless ``pool`` still holds ``task`` in the shared queue (docs/postgres.md,
        "Pools"): leased to it, its lease renewed or ended but not yet taken by another pool. The
        task's row stays locked until the caller's transaction ends: a claim skips it meanwhile
        (``SKIP LOCKED``), and one that took it first is waited for, then seen."""
        row = self._db.execute(
            "SELECT 1 FROM tasks WHERE id = ? AND pool = ? AND state = 'leased' FOR UPDATE", (task, pool)
        )
        if row.fetchone() is None:
            raise LeaseLost(f"pool {pool} no longer holds task {task}: another pool took it")

    @property
    def connection(self) -> Any:  # type: ignore[override]
        """The psycopg connection (tests build stores of other versions through it)."""
        return self._db.raw  # type: ignore[attr-defined]

    # -- the schema ------------------------------------------------------------
    def _version(self) -> int | None:
        if not self._has("emews_meta"):
            return None
        row = self._db.raw.execute(q.GET_VERSION).fetchone()  # type: ignore[attr-defined]
        return None if row is None else int(row[0])

    @property
    def schema_version(self) -> int | None:
        """The version of the schema as stored (``None``: no tables yet)."""
        return self._version()

    def _check_version(self) -> None:
        version = self._version()
        if version is not None and version > q.SCHEMA_VERSION:
            raise StoreNewer(version, q.SCHEMA_VERSION, file=self.location, made_by=self._build())

    def _build(self) -> Build | None:
        """The emews that created or last migrated the schema, as its meta names it (``None``: an emews
        before the schema kept it)."""
        row = self._db.raw.execute(q.GET_BUILD).fetchone()  # type: ignore[attr-defined]
        try:
            return Build.from_record(json.loads(row[0])) if row is not None else None
        except ValueError:
            return None

    def _migrate(self) -> None:
        """Create what is missing and bring an older schema to :data:`~emews.store.postgres_queries.SCHEMA_VERSION`
        (each step of :data:`~emews.store.postgres_queries.MIGRATIONS` in one transaction with the new version).
        A store of this version with every table runs no DDL: ``ALTER TABLE ... IF NOT EXISTS`` locks
        its table exclusively even when there is nothing to add, so a pool that attached mid-run
        stopped the other pools' statements and could deadlock with one (the server broke it after
        ``deadlock_timeout``, 1 s, the statement then retried on a new connection). Likewise a
        store with every table whose pending steps change no table (version 5) only has its
        version set: :data:`~emews.store.postgres_queries.SCHEMA` changes only with a step."""
        raw = self._db.raw  # type: ignore[attr-defined]
        version = self._version()
        complete = set(q.TABLE_NAMES) <= self._tables()
        if version == q.SCHEMA_VERSION and complete:
            return
        pending = range((version or 0) + 1, q.SCHEMA_VERSION + 1)
        with raw.transaction():
            if version is None or not complete or any(q.MIGRATIONS.get(step) for step in pending):
                raw.execute(q.SCHEMA)
            raw.execute(q.SET_BUILD, (json.dumps(current_build().record()),))
            if version is None:  # a new store: created at the current version
                raw.execute(q.SET_VERSION, (str(q.SCHEMA_VERSION),))
                return
            for step in pending:
                for statement in q.MIGRATIONS.get(step, ()):
                    raw.execute(statement)
                raw.execute(q.SET_VERSION, (str(step),))

    def _column_info(self, table: str) -> list[tuple[str, bool]]:
        rows = self._db.raw.execute(q.COLUMNS, (table,)).fetchall()  # type: ignore[attr-defined]
        return [(name, bool(not_null and not default)) for name, not_null, default in rows]

    def verify(self, *, writing: bool = False) -> None:
        self._check_columns(writing=writing)
        if not self._has("results"):
            return
        row = self._db.raw.execute(q.UNKNOWN_STATUS, ([s.value for s in Status],)).fetchone()  # type: ignore[attr-defined]
        if row is not None:
            raise StoreCorrupt(
                f"unknown status {row[1]!r}",
                file=self.location,
                key=f"results row id {row[0]}",
                allowed=", ".join(s.value for s in Status),
            )
        for table, column in (("results", "params"), ("results", "metrics"), ("tasks", "params")):
            if not self._has(table):
                continue
            for id_, text in self._db.execute(f"SELECT id, {column} FROM {table} ORDER BY id"):
                if not is_json_object(text):
                    raise StoreCorrupt(
                        f"{column} is not a JSON object", file=self.location, key=f"{table} row id {id_}"
                    )

    def _relocate(self) -> None:
        """Nothing to rewrite: a PostgreSQL store keeps checkpoint paths relative from its start."""

    # -- the catalogue and the reads written in each dialect --------------------------
    def _has(self, table: str) -> bool:
        """Whether the experiment's schema has ``table`` (a table once there stays: remembered)."""
        if table in self._present:
            return True
        found = self._db.raw.execute(q.HAS_TABLE, (table,)).fetchone() is not None  # type: ignore[attr-defined]
        if found:
            self._present.add(table)
        return found

    def _tables(self) -> set[str]:
        return {name for (name,) in self._db.raw.execute(q.TABLES)}  # type: ignore[attr-defined]

    def _columns(self, table: str) -> list[str]:
        return [name for name, *_ in self._db.raw.execute(q.COLUMNS, (table,))]  # type: ignore[attr-defined]

    def param_keys(self) -> list[str]:
        return [key for (key,) in self._db.raw.execute(q.PARAM_KEYS)]  # type: ignore[attr-defined]

    def csv_rows(self, first_id: int, end_id: int | None = None) -> Generator[CsvRow, None, None]:
        seed, join = csv_seed(self._columns("results"), self._tables())
        cursor = self._db.raw.execute(  # type: ignore[attr-defined]
            f"{q.CSV_COLUMNS}, {seed} FROM results r {join} {q.CSV_RANGE}",
            (first_id, _NO_END if end_id is None else end_id),
        )
        try:
            yield from cursor
        finally:
            cursor.close()

    def _checkpoint_source(self, present: set[str]) -> tuple[str, str] | None:
        if "checkpoints" not in present:
            return None
        if self._db.execute("SELECT 1 FROM checkpoints WHERE state = 'durable' LIMIT 1").fetchone() is None:
            return None
        return "c.path", q.latest_checkpoint("WHERE state = 'durable'")

    def close(self) -> None:
        self._db.close()
