"""A pooled experiment's connections lost mid-run, on a real PostgreSQL: every backend of the
experiment terminated by the server (as a restart or a network cut does) is reconnected with
back-off, listening again, and the run completes with each result stored once; a server that stays
away past ``store.retry`` ends the pool with :class:`StoreLost` and what it stored kept."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest
from pgserver import PgServer
from pooled import ok_result

from emews.core.evaluator import Evaluator
from emews.core.results import Result, Task
from emews.core.space import Float, Space
from emews.runtime.pool_bridge import PoolBridge, PooledQueuePair
from emews.runtime.pool_feeder import PoolFeeder, PoolQueuePair
from emews.store.pool_queue import PoolQueue, StoreLost, retried
from emews.store.postgres import PostgresStore

TASKS = 30


def test_terminated_connections_are_made_again(pg_server: PgServer, schema: str,
                                               tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The optimizer's bridge (its submitting and listening connections) and a pool's feeder lose
    every connection halfway; each is made again and the evaluator gets all its results."""
    stores = [PostgresStore(pg_server.url(), schema, root=tmp_path) for _ in range(3)]
    submitter, listener, pool = (PoolQueue(s, retry_s=60.0) for s in stores)
    submitter.enable()
    queues, work = PooledQueuePair(), PoolQueuePair()
    bridge = PoolBridge(queues, submitter, listener, recheck_s=1.0).start()
    feeder = PoolFeeder(pool, work, pool.register("local", workers=2), hold=3, lease_s=30.0)
    half, go_on = threading.Event(), threading.Event()

    def evaluate() -> None:  # the pool's distributor and workers: half the tasks, then wait for the cut
        done = 0
        while done < TASKS:
            if not work.tasks:
                work.new_tasks.wait(0.05)
                work.new_tasks.clear()
                continue
            work.deliver([ok_result(work.tasks.popleft())])
            done += 1
            if done == TASKS // 2:
                half.set()
                go_on.wait(60.0)

    threads = [threading.Thread(target=feeder.run), threading.Thread(target=evaluate)]
    for t in threads:
        t.start()
    results: list[Result] = []
    try:
        evaluator = Evaluator(queues, Space({"x": Float(0.0, 4.0)}), workers=2, budget=TASKS)
        evaluator.put([{"x": i / 8} for i in range(TASKS)])
        assert half.wait(60.0)
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'emews' AND pid <> pg_backend_pid()"
            ).fetchall()
        assert len(killed) >= 3  # the bridge's two connections and the pool's, at least
        go_on.set()
        deadline = time.monotonic() + 120.0  # a safety net against a hang, not a measurement
        while evaluator.pending and time.monotonic() < deadline:
            results += evaluator.get(evaluator.pending, timeout=5.0)
    finally:
        go_on.set()
        feeder.stop()
        bridge.close(finished=True)
        for t in threads:
            t.join(60.0)
    assert sorted(r.id for r in results) == list(range(TASKS))
    assert len([r for r in caplog.records if "store connection lost" in r.getMessage()]) >= 3  # each reconnected
    rows = stores[0].connection.execute("SELECT id FROM results ORDER BY id").fetchall()
    assert [r[0] for r in rows] == list(range(TASKS))  # each once, none lost
    assert sorted(feeder.stored) == list(range(TASKS)) and feeder.late == []
    for store in stores:
        store.close()


def test_a_server_away_past_the_retry_time_ends_the_pool(own_server: PgServer, tmp_path: Path) -> None:
    store = PostgresStore(own_server.url(), "lost", root=tmp_path)
    queue = PoolQueue(store, retry_s=1.0)
    queue.enqueue([Task(i, {"x": i / 8}, i, 1000.0 + i) for i in range(4)])
    pool = queue.register("local", workers=1)
    first = queue.claim(pool, 2, lease_s=60.0)
    assert queue.complete(pool, [ok_result(c.task) for c in first]) == [0, 1]
    own_server.stop()
    with pytest.raises(StoreLost, match="lost the connection to the store"):
        queue.claim(pool, 2, lease_s=60.0)
    store.close()
    own_server.restart()
    with PostgresStore(own_server.url(), "lost", root=tmp_path) as again:
        assert [r.id for r in again] == [0, 1]  # what the pool stored before the loss stays stored
        assert PoolQueue(again).state_counts() == {"done": 2, "queued": 2}


def test_a_new_connection_keeps_the_sessions_settings(pg_server: PgServer, tmp_path: Path) -> None:
    store = PostgresStore(pg_server.url(), "settings", root=tmp_path, durability="off")
    try:
        store.reconnect()
        assert store.connection.execute("SHOW synchronous_commit").fetchone()[0] == "off"
        assert store.connection.execute("SHOW search_path").fetchone()[0] == "settings"
    finally:
        store.close()


class _Conflicted(PoolQueue):
    """A queue whose probe the server rolls back ``conflicts`` times (SQLSTATE 40P01, as when it
    breaks a deadlock) before it answers."""

    conflicts = 2
    tries = 0

    @retried
    def probe(self) -> int:
        self.tries += 1
        if self.tries <= self.conflicts:
            self.store.connection.execute(
                "DO $$ BEGIN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END $$"
            )
        return int(self.store.connection.execute("SELECT 42").fetchone()[0])


def test_a_rolled_back_transaction_runs_again_on_the_same_connection(
    pg_server: PgServer, schema: str, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deadlock the server broke is not a lost connection: the operation runs again at once,
    without reconnecting (which would drop the session's LISTENs and settings)."""
    queue = _Conflicted(PostgresStore(pg_server.url(), schema, root=tmp_path), retry_s=60.0)
    request.addfinalizer(queue.store.close)
    reconnects: list[bool] = []
    monkeypatch.setattr(queue, "reconnect", lambda: reconnects.append(True))
    assert queue.probe() == 42
    assert queue.tries == 3 and reconnects == []
    queue.tries, queue.conflicts = 0, 0
    with pytest.raises(psycopg.errors.UndefinedTable):  # any other error is the caller's
        retried(lambda q: q.store.connection.execute("SELECT * FROM no_such_table"))(queue)
