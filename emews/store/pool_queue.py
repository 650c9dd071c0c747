"""The shared task queue of an experiment's worker pools (PostgreSQL only; docs/postgres.md, "Pools").

The optimizer's side queues tasks (:meth:`PoolQueue.enqueue`); each pool registers
(:meth:`PoolQueue.register`), claims batches under a lease (:meth:`PoolQueue.claim`: ``FOR UPDATE
SKIP LOCKED``, so two pools never get the same task), keeps its lease alive by heartbeat
(:meth:`PoolQueue.renew`) and writes outcomes back (:meth:`PoolQueue.complete`), which stores one
result per task id, whoever sends it first, and notifies the experiment's channel so a listener
learns of results without polling (:meth:`PoolQueue.wait`). A lease that ends unrenewed returns
its tasks to the queue under the same ids (:meth:`PoolQueue.requeue_expired`, and
:meth:`PoolQueue.claim` takes such tasks itself). Times are the server's clock, so pools on hosts
whose clocks differ agree on when a lease ends.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from emews.core.errors import ConfigError, EmewsError
from emews.core.jsoncodec import dumps_point, loads_point
from emews.core.lost_ranks import LostRank
from emews.core.results import Result, Status, Task
from emews.store import postgres_queries as q
from emews.store.base import Store, StoreUnreadable
from emews.store.postgres import PostgresStore, without_nul
from emews.store.results_store import COLUMNS, WRITTEN_COLUMNS, _result_row, row_result

log = logging.getLogger("emews")

_NOW = "extract(epoch from clock_timestamp())::double precision"
#: ``emews_meta`` keys: the experiment runs its tasks through pools; its optimizer finished
POOL_MODE, FINISHED = "pools", "pools_finished"
#: the optimizer said it is done (:meth:`PoolQueue.finish`): a task whose lease ends after that (its
#: pool died holding it) is cancelled, as the ones queued or past their lease then were: nothing
#: runs it, it is not pending work, and the next optimizer finds it cancelled
_DONE = f"EXISTS (SELECT 1 FROM emews_meta WHERE key = '{FINISHED}')"

#: a whole batch in one statement (its rows as one JSON array: one parameter, parsed by the server)
#: and one NOTIFY: pools waiting for work wake
_ENQUEUE = """
WITH queued AS (
    INSERT INTO tasks (id, params, seed, submitted, attempt, ranks, state, priority)
    SELECT (e->>0)::bigint, e->>1, (e->>2)::bigint, (e->>3)::float8, (e->>4)::bigint, (e->>5)::bigint, 'queued',
        (e->>6)::float8
    FROM jsonb_array_elements(%s::jsonb) e
    ON CONFLICT (id) DO UPDATE SET state = 'queued', priority = EXCLUDED.priority WHERE tasks.state IS NULL
    RETURNING 1)
SELECT pg_notify(%s, ''), (SELECT count(*) FROM queued)
"""
_REGISTER = (
    f"INSERT INTO pools (site, job_id, host, workers, hold, started, heartbeat) "
    f"VALUES (%s, %s, %s, %s, %s, {_NOW}, {_NOW}) RETURNING id"
)
#: the statement's start: stable within it, so that an index can take ``lease_until < now``
_STARTED = "extract(epoch from statement_timestamp())::double precision"
#: a claim, as common table expressions (``claimed``): the first ``n`` claimable tasks of at most
#: ``fits`` ranks, highest priority first, then lowest id, locked or skipped (``SKIP LOCKED``). A
#: leased task whose lease ended is claimable as a queued one; claiming it counts one more attempt.
#: Each state has its index (``tasks_queued``, ``tasks_leases``), so neither part walks the tasks
#: other pools hold. ``ids``: tasks this statement completes, never claimed by it.
_CLAIMING = f"""
queued AS (
    SELECT id, priority FROM tasks WHERE state = 'queued' AND ranks <= %(fits)s AND id <> ALL(%(ids)s::bigint[])
    ORDER BY priority DESC, id LIMIT %(n)s FOR UPDATE SKIP LOCKED),
expired AS (
    SELECT id, priority FROM tasks WHERE state = 'leased' AND lease_until < {_STARTED} AND ranks <= %(fits)s
        AND id <> ALL(%(ids)s::bigint[]) AND NOT {_DONE}
    ORDER BY priority DESC, id LIMIT %(n)s FOR UPDATE SKIP LOCKED),
