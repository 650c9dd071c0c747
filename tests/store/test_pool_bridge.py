"""The optimizer's end of a pooled experiment on a real PostgreSQL (tests/store/conftest.py): the
evaluator's tasks reach the shared queue with their priorities, every result any pool stores comes
back to the evaluator once, and a result whose notification was lost comes back too."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from pgserver import PgServer
from pooled import ok_result

from emews.core.evaluator import Evaluator
from emews.core.queues import QueuePair
from emews.core.results import Result, Task
from emews.core.space import Float, Space
from emews.runtime.pool_bridge import PoolBridge, PooledQueuePair
from emews.store.pool_queue import PoolQueue
from emews.store.postgres import PostgresStore
from emews.store.results_store import WRITTEN_COLUMNS, _result_row


@pytest.fixture
def stores(pg_server: PgServer, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[PostgresStore]]:
    schema = "b_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    opened = [PostgresStore(pg_server.url(), schema, root=tmp_path) for _ in range(3)]
    PoolQueue(opened[0]).enable()
    yield opened
    for store in opened:
        store.close()


def _queued(store: PostgresStore, n: int) -> bool:
    return store.connection.execute("SELECT count(*) FROM tasks WHERE state = 'queued'").fetchone()[0] >= n


def _until(done, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout  # a safety net against a hang, not a measurement
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_priorities_reach_the_queue_and_results_come_back(stores: list[PostgresStore]) -> None:
    queues = QueuePair()
    received: list[int] = []
    bridge = PoolBridge(
        queues,
        PoolQueue(stores[0]),
        PoolQueue(stores[1]),
        record=lambda results: received.extend(r.id for r in results),
    ).start()
    try:
        evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=2, budget=None)
        low = evaluator.put([{"x": 0.1}, {"x": 0.2}])
        high = evaluator.put([{"x": 0.3}, {"x": 0.4}], priority=5)
        middle = evaluator.put([{"x": 0.5}], priority=1)
        _until(lambda: _queued(stores[2], 5), "the bridge never queued the 5 tasks")
        pool = PoolQueue(stores[2])
        pool_id = pool.register("local", workers=1)
        claimed = pool.claim(pool_id, 5, lease_s=60.0)
        assert [c.task.id for c in claimed] == [*high, *middle, *low]
        assert [c.priority for c in claimed] == [5.0, 5.0, 1.0, 0.0, 0.0]
        pool.complete(pool_id, [ok_result(c.task) for c in claimed])
        results = evaluator.get(5, timeout=60.0)
    finally:
        bridge.close(finished=True)
    assert sorted(r.id for r in results) == sorted([*low, *high, *middle])
    assert sorted(received) == sorted(r.id for r in results)  # each handed back once
    assert PoolQueue(stores[2]).finished()


def test_a_result_whose_notification_was_lost_comes_back(stores: list[PostgresStore]) -> None:
    """A result stored without its NOTIFY (as when the listener's connection dropped at that
    moment) reaches the evaluator at the bridge's next re-read of the tasks it waits for."""
    queues = QueuePair()
    bridge = PoolBridge(queues, PoolQueue(stores[0]), PoolQueue(stores[1]), recheck_s=0.2).start()
    try:
        evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=1, budget=None)
        (task_id,) = evaluator.put([{"x": 0.25}])
        _until(lambda: _queued(stores[2], 1), "the bridge never queued the task")
        task = Task(task_id, {"x": 0.25}, 0, 1.0)
        row = _result_row(ok_result(task))
        stores[2].connection.execute(  # stored quietly: no pg_notify
            f"INSERT INTO results ({','.join(WRITTEN_COLUMNS)}) VALUES ({','.join(['%s'] * len(row))})", row
        )
        (result,) = evaluator.get(1, timeout=60.0)
    finally:
        bridge.close(finished=False)
    assert result.id == task_id and result.objective == 0.25
    assert not PoolQueue(stores[2]).finished()


