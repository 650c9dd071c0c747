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
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from emews.core.errors import ConfigError, EmewsError
from emews.core.jsoncodec import dumps_point, loads_point
from emews.core.results import Result, Task
from emews.store.base import Store, StoreUnreadable
from emews.store.postgres import PostgresStore
from emews.store.results_store import WRITTEN_COLUMNS, _result_row

log = logging.getLogger("emews")

_NOW = "extract(epoch from clock_timestamp())::double precision"

_ENQUEUE = (
    "INSERT INTO tasks (id, params, seed, submitted, attempt, ranks, state, priority) "
    "VALUES (%s, %s, %s, %s, %s, %s, 'queued', %s) "
    "ON CONFLICT (id) DO UPDATE SET state = 'queued', priority = EXCLUDED.priority WHERE tasks.state IS NULL"
)
_REGISTER = (
    f"INSERT INTO pools (site, job_id, host, workers, hold, started, heartbeat) "
    f"VALUES (%s, %s, %s, %s, %s, {_NOW}, {_NOW}) RETURNING id"
)
# a leased task whose lease ended is claimable as a queued one; claiming it counts one more attempt
_CLAIM = f"""
UPDATE tasks t SET state = 'leased', pool = %(pool)s, lease_until = {_NOW} + %(lease)s,
    attempt = CASE WHEN t.state = 'leased' THEN t.attempt + 1 ELSE t.attempt END
FROM (SELECT id FROM tasks WHERE (state = 'queued' OR (state = 'leased' AND lease_until < {_NOW}))
      AND ranks <= %(fits)s ORDER BY priority DESC, id LIMIT %(n)s FOR UPDATE SKIP LOCKED) c
WHERE t.id = c.id
RETURNING t.id, t.params, t.seed, t.submitted, t.attempt, t.ranks, t.priority
"""
_RENEW_POOL = f"UPDATE pools SET heartbeat = {_NOW} WHERE id = %s"
_SET_HOLD = "UPDATE pools SET hold = %s WHERE id = %s"
_RENEW_TASKS = f"UPDATE tasks SET lease_until = {_NOW} + %s WHERE pool = %s AND state = 'leased' AND id = ANY(%s)"
_REQUEUE = (
    f"UPDATE tasks SET state = 'queued', pool = NULL, lease_until = NULL, attempt = attempt + 1 "
    f"WHERE state = 'leased' AND lease_until < {_NOW} RETURNING id"
)
_STORED_BY = "SELECT id FROM results WHERE id = ANY(%s) AND pool = %s"
_DONE = "UPDATE tasks SET state = 'done', pool = COALESCE(pool, %s), lease_until = NULL WHERE id = ANY(%s)"
_COUNT = "UPDATE pools SET tasks_done = tasks_done + %s, heartbeat = " + _NOW + " WHERE id = %s"
_STOP = f"UPDATE pools SET stopped = {_NOW} WHERE id = %s"
_POOLS = "SELECT id, site, job_id, host, workers, tasks_done, started, heartbeat, stopped FROM pools ORDER BY id"
_SET_META = "INSERT INTO emews_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
_GET_META = "SELECT value FROM emews_meta WHERE key = %s"
_DEL_META = "DELETE FROM emews_meta WHERE key = %s"
_QUEUED = "SELECT count(*) FROM tasks WHERE state = 'queued' OR state = 'leased'"
_CANCEL_QUEUED = "UPDATE tasks SET state = 'cancelled' WHERE state = 'queued' RETURNING id"
_CANCEL_LEFT = (
    f"UPDATE tasks SET state = 'cancelled' WHERE state = 'queued' OR (state = 'leased' AND lease_until < {_NOW})"
)
#: the optimizer's lock: emews' key and the experiment schema's oid (unique in the database)
_LOCK_KEY = "(SELECT 7468 AS a, oid::int AS b FROM pg_namespace WHERE nspname = %s) k"
_CANCEL_IDS = "UPDATE tasks SET state = 'cancelled' WHERE state = 'queued' AND id = ANY(%s)"
_CANCELLED_AMONG = "SELECT id FROM tasks WHERE state = 'cancelled' AND id = ANY(%s)"
_CANCELLED = "SELECT id FROM tasks WHERE state = 'cancelled'"
_LIVE_HOLD = (
    f"SELECT COALESCE(SUM(GREATEST(workers, COALESCE(hold, workers))), 0) FROM pools "
    f"WHERE stopped IS NULL AND heartbeat > {_NOW} - %s"
)
#: ``emews_meta`` keys: the experiment runs its tasks through pools; its optimizer finished
POOL_MODE, FINISHED = "pools", "pools_finished"