chosen AS (SELECT id FROM (SELECT * FROM queued UNION ALL SELECT * FROM expired) c ORDER BY priority DESC, id LIMIT %(n)s),
claimed AS (
    UPDATE tasks t SET state = 'leased', pool = %(pool)s, lease_until = {_NOW} + %(lease)s,
        attempt = CASE WHEN t.state = 'leased' THEN t.attempt + 1 ELSE t.attempt END
    FROM chosen c WHERE t.id = c.id
    RETURNING t.id, t.params, t.seed, t.submitted, t.attempt, t.ranks, t.priority)"""
_CLAIM = f"WITH {_CLAIMING}\nSELECT * FROM claimed"
_RENEW_POOL = f"UPDATE pools SET heartbeat = {_NOW} WHERE id = %s"
_SET_HOLD = "UPDATE pools SET hold = %s WHERE id = %s"
_RENEW_TASKS = f"UPDATE tasks SET lease_until = {_NOW} + %s WHERE pool = %s AND state = 'leased' AND id = ANY(%s)"
_REQUEUE = (
    f"UPDATE tasks SET state = 'queued', pool = NULL, lease_until = NULL, attempt = attempt + 1 "
    f"WHERE state = 'leased' AND lease_until < {_NOW} RETURNING id"
)
#: A notification of stored results carries them (:class:`Announced`): a JSON array whose items are
#: each a result's row (:data:`COLUMNS`, as ``json_build_array`` writes it) or, for a row longer than
#: NOTE_ROW_MAX bytes or one stored by an earlier try of the same batch, its id alone (the listener
#: reads it). PostgreSQL's payloads end below 8,000 bytes: items go into a notification while the
#: bytes before them are under NOTE_PART, so one holds at most NOTE_PART + NOTE_ROW_MAX + 1 bytes.
NOTE_ROW_MAX = 2000
NOTE_PART = 5990
if NOTE_PART + NOTE_ROW_MAX + 1 >= 8000:
    raise ImportError(f"a notification of {NOTE_PART} + {NOTE_ROW_MAX} + 1 bytes is over PostgreSQL's 8,000")
_RESULT_TYPES = {
    "id": "bigint", "status": "text", "objective": "float8", "loss": "float8", "params": "text", "metrics": "text",
    "error": "text", "rank": "bigint", "host": "text", "submitted": "float8", "started": "float8",
    "finished": "float8", "team_ranks": "text", "seed": "bigint",
}  # fmt: skip
if tuple(_RESULT_TYPES) != WRITTEN_COLUMNS:  # the arrays of _COMPLETE follow _result_row's columns
    raise ImportError(f"pool_queue's result columns {tuple(_RESULT_TYPES)} differ from the store's {WRITTEN_COLUMNS}")
_RESULT_COLUMNS = ", ".join(f"(e->>{i})::{kind} AS {name}" for i, (name, kind) in enumerate(_RESULT_TYPES.items()))
#: a batch of results in one statement: the rows (one JSON array; the first result per id stands),
#: the tasks done, the pool's count and heartbeat, and the stored results announced (NOTE_PART).
#: The ids stored by this pool: those inserted now and those it stored before (a retry after a lost
#: commit finds them too; ``before`` reads the table as it was when the statement began, so the two
#: never share an id; a result stored before is announced by id: this batch's row may not be it)
_COMPLETING = f"""
WITH incoming AS (SELECT {_RESULT_COLUMNS} FROM jsonb_array_elements(%(rows)s::jsonb) e),
inserted AS (
    INSERT INTO results ({", ".join(_RESULT_TYPES)}, pool) SELECT *, %(pool)s FROM incoming
    ON CONFLICT (id) DO NOTHING RETURNING id, json_build_array({", ".join(COLUMNS)})::text AS note),
before AS (SELECT id FROM results WHERE id = ANY(%(ids)s::bigint[]) AND pool = %(pool)s),
stored AS (SELECT id FROM inserted UNION SELECT id FROM before),
items AS (
    SELECT id, CASE WHEN octet_length(note) <= {NOTE_ROW_MAX} THEN note ELSE id::text END AS item FROM inserted
    UNION ALL SELECT id, id::text FROM before),
done AS (
    UPDATE tasks SET state = 'done', pool = COALESCE(pool, %(pool)s), lease_until = NULL
    WHERE id = ANY(%(ids)s::bigint[])),
counted AS (
    UPDATE pools SET tasks_done = tasks_done + (SELECT count(*) FROM inserted), heartbeat = {_NOW}
    WHERE id = %(pool)s),