def test_cancel_reaches_the_shared_queue(stores: list[PostgresStore]) -> None:
    """A task a pool claimed runs to its end; the queued ones are cancelled in the store (no pool
    claims them) and the evaluator no longer waits for them."""
    queues = PooledQueuePair()
    bridge = PoolBridge(queues, PoolQueue(stores[0]), PoolQueue(stores[1])).start()
    try:
        evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=1, budget=4)
        ids = evaluator.put([{"x": i / 10} for i in range(4)])
        _until(lambda: _queued(stores[2], 4), "the bridge never queued the 4 tasks")
        pool = PoolQueue(stores[2])
        pool_id = pool.register("local", workers=1)
        (claimed,) = pool.claim(pool_id, 1, lease_s=60.0)
        assert evaluator.cancel(ids[:3]) == ids[1:3]  # ids[0] was claimed: it runs
        assert evaluator.pending == 2 and evaluator.remaining == 2
        rest = pool.claim(pool_id, 4, lease_s=60.0)
        assert [c.task.id for c in rest] == [ids[3]]
        pool.complete(pool_id, [ok_result(claimed.task), ok_result(rest[0].task)])
        results = evaluator.get(2, timeout=60.0)
    finally:
        bridge.close(finished=False)
    assert sorted(r.id for r in results) == [ids[0], ids[3]]
    assert PoolQueue(stores[2]).cancelled() == set(ids[1:3])


def test_a_pool_that_joins_finds_work_queued(stores: list[PostgresStore]) -> None:
    """The optimizer keeps as many tasks queued beyond what the pools hold as the largest pool
    holds, so a pool that joins claims work at once, before the optimizer's next proposal."""
    pools = PoolQueue(stores[2])
    first = pools.register("local", workers=2, hold=4)
    queues = QueuePair()
    bridge = PoolBridge(queues, PoolQueue(stores[0]), PoolQueue(stores[1])).start()
    try:
        _until(lambda: queues.capacity == 8, "the capacity is never the pool's hold and as many queued ahead")
        evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=1, budget=None)
        evaluator.put([{"x": i / 10} for i in range(evaluator.capacity)])
        _until(lambda: _queued(stores[2], 8), "the bridge never queued the 8 tasks")
        assert len(pools.claim(first, 4, lease_s=60.0)) == 4
        joined = pools.register("elsewhere", workers=2, hold=4)
        assert len(pools.claim(joined, 4, lease_s=60.0)) == 4  # at once: nothing was proposed meanwhile
        _until(lambda: queues.capacity == 12, "the capacity never counts the pool that joined")
    finally:
        bridge.close(finished=False)


def test_results_stored_before_close_are_handed_back(stores: list[PostgresStore]) -> None:
    """close() while the receiving thread is still handing back an earlier batch: a batch stored
    (and announced) meanwhile is read and handed back before the thread ends, not skipped."""
    queues = QueuePair()
    first_seen, release = threading.Event(), threading.Event()
    recorded: list[list[int]] = []

    def record(results: Sequence[Result]) -> None:
        recorded.append(sorted(r.id for r in results))
        first_seen.set()
        release.wait(60.0)  # held until close() has begun

    bridge = PoolBridge(queues, PoolQueue(stores[0]), PoolQueue(stores[1]), record=record).start()
    evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=2, budget=None)
    ids = evaluator.put([{"x": i / 10} for i in range(4)])
    _until(lambda: _queued(stores[2], 4), "the bridge never queued the 4 tasks")
    pool = PoolQueue(stores[2])
    pool_id = pool.register("local", workers=2)
    claimed = pool.claim(pool_id, 4, lease_s=60.0)
    pool.complete(pool_id, [ok_result(c.task) for c in claimed[:2]])
    assert first_seen.wait(60.0), "the first batch never came back"
    pool.complete(pool_id, [ok_result(c.task) for c in claimed[2:]])  # announced while the thread is busy
    closing = threading.Thread(target=bridge.close, kwargs={"finished": False})
    closing.start()
    assert bridge._closing.wait(60.0)
    release.set()
    closing.join(60.0)
    assert not closing.is_alive()
    assert sorted(i for batch in recorded for i in batch) == sorted(ids)
    assert sorted(r.id for r in queues.collect(timeout=0)) == sorted(ids)  # delivered, each once