class StoreLost(EmewsError):
    """The connection to the store was lost and could not be made again within the retry time."""


_T = TypeVar("_T")


def _connection_errors() -> tuple[type[BaseException], ...]:
    import psycopg

    return (psycopg.OperationalError, psycopg.InterfaceError, StoreUnreadable)


def retried(operation: Callable[..., _T]) -> Callable[..., _T]:
    """Run a :class:`PoolQueue` operation again on a new connection when the connection is lost
    (a server restart, a network cut, a terminated backend), backing off from 0.1 s to 5 s, until
    the queue's ``retry_s`` has passed: then :class:`StoreLost`. Every operation may run twice:
    inserts are keyed by task id, updates set states, a claim whose answer was lost expires."""

    @functools.wraps(operation)
    def again(self: PoolQueue, *args: Any, **kwargs: Any) -> _T:
        lost = _connection_errors()
        deadline: float | None = None
        delay = 0.1
        while True:
            try:
                return operation(self, *args, **kwargs)
            except lost as exc:
                now = time.monotonic()
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
class Claimed:
    """A task a pool holds under lease, how often it was started before, and its priority."""

    task: Task
    attempt: int
    priority: float


class PoolQueue:
    """The queue/lease operations on one experiment's PostgreSQL store (one connection each:
    a pool's distributor and the optimizer's listener hold their own)."""

    def __init__(self, store: PostgresStore, *, retry_s: float = 120.0) -> None:
        if not isinstance(store, PostgresStore):
            raise TypeError("worker pools need a PostgreSQL store (store.url)")
        self.store = store
        self._listening: list[str] = []  # channels to LISTEN on again after a reconnect
        self._locked = False  # this connection holds the optimizer lock (taken again after a reconnect)
        #: seconds a lost connection is tried again before :class:`StoreLost`
        self.retry_s = retry_s
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
            self._raw.execute(_DEL_META, (FINISHED,))

    def lock_optimizer(self) -> None:
        """Hold the experiment's optimizer lock for as long as this connection lives (a session
        advisory lock: the server releases it when the connection ends, however it ends);
        :class:`OptimizerRunning` when another connection holds it."""
        self._locked = bool(
            self._raw.execute(f"SELECT pg_try_advisory_lock(k.a, k.b) FROM {_LOCK_KEY}", (self.channel,)).fetchone()[0]
        )
        if not self._locked:
            raise OptimizerRunning(
                "another optimizer serves this experiment (emews launch, resume or serve on some host)",
                file=self.store.location,
                key="--pools",
                allowed="one optimizer per experiment; pools join with emews attach",
            )

    def optimizer_running(self) -> bool:
        """Whether another connection holds the optimizer lock (asked without keeping it)."""
        try:
            self.lock_optimizer()
        except OptimizerRunning:
            return True
        self._raw.execute(f"SELECT pg_advisory_unlock(k.a, k.b) FROM {_LOCK_KEY}", (self.channel,))
        self._locked = False
        return False

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
        return int(self._raw.execute(_LIVE_HOLD, (lease_s,)).fetchone()[0])

    @retried
    def outstanding(self) -> int:
        """Tasks queued or leased (not done)."""
        return int(self._raw.execute(_QUEUED).fetchone()[0])

    # -- the optimizer's side ----------------------------------------------------
    @retried
    def enqueue(self, tasks: Sequence[Task], priority: float | None = None) -> None:
        """Queue ``tasks`` for any pool (a task id already queued, leased, done or cancelled is left
        as it is; one recorded by a run without pools is queued)."""
        rows = [
            (
                t.id,
                dumps_point(t.params),
                t.seed,
                t.submitted,
                t.attempt,
                t.ranks,
                t.priority if priority is None else priority,
            )
            for t in tasks
        ]
        with self._raw.transaction(), self._raw.cursor() as cursor:
            cursor.executemany(_ENQUEUE, rows)
            cursor.execute("SELECT pg_notify(%s, '')", (self.tasks_channel,))  # pools waiting for work wake

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
    def results(self, ids: Sequence[int]) -> list[Result]:
        """The stored results among ``ids`` (by id)."""
        return self.store.results_by_id(ids)

    @retried
    def wait(self, timeout: float) -> list[int]:
        """The task ids of results stored since the last call, waiting up to ``timeout`` seconds for
        the first notification (after :meth:`listen`); ``[]`` when none came, or only a pool's
        start or end was announced (the workers changed)."""
        ids: list[int] = []
        for note in self._raw.notifies(timeout=timeout, stop_after=1):
            ids += [int(i) for i in note.payload.split(",") if i]
        for note in self._raw.notifies(timeout=0):
            ids += [int(i) for i in note.payload.split(",") if i]
        return ids

    # -- a pool's side -------------------------------------------------------------
    @retried
    def register(
        self, site: str, workers: int, job_id: str | None = None, host: str | None = None, hold: int | None = None
    ) -> int:
        """Add a pool of ``workers`` on ``site`` (holding up to ``hold`` tasks); its id."""
        with self._raw.transaction():
            pool = int(self._raw.execute(_REGISTER, (site, job_id, host, workers, hold or workers)).fetchone()[0])
            self._raw.execute("SELECT pg_notify(%s, '')", (self.channel,))  # the optimizer counts its workers
        return pool

    @retried
    def claim(self, pool: int, n: int, lease_s: float, fits: int = 2**31 - 1) -> list[Claimed]:
        """Lease up to ``n`` claimable tasks of at most ``fits`` ranks to ``pool`` for ``lease_s``
        seconds, highest priority first, then oldest id; tasks another transaction holds are
        skipped, never waited for (one statement: its own transaction, one round trip)."""
        rows = self._raw.execute(_CLAIM, {"pool": pool, "lease": lease_s, "n": n, "fits": fits}).fetchall()
        rows.sort(key=lambda r: (-r[6], r[0]))
        return [
            Claimed(Task(i, loads_point(p), s, sub, attempt, ranks=size, priority=prio), attempt, prio)
            for i, p, s, sub, attempt, size, prio in rows
        ]

    @retried
    def renew(self, pool: int, lease_s: float, held: Sequence[int]) -> int:
        """Heartbeat ``pool`` and extend by ``lease_s`` seconds from now the leases of the tasks it
        ``held`` (only those: a task leased to it by a claim whose answer was lost is not among
        them, and its lease ends so that a pool runs it); how many were extended."""
        with self._raw.transaction():
            self._raw.execute(_RENEW_POOL, (pool,))
            return int(self._raw.execute(_RENEW_TASKS, (lease_s, pool, list(held))).rowcount)

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
        batch = list({r.id: r for r in results}.values())
        if not batch:
            return []
        ids = [r.id for r in batch]
        with self._raw.transaction():
            for start in range(0, len(batch), 1000):  # a statement takes at most 65,535 parameters
                chunk = batch[start : start + 1000]
                rows = [value for result in chunk for value in (*_result_row(result), pool)]
                self._raw.execute(_insert_once(len(chunk)), rows)
            # this pool's rows among them (not RETURNING: a retry after a lost commit finds them too)
            stored = sorted(int(i) for (i,) in self._raw.execute(_STORED_BY, (ids, pool)).fetchall())
            self._raw.execute(_DONE, (pool, ids))
            if stored:
                self._raw.execute(_COUNT, (len(stored), pool))
                for payload in _payloads(stored):
                    self._raw.execute("SELECT pg_notify(%s, %s)", (self.channel, payload))
        return stored

    @retried
    def stop(self, pool: int) -> None:
        """Record that ``pool`` ended (its leased tasks, if any, return when their leases end)."""
        with self._raw.transaction():
            self._raw.execute(_STOP, (pool,))
            self._raw.execute("SELECT pg_notify(%s, '')", (self.channel,))

    @retried
    def state_counts(self) -> dict[str, int]:
        """How many tasks are in each state of the shared queue (queued, leased, done, cancelled)."""
        rows = self._raw.execute("SELECT state, count(*) FROM tasks WHERE state IS NOT NULL GROUP BY state")
        return {state: int(n) for state, n in rows.fetchall()}

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
        raise ConfigError(
            "worker pools need a PostgreSQL store; this experiment's is SQLite",
            file=str(exp_dir / "workflow.yaml"),
            key="store.url",
            allowed="a postgresql:// URL (docs/postgres.md), set when the experiment is launched",
        )
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


def _payloads(ids: Sequence[int], limit: int = 7900) -> list[str]:
    """``ids`` as comma-separated notification payloads under PostgreSQL's 8,000 bytes each."""
    payloads, current = [], ""
    for text in map(str, ids):
        if current and len(current) + 1 + len(text) > limit:
            payloads.append(current)
            current = ""
        current = f"{current},{text}" if current else text
    return [*payloads, current] if current else payloads


def _insert_once(count: int) -> str:
    """The INSERT of ``count`` results with the pool column, ignoring a second result for a task
    id."""
    columns = (*WRITTEN_COLUMNS, "pool")
    row = f"({','.join(['%s'] * len(columns))})"
    return f"INSERT INTO results ({','.join(columns)}) VALUES {','.join([row] * count)} ON CONFLICT (id) DO NOTHING"