notified AS (
    SELECT pg_notify(%(channel)s, '[' || string_agg(item, ',') || ']') FROM
        (SELECT item, (sum(octet_length(item) + 1) OVER (ORDER BY id) - octet_length(item) - 1) / {NOTE_PART} AS part
         FROM items) s GROUP BY part)"""
_COMPLETE = f"{_COMPLETING}\nSELECT (SELECT array_agg(id ORDER BY id) FROM stored), (SELECT count(*) FROM notified)"
#: a batch of results and the next claim in one statement (one round trip): the stored ids and the
#: number of notifications on every row, with one claimed task per row (none: one row of NULLs)
_COMPLETE_CLAIM = f"""{_COMPLETING},{_CLAIMING}
SELECT s.stored, s.notes, c.* FROM
    (SELECT (SELECT array_agg(id ORDER BY id) FROM stored) AS stored, (SELECT count(*) FROM notified) AS notes) s
    LEFT JOIN claimed c ON true"""
#: the results of the ids given as one array literal
_RESULTS = f"SELECT {', '.join(COLUMNS)} FROM results WHERE id = ANY(%s::bigint[]) ORDER BY id"
_STATUS = {status.value: status for status in Status}
_STOP = f"UPDATE pools SET stopped = {_NOW} WHERE id = %s"
#: tasks a stopping pool hands back (those it still holds): queued again at once, those a worker
#: got with one more attempt, as when their lease ends (:data:`_REQUEUE`); those only taken ahead
#: were not run, and keep theirs
_RELEASE = (
    "UPDATE tasks SET state = 'queued', pool = NULL, lease_until = NULL, "
    "attempt = attempt + CASE WHEN id = ANY(%s::bigint[]) THEN 1 ELSE 0 END "
    "WHERE pool = %s AND state = 'leased' AND id = ANY(%s::bigint[]) RETURNING id"
)
_POOLS = "SELECT id, site, job_id, host, workers, tasks_done, started, heartbeat, stopped FROM pools ORDER BY id"
_SET_META = "INSERT INTO emews_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
_GET_META = "SELECT value FROM emews_meta WHERE key = %s"
_DEL_META = "DELETE FROM emews_meta WHERE key = %s"
_QUEUED = "SELECT count(*) FROM tasks WHERE state = 'queued' OR state = 'leased'"
_CANCEL_QUEUED = "UPDATE tasks SET state = 'cancelled' WHERE state = 'queued' RETURNING id"
_CANCEL_LEFT = (
    f"UPDATE tasks SET state = 'cancelled' WHERE state = 'queued' OR (state = 'leased' AND lease_until < {_NOW})"
)
_CANCEL_ENDED = f"UPDATE tasks SET state = 'cancelled' WHERE state = 'leased' AND lease_until < {_NOW}"
#: the optimizer's lock: emews' key and the experiment schema's oid (unique in the database)
_LOCK_KEY = "(SELECT 7468 AS a, oid::int AS b FROM pg_namespace WHERE nspname = %s) k"
_CANCEL_IDS = "UPDATE tasks SET state = 'cancelled' WHERE state = 'queued' AND id = ANY(%s)"
_CANCELLED_AMONG = "SELECT id FROM tasks WHERE state = 'cancelled' AND id = ANY(%s)"
_CANCELLED = "SELECT id FROM tasks WHERE state = 'cancelled'"
_LIVE_HOLD = (
    f"SELECT COALESCE(SUM(h), 0), COALESCE(MAX(h), 0) FROM (SELECT GREATEST(workers, COALESCE(hold, workers)) AS h "
    f"FROM pools WHERE stopped IS NULL AND heartbeat > {_NOW} - %s) p"
)
#: ``emews_meta`` key prefix: ``pool_busy.ID``, the worker ranks pool ID said run a task now
#: (a key, not a column: no schema change; a pool of an older emews says nothing)
BUSY_KEY = "pool_busy."
_BUSY = "SELECT substr(key, length(%s) + 1)::bigint, value::bigint FROM emews_meta WHERE starts_with(key, %s)"
#: ``emews_meta`` key prefix: ``pool_lost.ID``, the worker ranks pool ID went on without (a JSON array
#: of :class:`~emews.core.lost_ranks.LostRank` records, its pool named): the summary of the run counts
#: every pool's (a key, not a column: no schema change)
LOST_KEY = "pool_lost."
_META_VALUES = "SELECT substr(key, length(%s) + 1)::bigint, value FROM emews_meta WHERE starts_with(key, %s)"
#: ``emews_meta`` key prefix: ``pool_process.ID``, pool ID's rank 0 as ``PID START`` (its start time
#: in clock ticks since boot, as the experiment's lease records its owners): ``emews status`` on the
#: pool's host sees it ended without stopping (a key, not a column: no schema change)
PROCESS_KEY = "pool_process."
_PROCESSES = "SELECT substr(key, length(%s) + 1)::bigint, value FROM emews_meta WHERE starts_with(key, %s)"
#: per pool, the tasks leased to it, their lease ended or not (not yet taken by another pool)
_HOLDING_BY_POOL = "SELECT pool, count(*) FROM tasks WHERE state = 'leased' GROUP BY pool"
#: per pool, when the last lease of the tasks leased to it ends (the server's clock, epoch seconds)
_LEASES_END_BY_POOL = "SELECT pool, max(lease_until) FROM tasks WHERE state = 'leased' GROUP BY pool"
#: the tasks leased under a lease not ended (a pool runs them, or is about to)
_HELD = f"SELECT id FROM tasks WHERE state = 'leased' AND lease_until >= {_NOW}"
#: per running pool, the tasks it holds under a lease not ended
_LEASED_BY_POOL = f"SELECT pool, count(*) FROM tasks WHERE state = 'leased' AND lease_until >= {_NOW} GROUP BY pool"


class StoreLost(EmewsError):
    """The connection to the store was lost and could not be made again within the retry time."""


_T = TypeVar("_T")


def _connection_errors() -> tuple[type[BaseException], ...]:
    import psycopg

    return (psycopg.OperationalError, psycopg.InterfaceError, StoreUnreadable)


def _rolled_back(exc: BaseException) -> bool:
    """Whether the server rolled the transaction back (a deadlock broken, a serialization
    conflict: SQLSTATE class 40) and the connection is still good."""
    return str(getattr(exc, "sqlstate", None) or "").startswith("40")


def retried(operation: Callable[..., _T]) -> Callable[..., _T]:
    """Run a :class:`PoolQueue` operation again on a new connection when the connection is lost
    (a server restart, a network cut, a terminated backend), backing off from 0.1 s to 5 s, until
    the queue's ``retry_s`` has passed: then :class:`StoreLost`. A transaction the server rolled
    back to break a deadlock or a serialization conflict (SQLSTATE class 40) runs again at once on
    the same connection, which is fine. Every operation may run twice: inserts are keyed by task
    id, updates set states, a claim whose answer was lost expires."""

    @functools.wraps(operation)
    def again(self: PoolQueue, /, *args: Any, **kwargs: Any) -> _T:
        lost = _connection_errors()
        deadline: float | None = None
        delay = 0.1
        while True:
            try:
                return operation(self, *args, **kwargs)
            except lost as exc:
                now = time.monotonic()
                if _rolled_back(exc) and (deadline is None or now < deadline):
                    deadline = now + self.retry_s if deadline is None else deadline
                    log.info("store transaction rolled back (%s); running it again", type(exc).__name__)
                    continue
                deadline = now + self.retry_s if deadline is None else deadline
                if now >= deadline:
                    raise StoreLost(
                        f"lost the connection to the store {self.store.location} for {self.retry_s:g} s: "
                        + (" ".join(str(exc).split()) or type(exc).__name__)
                    ) from None
                log.warning("store connection lost (%s); connecting again in %.1f s", type(exc).__name__, delay)
                time.sleep(min(delay, deadline - now))
                delay = min(delay * 2, 5.0)
                try:
                    self.reconnect()
                except lost:
                    continue

    return again


class OptimizerRunning(ConfigError):
    """Another optimizer serves this experiment (its connection holds the experiment's lock)."""


@dataclass(frozen=True)
class PoolRow:
    """One pool of the experiment, as the ``pools`` table has it."""

    id: int
    site: str
    job_id: str | None
    host: str | None
    workers: int
    tasks_done: int
    started: float | None
    heartbeat: float | None
    stopped: float | None


@dataclass(frozen=True)
class Announced:
    """What the results channel announced (:meth:`PoolQueue.receive`): results carried whole, as
    their stored rows by id (read with :meth:`PoolQueue.carried`), and the ids of results announced
    without them (too long for a notification, or stored by an earlier try): read those with
    :meth:`PoolQueue.results`. Nothing when a pool's start or end was announced."""

    rows: Mapping[int, Sequence[Any]]
    ids: Sequence[int]

    @property
    def every_id(self) -> list[int]:
        """The ids of every result announced, carried or not."""
        return [*self.rows, *self.ids]


@dataclass(frozen=True)
class Claimed:
    """A task a pool holds under lease, how often it was started before, and its priority."""

    task: Task
    attempt: int
    priority: float


class PoolQueue:
    """The queue/lease operations on one experiment's PostgreSQL store (one connection each:
    a pool's distributor and the optimizer's listener hold their own)."""

    def __init__(
        self, store: PostgresStore, *, retry_s: float = 120.0, host_clock: Callable[[], float] = time.time
    ) -> None:
        if not isinstance(store, PostgresStore):
            raise TypeError("worker pools need a PostgreSQL store (store.url)")
        self.store = store
        self._listening: list[str] = []  # channels to LISTEN on again after a reconnect
        self._locked = False  # this connection holds the optimizer lock (taken again after a reconnect)
        #: seconds a lost connection is tried again before :class:`StoreLost`
        self.retry_s = retry_s
        #: this host's clock, in which a pool takes the times it records (:meth:`say_lost`)
        self.host_clock = host_clock
        self.channel = store.schema  # one NOTIFY channel per experiment schema: results stored
        self.tasks_channel = f"{store.schema}.tasks"  # ... and tasks queued

    @property
    def _raw(self) -> Any:
        return self.store.connection

    def fileno(self) -> int:
        """The connection's socket: readable when a notification may have come (see :meth:`pending`)."""
        return int(self._raw.fileno())

    # -- the experiment's mode ---------------------------------------------------------
    @retried
    def enable(self) -> None:
        """Mark the experiment as one whose tasks run through pools (``emews launch --pools``), and
        not finished (a resumed optimizer queues again)."""
        with self._raw.transaction():
            self._raw.execute(_SET_META, (POOL_MODE, "1"))
            if self._raw.execute(_GET_META, (FINISHED,)).fetchone() is not None:
                self._raw.execute(_CANCEL_ENDED)  # what the finished run's dead pools held: cancelled (_DONE)
            self._raw.execute(_DEL_META, (FINISHED,))

    def lock_optimizer(self) -> None:
        """Hold the experiment's optimizer lock for as long as this connection lives (a session
        advisory lock: the server releases it when the connection ends, however it ends);
        :class:`OptimizerRunning` when another connection holds it."""
        self._locked = bool(
            self._raw.execute(f"SELECT pg_try_advisory_lock(k.a, k.b) FROM {_LOCK_KEY}", (self.channel,)).fetchone()[0]
        )
        if not self._locked:
            raise self._served()

    def _served(self) -> OptimizerRunning:
        return OptimizerRunning(
            "another optimizer serves this experiment (emews launch, resume or serve on some host)",
            file=self.store.location,
            key="optimizer lock",  # the command refused names itself (rank_zero.take_optimizer_lock)
            allowed="one optimizer per experiment; pools join with emews attach",
        )

    def optimizer_running(self) -> bool:
        """Whether a connection holds the experiment's optimizer lock (:meth:`lock_optimizer`): in
        this database (a copy made from it has the same schema oids, so the same keys)."""
        query = (
            "SELECT EXISTS (SELECT 1 FROM pg_locks l, " + _LOCK_KEY + " WHERE l.locktype = 'advisory' "
            "AND l.classid = k.a AND l.objid = k.b AND l.objsubid = 2 AND l.granted "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
        )
        return bool(self._raw.execute(query, (self.channel,)).fetchone()[0])

    def require_no_older_optimizer(self) -> None:
        """:class:`OptimizerRunning` while an optimizer serves a store of an older schema (an older
        emews): opened for writing, the store would be brought up to date under it, and a pool of
        this emews then no longer refused (:meth:`require_current_optimizer`)."""
        if self._older_version_served() is not None:
            raise self._served()

    def require_current_optimizer(self) -> None:
        """Refuse a pool of this emews for an experiment whose running optimizer is an older one,
        which would not read what this pool announces: the store still has an older schema, and
        the optimizer lock is held. With no optimizer running, the pool may bring the store up to
        date (an older optimizer then refuses it)."""
        version = self._older_version_served()
        if version is not None:
            raise ConfigError(
                f"the experiment's optimizer runs an older emews (its store has schema {version}; this "
                f"emews writes {q.SCHEMA_VERSION}), which would not read what this pool stores",
                file=self.store.location,
                key="emews version",
                allowed="attach with the emews that runs the optimizer, or stop it and continue with "
                "emews resume or serve of this one",
            )

    def _older_version_served(self) -> int | None:
        """The store's schema version while it is older than this emews writes and an optimizer
        holds the lock (that optimizer's emews is then an older one), else ``None``."""
        version = self.store.schema_version
        return version if version is not None and version < q.SCHEMA_VERSION and self.optimizer_running() else None

    @retried
    def enabled(self) -> bool:
        """Whether the experiment was launched with pools."""
        return self._raw.execute(_GET_META, (POOL_MODE,)).fetchone() is not None

    @retried
    def finish(self) -> None:
        """The optimizer is done: tasks still queued are cancelled, and pools stop once they hold
        nothing; wake them to see it."""
        with self._raw.transaction():
            self._raw.execute(_SET_META, (FINISHED, "1"))
            self._raw.execute(_CANCEL_LEFT)
            self._raw.execute("SELECT pg_notify(%s, '')", (self.tasks_channel,))

    @retried
    def finished(self) -> bool:
        """Whether the optimizer said it is done (:meth:`finish`) since it last started."""
        return self._raw.execute(_GET_META, (FINISHED,)).fetchone() is not None

    @retried
    def live_capacity(self, lease_s: float) -> int:
        """Tasks the pools not stopped, whose last heartbeat is less than ``lease_s`` old, hold at
        most (their workers and the read-ahead each grew for short tasks)."""
        return self.live_holds(lease_s)[0]

    @retried
    def live_holds(self, lease_s: float) -> tuple[int, int]:
        """What :meth:`live_capacity` counts, and the largest one pool holds."""
        total, largest = self._raw.execute(_LIVE_HOLD, (lease_s,)).fetchone()
        return int(total), int(largest)

    @retried
    def announce(self) -> None:
        """An empty notification on the results channel: a listener's :meth:`wait` returns at once."""
        self._raw.execute("SELECT pg_notify(%s, '')", (self.channel,))

    def wake(self) -> bool:
        """:meth:`announce` tried once, never again on a new connection (closing must not wait for
        the store); whether the notification went out."""
        try:
            self._raw.execute("SELECT pg_notify(%s, '')", (self.channel,))
        except _connection_errors():
            return False
        return True

    @retried
    def outstanding(self) -> int:
        """Tasks queued or leased (not done)."""
        return int(self._raw.execute(_QUEUED).fetchone()[0])

    # -- the optimizer's side ----------------------------------------------------
    @retried
    def enqueue(self, tasks: Sequence[Task], priority: float | None = None) -> None:
        """Queue ``tasks`` for any pool (a task id already queued, leased, done or cancelled is left
        as it is; one recorded by a run without pools is queued)."""
        batch = list({t.id: t for t in reversed(tasks)}.values())[::-1]  # the first of an id stands
        if not batch:
            return
        rows = [
            [
                int(t.id),
                dumps_point(t.params),
                None if t.seed is None else int(t.seed),
                _number(t.submitted),
                int(t.attempt),
                int(t.ranks),
                _number(t.priority if priority is None else priority),
            ]
            for t in batch
        ]
        self._raw.execute(_ENQUEUE, (orjson.dumps(rows).decode(), self.tasks_channel)).fetchone()

    @retried
    def cancel(self, ids: Sequence[int] | None = None) -> list[int]:
        """Cancel the queued tasks among ``ids`` (every queued task: ``None``); a task a pool has
        claimed runs to its end. The ids cancelled (with ``ids``: those among them cancelled now
        or before), which no pool will run and no resume queues."""
        with self._raw.transaction():
            if ids is None:
                rows = self._raw.execute(_CANCEL_QUEUED).fetchall()
            else:  # the cancelled among ids, whenever (a retry after a lost commit finds them too)
                self._raw.execute(_CANCEL_IDS, (list(ids),))
                rows = self._raw.execute(_CANCELLED_AMONG, (list(ids),)).fetchall()
        return sorted(int(i) for (i,) in rows)

    @retried
    def cancelled(self) -> set[int]:
        """The ids of every cancelled task."""
        return {int(i) for (i,) in self._raw.execute(_CANCELLED).fetchall()}

    @retried
    def listen(self) -> None:
        """Receive this experiment's result notifications on this connection (see :meth:`wait`)."""
        self._listen(self.channel)

    @retried
    def listen_tasks(self) -> None:
        """Receive a notification on this connection whenever tasks are queued (see :meth:`pending`)."""
        self._listen(self.tasks_channel)

    def _listen(self, channel: str) -> None:
        self._raw.execute(f'LISTEN "{channel}"')
        if channel not in self._listening:
            self._listening.append(channel)

    def reconnect(self) -> None:
        """A new connection in place of a lost one, listening where this one listened."""
        self.store.reconnect()
        for channel in self._listening:
            self._raw.execute(f'LISTEN "{channel}"')
        if self._locked:
            self.lock_optimizer()  # the lock ended with the old connection: another optimizer may have it now

    @retried
    def pending(self) -> bool:
        """Consume the notifications received so far, without waiting; whether there were any."""
        return any(True for _ in self._raw.notifies(timeout=0))

    @retried
    def results(self, ids: Sequence[int], params: Mapping[int, Mapping[str, Any]] | None = None) -> list[Result]:
        """The stored results among ``ids`` (by id), in one statement; a result's point is taken
        from ``params`` where it has the id (the point the optimizer put: not decoded again)."""
        known = params or {}
        rows = self._raw.execute(_RESULTS, (_array(sorted(set(ids))),))
        return [self._result(row, known) for row in rows]

    def carried(self, announced: Announced, params: Mapping[int, Mapping[str, Any]]) -> list[Result]:
        """The results ``announced`` carried whose ids ``params`` has, by id, each with its point
        from ``params`` (the point the optimizer put); no statement runs."""
        return [self._result(announced.rows[i], params) for i in sorted(params) if i in announced.rows]

    def _result(self, row: Sequence[Any], known: Mapping[int, Mapping[str, Any]]) -> Result:
        """A row of ``results`` (:data:`COLUMNS`) as a :class:`Result`, its point from ``known``
        where that has the id."""
        id_, status, metrics = row[0], row[1], row[5]
        if status not in _STATUS or id_ not in known or metrics != "{}":
            result = self.store._result(row)  # the store's reader, its errors included
            if id_ in known:
                result.params = known[id_]
            return result
        return row_result(row, _STATUS[status], known[id_], {})

    @retried
    def receive(self, timeout: float) -> Announced:
        """The results announced since the last call, waiting up to ``timeout`` seconds for the
        first notification (after :meth:`listen`); empty when none came, or only a pool's start or
        end was announced (the workers changed)."""
        rows: dict[int, Sequence[Any]] = {}
        ids: list[int] = []
        for note in self._raw.notifies(timeout=timeout, stop_after=1):
            _decode_note(note.payload, rows, ids)
        for note in self._raw.notifies(timeout=0):
            _decode_note(note.payload, rows, ids)
        return Announced(rows, ids)

    # -- a pool's side -------------------------------------------------------------
    @retried
    def register(
        self,
        site: str,
        workers: int,
        job_id: str | None = None,
        host: str | None = None,
        hold: int | None = None,
        process: tuple[int, float] | None = None,
    ) -> int:
        """Add a pool of ``workers`` on ``site`` (holding up to ``hold`` tasks), run by ``process``
        (its pid and start time on ``host``, :meth:`processes`); its id."""
        with self._raw.transaction():
            pool = int(self._raw.execute(_REGISTER, (site, job_id, host, workers, hold or workers)).fetchone()[0])
            if process is not None:
                self._raw.execute(_SET_META, (f"{PROCESS_KEY}{pool}", f"{process[0]} {process[1]!r}"))
            self._raw.execute("SELECT pg_notify(%s, '')", (self.channel,))  # the optimizer counts its workers
        return pool

    @retried
    def claim(self, pool: int, n: int, lease_s: float, fits: int = 2**31 - 1) -> list[Claimed]:
        """Lease up to ``n`` claimable tasks of at most ``fits`` ranks to ``pool`` for ``lease_s``
        seconds, highest priority first, then oldest id; tasks another transaction holds are
        skipped, never waited for (one statement: its own transaction, one round trip)."""
        parameters = {"pool": pool, "lease": lease_s, "n": n, "fits": fits, "ids": "{}"}
        return _claimed(self._raw.execute(_CLAIM, parameters).fetchall())

    @retried
    def renew(self, pool: int, lease_s: float, held: Sequence[int]) -> int:
        """Heartbeat ``pool`` and extend by ``lease_s`` seconds from now the leases of the tasks it
        ``held`` (only those: a task leased to it by a claim whose answer was lost is not among
        them, and its lease ends so that a pool runs it); how many were extended."""
        with self._raw.transaction():
            self._raw.execute(_RENEW_POOL, (pool,))
            return int(self._raw.execute(_RENEW_TASKS, (lease_s, pool, list(held))).rowcount)

    @retried
    def say_busy(self, pool: int, ranks: int) -> None:
        """``pool`` has ``ranks`` worker ranks running a task now (``emews status``'s workers busy)."""
        with self._raw.transaction():
            self._raw.execute(_SET_META, (f"{BUSY_KEY}{pool}", str(ranks)))

    @retried
    def busy_by_pool(self) -> dict[int, int]:
        """The worker ranks each pool last said run a task (:meth:`say_busy`)."""
        return {int(pool): int(n) for pool, n in self._raw.execute(_BUSY, (BUSY_KEY, BUSY_KEY)).fetchall()}

    @retried
    def say_lost(self, pool: int, lost: Sequence[LostRank]) -> None:
        """``pool`` went on without the worker ranks ``lost`` (all of them so far, in order; each
        lost at ``at`` on :attr:`host_clock`), stored with the times on the store's clock
        (:meth:`server_time`), as the pools' starts and heartbeats: ``emews status`` and the run's
        summary compare them with those, whatever this host's clock says."""
        with self._raw.transaction():
            host = self.host_clock()
            shift = float(self._raw.execute(f"SELECT {_NOW}").fetchone()[0]) - host
            records = [{**record.to_json(), "at": record.at + shift, "pool": pool} for record in lost]
            self._raw.execute(_SET_META, (f"{LOST_KEY}{pool}", orjson.dumps(records).decode()))

    @retried
    def lost_ranks(self, since: float = 0.0) -> list[LostRank]:
        """The worker ranks every pool went on without (:meth:`say_lost`) from ``since`` (epoch
        seconds on the store's clock, :meth:`server_time`) on, in the order they were lost; a record
        that cannot be read is left out."""
        found: list[LostRank] = []
        for _, value in self._raw.execute(_META_VALUES, (LOST_KEY, LOST_KEY)).fetchall():
            try:
                records = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
            if isinstance(records, list):
                found += [r for r in map(LostRank.from_json, (r for r in records if isinstance(r, dict))) if r]
        return sorted((r for r in found if r.at >= since), key=lambda r: r.at)

    @retried
    def processes(self) -> dict[int, tuple[int, float]]:
        """Each pool's process as it registered (:meth:`register`): pid and start time; a pool of an
        older emews recorded none."""
        found = {}
        for pool, value in self._raw.execute(_PROCESSES, (PROCESS_KEY, PROCESS_KEY)).fetchall():
            try:
                pid, started = str(value).split()
                found[int(pool)] = (int(pid), float(started))
            except ValueError:
                continue
        return found

    @retried
    def leased_by_pool(self) -> dict[int, int]:
        """The tasks each pool holds under a lease that has not ended (running, or about to)."""
        return {int(pool): int(n) for pool, n in self._raw.execute(_LEASED_BY_POOL).fetchall()}

    @retried
    def held(self) -> set[int]:
        """The tasks leased under a lease that has not ended: their pool runs them (or is about to)."""
        return {int(i) for (i,) in self._raw.execute(_HELD).fetchall()}

    @retried
    def holding_by_pool(self) -> dict[int, int]:
        """The tasks still leased to each pool, their lease ended or not (another pool did not take them yet)."""
        return {int(pool): int(n) for pool, n in self._raw.execute(_HOLDING_BY_POOL).fetchall()}

    @retried
    def leases_end_by_pool(self) -> dict[int, float]:
        """When the last lease of the tasks leased to each pool ends (:meth:`server_time`'s clock)."""
        rows = self._raw.execute(_LEASES_END_BY_POOL).fetchall()
        return {int(pool): float(until) for pool, until in rows if until is not None}

    @retried
    def set_hold(self, pool: int, hold: int) -> None:
        """``pool`` now holds up to ``hold`` tasks; the optimizer's side recounts the capacity."""
        with self._raw.transaction():
            self._raw.execute(_SET_HOLD, (hold, pool))
            self._raw.execute("SELECT pg_notify(%s, '')", (self.channel,))

    @retried
    def requeue_expired(self) -> list[int]:
        """Return the tasks whose lease ended to the queue (same ids, one more attempt); their ids."""
        with self._raw.transaction():
            return sorted(int(i) for (i,) in self._raw.execute(_REQUEUE).fetchall())

    @retried
    def complete(self, pool: int, results: Iterable[Result]) -> list[int]:
        """Store ``results`` written by ``pool``: one result per task id (a second one, e.g. from a
        pool presumed dead whose task ran again elsewhere, is ignored); mark the tasks done, count
        them for the pool and notify the experiment's channel. The ids stored now."""
        return self.complete_once(pool, results)

    def complete_once(self, pool: int, results: Iterable[Result]) -> list[int]:
        """:meth:`complete` tried once, never again on a new connection (a stopping pool's: it
        does not wait for a lost connection)."""
        parameters = self._completing(pool, results)
        if parameters is None:
            return []
        stored = self._raw.execute(_COMPLETE, parameters).fetchone()[0]
        return [int(i) for i in stored or ()]

    @retried
    def complete_and_claim(
        self, pool: int, results: Iterable[Result], n: int, lease_s: float, fits: int = 2**31 - 1
    ) -> tuple[list[int], list[Claimed]]:
        """:meth:`complete` then :meth:`claim` in one statement (one round trip, one transaction):
        the ids stored now and the tasks claimed (never one of ``results``' own)."""
        parameters = self._completing(pool, results)
        if parameters is None:
            return [], (self.claim(pool, n, lease_s, fits) if n > 0 else [])
        if n <= 0:
            stored = self._raw.execute(_COMPLETE, parameters).fetchone()[0]
            return [int(i) for i in stored or ()], []
        parameters.update(n=n, lease=lease_s, fits=fits)
        rows = self._raw.execute(_COMPLETE_CLAIM, parameters).fetchall()
        stored = [int(i) for i in rows[0][0] or ()]
        return stored, _claimed([row[2:] for row in rows if row[2] is not None])

    def _completing(self, pool: int, results: Iterable[Result]) -> dict[str, Any] | None:
        """The parameters that store ``results`` (the first of an id stands); ``None`` for none."""
        batch = list({r.id: r for r in results}.values())
        if not batch:
            return None
        kinds = tuple(_RESULT_TYPES.values())
        rows = [[_typed(value, kind) for value, kind in zip(_result_row(r), kinds, strict=True)] for r in batch]
        return {
            "rows": orjson.dumps(rows).decode(),
            "ids": _array(r.id for r in batch),  # the tasks by their index, not by a join the planner may scan for
            "pool": pool,
            "channel": self.channel,
        }

    @retried
    def stop(self, pool: int) -> None:
        """Record that ``pool`` ended (its leased tasks, if any, return when their leases end)."""
        with self._raw.transaction():
            self._raw.execute(_STOP, (pool,))
            self._raw.execute("SELECT pg_notify(%s, '')", (self.channel,))

    def release(self, pool: int, held: Sequence[int], started: Sequence[int] = ()) -> list[int]:
        """Queue again now the tasks among ``held`` that ``pool`` still holds (a pool that stopped
        cleanly, nothing of them running there any more), one more attempt each of those among
        ``started`` (a worker got them) as when a lease ends, and wake the pools waiting for work;
        their ids. Tried once: a stopping pool does not wait for a lost connection (the leases then
        end by themselves)."""
        with self._raw.transaction():
            rows = self._raw.execute(_RELEASE, (_array(started), pool, _array(held))).fetchall()
            self._raw.execute("SELECT pg_notify(%s, '')", (self.tasks_channel,))
        return sorted(int(i) for (i,) in rows)

    @retried
    def state_counts(self) -> dict[str, int]:
        """How many tasks are in each state of the shared queue (queued, leased, done, cancelled),
        and ``expired``: the leased ones whose lease has ended (their pool is gone: the next claim
        takes them back to the queue). Once the optimizer finished, those are cancelled (:data:`_DONE`)."""
        expired = f"state = 'leased' AND lease_until < {_NOW}"
        rows = self._raw.execute(
            f"SELECT CASE WHEN {expired} AND {_DONE} THEN 'cancelled' ELSE state END, count(*) FROM tasks "
            f"WHERE state IS NOT NULL GROUP BY 1 UNION ALL SELECT 'expired', count(*) FROM tasks WHERE {expired} "
            f"AND NOT {_DONE}"
        )
        return {state: int(n) for state, n in rows.fetchall() if n}

    @retried
    def server_time(self) -> float:
        """The database server's clock (seconds since the epoch): what leases and heartbeats use."""
        return float(self._raw.execute(f"SELECT {_NOW}").fetchone()[0])

    @retried
    def pools(self) -> list[PoolRow]:
        """Every pool of the experiment, in the order they registered."""
        return [PoolRow(*row) for row in self._raw.execute(_POOLS).fetchall()]


def pool_queue_of(store: Store, exp_dir: Path) -> PoolQueue:
    """``store``'s shared queue; :class:`ConfigError` naming ``store.url`` (SQLite) or ``--pools``
    (an experiment launched without pools), the store closed, when it has none."""
    if not isinstance(store, PostgresStore):
        store.close()
        raise _on_sqlite(exp_dir)
    queue = PoolQueue(store)
    if not queue.enabled():
        store.close()
        raise ConfigError(
            "this experiment was launched without pools: its optimizer hands tasks to its own job only",
            file=str(exp_dir),
            key="--pools",
            allowed="an experiment started with emews launch --pools K",
        )
    return queue


def _on_sqlite(exp_dir: Path) -> ConfigError:
    return ConfigError(
        "worker pools need a PostgreSQL store; this experiment's is SQLite",
        file=str(exp_dir / "workflow.yaml"),
        key="store.url",
        allowed="a postgresql:// URL (docs/postgres.md), set when the experiment is launched",
    )


def _checked_then_opened(exp_dir: Path, check: Callable[[PoolQueue], None]) -> PoolQueue:
    """The experiment's queue opened for writing (which brings an older schema up to date) once
    ``check`` passed on a read-only look, so that a refusal leaves the store as it was; refused as
    :func:`pool_queue_of` does, an experiment on SQLite without opening its store (none may exist yet)."""
    from emews.store.opening import open_store, recorded_store

    if recorded_store(exp_dir) is None:
        raise _on_sqlite(exp_dir)
    with open_store(exp_dir, readonly=True) as peek:
        check(pool_queue_of(peek, exp_dir))
    return pool_queue_of(open_store(exp_dir), exp_dir)


def queue_for_a_pool(exp_dir: Path) -> PoolQueue:
    """The experiment's queue as a joining pool opens it: refused while an older emews runs its
    optimizer (:meth:`PoolQueue.require_current_optimizer`), checked before anything is written."""
    return _checked_then_opened(exp_dir, PoolQueue.require_current_optimizer)


def queue_for_an_optimizer(exp_dir: Path) -> PoolQueue:
    """The experiment's queue as an optimizer (or ``emews cancel``) opens it to take its lock next:
    :class:`OptimizerRunning` while an older emews serves it (:meth:`PoolQueue.require_no_older_optimizer`),
    checked before anything is written; otherwise taking the lock is the check."""
    return _checked_then_opened(exp_dir, PoolQueue.require_no_older_optimizer)


def _claimed(rows: Sequence[Sequence[Any]]) -> list[Claimed]:
    """The claimed tasks of a claim's rows, highest priority first, then lowest id."""
    ordered = sorted(rows, key=lambda r: (-r[6], r[0]))
    return [
        Claimed(Task(i, loads_point(p), s, sub, attempt, ranks=size, priority=prio), attempt, prio)
        for i, p, s, sub, attempt, size, prio in ordered
    ]


#: the positions in a carried row (:data:`COLUMNS`) of the ``float8`` columns: JSON has ``2`` for
#: 2.0 and ``"Infinity"`` or ``"NaN"`` for what it has no number for; each is read back as a float
_FLOATS_AT = tuple(i for i, name in enumerate(COLUMNS) if _RESULT_TYPES[name] == "float8")


def _decode_note(payload: str, rows: dict[int, Sequence[Any]], ids: list[int]) -> None:
    """Add a notification's results (a JSON array of rows and ids, :data:`NOTE_PART`) to ``rows``
    and ``ids``; an empty payload (the workers changed) adds nothing. A pool of an emews before
    results were carried announces comma-separated ids (``3,4,5``): read as ids, so an optimizer
    updated mid-experiment still hears the pools it started with."""
    if not payload:
        return
    if not payload.startswith("["):
        try:
            ids.extend(int(i) for i in payload.split(",") if i)
            return
        except ValueError:
            raise EmewsError(f"a notification of stored results is not understood: {payload[:200]!r}") from None
    try:
        items = orjson.loads(payload)
        for item in items:
            if isinstance(item, int):
                ids.append(item)
                continue
            row = list(item)
            for i in _FLOATS_AT:
                row[i] = None if row[i] is None else float(row[i])
            rows[int(row[0])] = tuple(row)
    except (ValueError, TypeError, IndexError) as exc:
        raise EmewsError(f"a notification of stored results is not understood ({exc}): {payload[:200]!r}") from None


def _number(value: Any) -> Any:
    """A float for a JSON row: a finite one as a number, infinity and NaN as text (which JSON has
    no number for and the server's ``float8`` reads), ``None`` as null."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else repr(value)


def _typed(value: Any, kind: str) -> Any:
    """``value`` as its column's JSON: a plain int, float (:func:`_number`) or string, a NUL in it
    as U+FFFD (PostgreSQL's text has no NUL: the batch's statement would fail; an error quoting a
    command's stderr may hold one)."""
    if value is None:
        return None
    if kind == "bigint":
        return int(value)
    return _number(value) if kind == "float8" else without_nul(str(value))


def _array(ids: Iterable[int]) -> str:
    """``ids`` as a PostgreSQL array literal (one text parameter, cast to ``bigint[]``)."""
    return "{" + ",".join(str(int(i)) for i in ids) + "}"