def test_results_come_with_their_notification_and_a_long_one_is_read_once(
    stores: list[PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Short results reach the evaluator from their notification alone (no read of the store); a
    result too long for a notification is read, once, and handed back once, even when a retry of
    its batch announces every result a second time."""
    pool = PoolQueue(stores[2])
    pool_id = pool.register("local", workers=3)  # before the bridge listens: no wake-up re-read
    listener = PoolQueue(stores[1])
    reads: list[list[int]] = []
    read = listener.results

    def counted(ids: Sequence[int], params: dict | None = None) -> list[Result]:  # type: ignore[type-arg]
        reads.append(sorted(ids))
        return read(ids, params)

    monkeypatch.setattr(listener, "results", counted)
    queues = QueuePair()
    received: list[int] = []
    bridge = PoolBridge(  # no re-read of the tasks waited for while the test runs
        queues, PoolQueue(stores[0]), listener, record=lambda rs: received.extend(r.id for r in rs), recheck_s=600.0
    ).start()
    try:
        evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=3, budget=None)
        ids = evaluator.put([{"x": 0.1}, {"x": 0.2}, {"x": 0.3}])
        _until(lambda: _queued(stores[2], 3), "the bridge never queued the 3 tasks")
        claimed = pool.claim(pool_id, 3, lease_s=60.0)
        written = [ok_result(c.task) for c in claimed]
        written[2].metrics = {"curve": [i / 3 for i in range(1000)]}  # longer than a notification holds
        assert pool.complete(pool_id, written) == ids
        assert pool.complete(pool_id, written) == ids  # a retry: each announced again, by id
        results = evaluator.get(3, timeout=60.0)
    finally:
        bridge.close(finished=False)
    assert sorted(r.id for r in results) == ids
    assert {r.id: r.metrics for r in results}[ids[2]] == written[2].metrics
    assert reads == [[ids[2]]]  # the long one only, once
    assert sorted(received) == ids and queues.collect(timeout=0) == []  # each handed back once


def test_start_returns_once_the_capacity_counts_the_pools(stores: list[PostgresStore]) -> None:
    """A pool of 1 worker holding 2 is registered (the first job's own pool is, before its bridge
    starts). ``start`` returns only once the evaluator's capacity counts it and as much again
    queued ahead (4): here the ``pools`` table is locked by another transaction, and ``start``
    waits for it. (The receiving thread read the holds after ``start`` returned: an optimizer
    proposing at once saw a capacity of its workers, 1; a sweep queued 2 tasks and waited for a
    result, and a pool attached next found nothing while the first pool's tasks ran.)"""
    PoolQueue(stores[2]).register("local", workers=1, hold=2)
    queues = QueuePair()
    bridge = PoolBridge(queues, PoolQueue(stores[0]), PoolQueue(stores[1]))
    blocker = stores[2].connection
    started = threading.Event()
    with blocker.transaction():
        blocker.execute("LOCK TABLE pools IN ACCESS EXCLUSIVE MODE")
        starting = threading.Thread(target=lambda: (bridge.start(), started.set()))
        starting.start()
        waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'pools'::regclass"
        _until(lambda: blocker.execute(waiting).fetchone()[0] >= 1, "nothing waits for the pools table")
        assert not started.is_set()  # start() has not returned while the pools' holds cannot be read
    starting.join(timeout=60.0)
    try:
        assert started.is_set() and queues.capacity == 4
        assert Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=1, budget=None).capacity == 4
    finally:
        bridge.close(finished=False)
