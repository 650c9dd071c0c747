"""The pools' shared queue on a real PostgreSQL server (tests/store/conftest.py): claims never
overlap, an expired lease is claimed again under the same id, a second result for a task is
ignored, and a listener learns of results by notification."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pgserver import PgServer
from pooled import ok_result

from emews.core.errors import ConfigError, EmewsError
from emews.core.results import Result, Status, Task
from emews.job.cancelling import cancel_queued
from emews.job.rank_zero import take_optimizer_lock
from emews.store.pool_queue import NOTE_ROW_MAX, Announced, OptimizerRunning, PoolQueue, queue_for_a_pool
from emews.store.postgres import PostgresStore
from emews.store import postgres_queries
from emews.store.postgres_queries import SCHEMA_VERSION
from testutil import wait_until

_LEASE = 600.0  # long enough never to end during a test
_ENDED = -1.0  # a lease that has already ended


def _task(i: int) -> Task:
    return Task(i, {"x": i / 4}, 100 + i, 1000.0 + i)


def _result(i: int, value: float) -> Result:
    return ok_result(_task(i), value, host="node", started=1000.5 + i, finished=1001.0 + i)


def _announced_ids(listener: PoolQueue, n: int) -> list[int]:
    """The ids of results ``listener`` is told of until ``n`` were (a pool's start, announced too
    and maybe delivered first, adds none)."""
    return _announced(listener, n).every_id


def test_two_claimers_never_get_the_same_task(stores: list[PostgresStore]) -> None:
    optimizer, *pools = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(i) for i in range(200)])
    ids = [q.register("local", workers=2) for q in pools]
    got: list[list[int]] = [[], []]
    start = threading.Barrier(2)

    def drain(k: int) -> None:
        start.wait()
        while batch := pools[k].claim(ids[k], 3, _LEASE):
            got[k] += [c.task.id for c in batch]

    threads = [threading.Thread(target=drain, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not set(got[0]) & set(got[1])
    assert sorted(got[0] + got[1]) == list(range(200))
    assert len(got[0]) == len(set(got[0])) and len(got[1]) == len(set(got[1]))


def test_claim_takes_priority_then_id(stores: list[PostgresStore]) -> None:
    optimizer, pool, _ = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(i) for i in range(4)])
    optimizer.enqueue([_task(i) for i in range(4, 6)], priority=5.0)
    me = pool.register("local", workers=1)
    assert [c.task.id for c in pool.claim(me, 3, _LEASE)] == [4, 5, 0]
    assert [c.priority for c in pool.claim(me, 1, _LEASE)] == [0.0]


def test_an_expired_lease_is_claimed_again(stores: list[PostgresStore]) -> None:
    optimizer, dead, alive = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(i) for i in range(3)])
    a, b = dead.register("local", workers=1), alive.register("local", workers=1)
    assert [c.task.id for c in dead.claim(a, 2, _ENDED)] == [0, 1]
    again = alive.claim(b, 5, _LEASE)  # the dead pool's tasks, same ids, one more attempt
    assert [(c.task.id, c.attempt) for c in again] == [(0, 1), (1, 1), (2, 0)]
    assert alive.claim(b, 5, _LEASE) == []


def test_requeue_and_renew(stores: list[PostgresStore]) -> None:
    optimizer, pool, other = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(i) for i in range(2)])
    me, you = pool.register("local", workers=1), other.register("local", workers=1)
    pool.claim(me, 2, _ENDED)
    assert pool.renew(me, _LEASE, [0, 1]) == 2  # renewed in time: nothing to requeue or claim
    assert optimizer.requeue_expired() == [] and other.claim(you, 2, _LEASE) == []
    pool.renew(me, _ENDED, [0, 1])
    assert optimizer.requeue_expired() == [0, 1]
    assert [(c.task.id, c.attempt) for c in other.claim(you, 2, _LEASE)] == [(0, 1), (1, 1)]


def test_a_duplicate_result_is_ignored(stores: list[PostgresStore]) -> None:
    optimizer, dead, alive = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(0), _task(1)])
    a, b = dead.register("local", workers=1), alive.register("local", workers=1)
    dead.claim(a, 1, _ENDED)
    alive.claim(b, 1, _LEASE)  # task 0 again
    assert alive.complete(b, [_result(0, 1.5)]) == [0]
    assert dead.complete(a, [_result(0, 9.0)]) == []  # the presumed-dead pool's late result
    rows = stores[0].connection.execute("SELECT id, objective, pool FROM results ORDER BY id").fetchall()
    assert rows == [(0, 1.5, b)]
    assert [r.objective for r in stores[0]] == [1.5]
    done = {p.id: p.tasks_done for p in optimizer.pools()}
    assert done == {a: 0, b: 1}
    assert [c.task.id for c in alive.claim(b, 5, _LEASE)] == [1]  # a done task is never claimed


def test_a_listener_learns_of_results(stores: list[PostgresStore]) -> None:
    optimizer, pool, _ = (PoolQueue(s) for s in stores)
    optimizer.listen()
    optimizer.enqueue([_task(i) for i in range(3)])
    me = pool.register("local", workers=3)
    pool.claim(me, 3, _LEASE)
    pool.complete(me, [_result(0, 0.0), _result(1, 1.0)])
    pool.complete(me, [_result(2, 2.0)])
    assert sorted(_announced_ids(optimizer, 3)) == [0, 1, 2]
    assert not math.isnan(optimizer.pools()[0].heartbeat or math.nan)


def test_pools_need_postgresql(tmp_path: Path) -> None:
    from emews.store.results_store import ResultsStore

    with ResultsStore(tmp_path / "results.db", root=tmp_path) as sqlite, pytest.raises(TypeError, match="PostgreSQL"):
        PoolQueue(sqlite)  # type: ignore[arg-type]


def test_a_version_2_store_gains_the_queue(pg_server: PgServer, schema: str, tmp_path: Path) -> None:
    """A store written before pools (schema version 2) is migrated when opened for writing; its
    tasks keep state NULL (recorded by a single job), so no pool claims them."""
    from emews.store import postgres_queries as q

    with PostgresStore(pg_server.url(), schema, root=tmp_path) as old:
        raw = old.connection
        raw.execute("DROP TABLE pools")
        for table, column in (
            ("tasks", "state"),
            ("tasks", "priority"),
            ("tasks", "pool"),
            ("tasks", "lease_until"),
            ("results", "pool"),
        ):
            raw.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        raw.execute(q.SET_VERSION, ("2",))
        old.commit([_task(0)], [])
    with PostgresStore(pg_server.url(), schema, root=tmp_path) as new:
        assert {"state", "priority", "pool", "lease_until"} <= set(new._columns("tasks"))
        assert new.connection.execute(q.GET_VERSION).fetchone()[0] == str(q.SCHEMA_VERSION)
        queue = PoolQueue(new)
        me = queue.register("local", workers=1)
        assert queue.claim(me, 5, _LEASE) == []
        queue.enqueue([_task(1)])
        assert [c.task.id for c in queue.claim(me, 5, _LEASE)] == [1]


@pytest.mark.parametrize("behind", [0, 1], ids=["current", "a-step-behind-that-changes-no-table"])
def test_opening_a_current_store_waits_for_no_table_lock(
    pg_server: PgServer, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, behind: int
) -> None:
    """A store of this version opened for writing (a pool attaching mid-run) runs no DDL: ALTER
    TABLE ... IF NOT EXISTS waited for the running pools' statements (ROW EXCLUSIVE on results and
    tasks) and could deadlock with one. Nor does one of version 4 (the step to 5 changes no table:
    only its version is set). Here such a statement's transaction stays open while the store
    opens; a lock wait would end in the lock timeout set for the store's session."""
    import psycopg

    if behind:  # as the step from 4 to 5 was (the step to 6 adds results.seed): no table changes
        monkeypatch.setitem(postgres_queries.MIGRATIONS, SCHEMA_VERSION, ())
    with PostgresStore(pg_server.url(), schema, root=tmp_path) as created:  # created at this version
        created.connection.execute(
            "UPDATE emews_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION - behind),)
        )
    with psycopg.connect(pg_server.url(), autocommit=True) as pool, pool.transaction():
        pool.execute(f'SET LOCAL search_path TO "{schema}"')
        pool.execute("LOCK TABLE results, tasks, pools IN ROW EXCLUSIVE MODE")
        monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=10s")  # the store's session (libpq)
        with PostgresStore(pg_server.url(), schema, root=tmp_path) as again:
            assert again.connection.execute("SHOW lock_timeout").fetchone()[0] == "10s"
            assert PoolQueue(again).state_counts() == {}
            assert again.schema_version == SCHEMA_VERSION


def _indexes(store: PostgresStore) -> set[str]:
    rows = store.connection.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
    return {name for (name,) in rows}


def test_a_version_3_store_gets_the_queued_only_index(pg_server: PgServer, schema: str, tmp_path: Path) -> None:
    """A store of schema version 3 (one claim index over queued and leased tasks) is migrated when
    opened for writing: that index goes, the queued-only and leases indexes come, and its queued
    and expired tasks are claimed as before (the expired one with one more attempt)."""
    from emews.store import postgres_queries as q

    with PostgresStore(pg_server.url(), schema, root=tmp_path) as old:
        raw = old.connection
        raw.execute("DROP INDEX tasks_queued")
        raw.execute("DROP INDEX tasks_leases")
        raw.execute("CREATE INDEX tasks_queue ON tasks (priority DESC, id) WHERE state IN ('queued', 'leased')")
        raw.execute(q.SET_VERSION, ("3",))
        queue = PoolQueue(old)
        me = queue.register("local", workers=1)
        queue.enqueue([_task(i) for i in range(3)])
        queue.claim(me, 1, _ENDED)  # task 0: its lease has ended
    with PostgresStore(pg_server.url(), schema, root=tmp_path, readonly=True) as reader:
        assert "tasks_queue" in _indexes(reader)  # read as it is
    with PostgresStore(pg_server.url(), schema, root=tmp_path) as new:
        assert new.connection.execute(q.GET_VERSION).fetchone()[0] == str(q.SCHEMA_VERSION)
        assert {"tasks_queued", "tasks_leases"} <= _indexes(new) and "tasks_queue" not in _indexes(new)
        queue = PoolQueue(new)
        you = queue.register("local", workers=1)
        got = queue.claim(you, 5, _LEASE)
        assert [(c.task.id, c.attempt) for c in got] == [(0, 1), (1, 0), (2, 0)]


def test_a_claim_whose_answer_was_lost_is_not_kept_alive(stores: list[PostgresStore]) -> None:
    """Tasks leased to a pool that never learnt of them (the claim committed, its answer lost with
    the connection) are not renewed by its heartbeats: their lease ends and another pool runs them."""
    optimizer, pool, other = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(i) for i in range(4)])
    me, you = pool.register("local", workers=1), other.register("local", workers=1)
    pool.claim(me, 2, 1.0)  # tasks 0 and 1: the answer "lost"
    held = pool.claim(me, 2, _LEASE)  # the retry got 2 and 3
    assert [c.task.id for c in held] == [2, 3]
    got: list[int] = []
    deadline = time.monotonic() + 30.0  # a safety net: the lost claim's 1 s lease ends long before
    while not got and time.monotonic() < deadline:
        # heartbeats keep only 2 and 3 (for the whole test: a 1 s renewal could end between two
        # rounds of a loaded machine, and the other pool would take them too)
        assert pool.renew(me, _LEASE, [c.task.id for c in held]) == 2
        got = [c.task.id for c in other.claim(you, 4, _LEASE)]
        time.sleep(0.05)
    assert got == [0, 1]


def test_a_task_too_large_for_a_pool_is_left_to_another(stores: list[PostgresStore]) -> None:
    optimizer, small, large = (PoolQueue(s) for s in stores)
    optimizer.enqueue([Task(0, {"x": 0.0}, 0, 1.0, ranks=8), _task(1)])
    s, big = small.register("local", workers=4), large.register("local", workers=8)
    assert [c.task.id for c in small.claim(s, 5, _LEASE, fits=4)] == [1]
    assert [c.task.id for c in large.claim(big, 5, _LEASE, fits=8)] == [0]


def test_big_batches_are_stored_and_announced(stores: list[PostgresStore]) -> None:
    """More results than one statement's parameters or one notification's 8,000 bytes hold."""
    optimizer, pool = PoolQueue(stores[0]), PoolQueue(stores[1])
    optimizer.listen()
    tasks = [_task(i) for i in range(10_000_000, 10_002_500)]
    optimizer.enqueue(tasks)
    me = pool.register("local", workers=1)
    claimed = pool.claim(me, 3000, _LEASE)
    results = [Result(c.task.id, c.task.params, Status.OK, 1.0, 1.0, {}, None, 1, "h", 0.0, 1.0, 2.0) for c in claimed]
    assert pool.complete(me, results) == [t.id for t in tasks]
    assert pool.complete(me, results) == [t.id for t in tasks]  # a retry of the same batch: the same answer
    announced = set(_announced_ids(optimizer, len(tasks)))  # each once per complete (the bridge takes each once)
    assert sorted(announced) == [t.id for t in tasks]


def test_values_json_cannot_hold_come_back_as_written(stores: list[PostgresStore]) -> None:
    """A batch travels as one JSON document: infinity and NaN, quotes, backslashes and non-ASCII
    text, nulls and metrics come back from the store as they were written."""
    optimizer, pool, _ = (PoolQueue(s) for s in stores)
    params = {"name": 'a "quoted" \\ path é ✓', "x": 0.1}
    optimizer.enqueue([Task(0, params, 7, 1000.0, priority=2), Task(1, {"x": 1e-300}, 8, 1001.0), Task(0, {}, 9, 0.0)])
    me = pool.register("local", workers=2)
    claimed = pool.claim(me, 5, _LEASE)
    assert [(c.task.id, c.task.params, c.task.seed, c.priority) for c in claimed] == [
        (0, params, 7, 2.0),  # the first of an id in a batch stands
        (1, {"x": 1e-300}, 8, 0.0),
    ]
    written = [
        Result(0, params, Status.OK, math.inf, 1.5, {"m": math.nan, "s": "é"}, None, 1, "h", 1.0, 2.0, 3.0),
        Result(1, {"x": 1e-300}, Status.FAILED, None, math.inf, {}, 'boom: "x" \\ ✓', None, None, None, None, None),
    ]
    assert pool.complete(me, written) == [0, 1]
    ok, failed = optimizer.results([0, 1])
    assert (ok.objective, ok.loss, ok.params, ok.metrics["s"]) == (math.inf, 1.5, params, "é")
    assert math.isnan(ok.metrics["m"])
    assert (failed.status, failed.objective, failed.loss, failed.error) == (
        Status.FAILED,
        None,
        math.inf,
        written[1].error,
    )
    assert failed.rank is None and failed.submitted is None
    known = optimizer.results([1], {1: {"x": "as put"}})  # the optimizer's own point is not read again
    assert known[0].params == {"x": "as put"} and known[0].status is Status.FAILED


def test_complete_and_claim_stores_then_claims_in_one_statement(stores: list[PostgresStore]) -> None:
    """A batch of results and the next claim together: the results stored once, the claim in
    priority order, and a task being completed never claimed by the same statement, even when its
    lease ended or it was queued again (a pool presumed dead that reports after all)."""
    optimizer, pool, other = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(i) for i in range(6)])
    me, you = pool.register("local", workers=1), other.register("local", workers=1)
    assert [c.task.id for c in pool.claim(me, 2, _ENDED)] == [0, 1]  # both leases ended
    assert optimizer.state_counts() == {"queued": 4, "leased": 2, "expired": 2}  # as emews status says
    assert optimizer.requeue_expired() == [0, 1]  # 0 and 1 queued again
    stored, claimed = pool.complete_and_claim(me, [_result(0, 0.0), _result(1, 1.0)], 3, _LEASE)
    assert stored == [0, 1] and [c.task.id for c in claimed] == [2, 3, 4]
    stored, claimed = other.complete_and_claim(you, [_result(0, 9.0)], 5, _LEASE)
    assert stored == [] and [c.task.id for c in claimed] == [5]  # the first result of 0 stands
    stored, claimed = pool.complete_and_claim(me, [_result(2, 2.0)], 0, _LEASE)
    assert stored == [2] and claimed == []
    counts = optimizer.state_counts()
    assert counts == {"done": 3, "leased": 3}
    assert [r.objective for r in optimizer.results([0, 1, 2])] == [0.0, 1.0, 2.0]


def test_a_task_whose_pool_dies_after_the_optimizer_finished_is_cancelled_not_pending(
    stores: list[PostgresStore],
) -> None:
    """A pooled resume of a killed run finished while the dead pools' leases had not ended: their
    tasks stayed ``leased`` for good ("4 leased (past their lease: queued again at the next claim)"
    in ``emews status`` of a complete experiment). A lease that ends after the finish is the
    finish's to cancel, as the ones past their lease then: counted cancelled, claimed by no pool,
    and stored cancelled when the next optimizer starts."""
    optimizer, dead, alive = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(i) for i in range(4)])
    gone, live = dead.register("local", workers=2), alive.register("local", workers=1)
    assert [c.task.id for c in dead.claim(gone, 2, _LEASE)] == [0, 1]
    assert [c.task.id for c in alive.claim(live, 1, _LEASE)] == [2]
    optimizer.finish()  # 3 was queued: cancelled; 0 and 1 leased under leases not yet ended
    assert optimizer.state_counts() == {"leased": 3, "cancelled": 1}
    assert dead.renew(gone, _ENDED, [0, 1]) == 2  # its leases end: the pool died holding them
    assert optimizer.state_counts() == {"leased": 1, "cancelled": 3}  # 2 is the live pool's, running
    assert alive.claim(live, 4, _LEASE) == []  # nothing to run again for a run that is over
    optimizer.enable()  # the next optimizer (a resume with a larger budget)
    assert optimizer.cancelled() == {0, 1, 3} and optimizer.state_counts() == {"leased": 1, "cancelled": 3}


def _announced(listener: PoolQueue, n: int) -> Announced:
    """What ``listener`` is told until ``n`` results were announced (rows and ids gathered)."""
    rows: dict[int, Sequence[Any]] = {}
    ids: list[int] = []
    deadline = time.monotonic() + 60.0  # a safety net against a hang, not a measurement
    while len(rows) + len(ids) < n:
        assert time.monotonic() < deadline, f"{len(rows) + len(ids)} of {n} results announced"
        got = listener.receive(5.0)
        rows.update(got.rows)
        ids += got.ids
    return Announced(rows, ids)


def test_a_notification_carries_the_results_as_stored(stores: list[PostgresStore]) -> None:
    """The results a pool stores travel with their notification, as the store reads them back
    (what JSON has no number for, quotes, non-ASCII, nulls); one longer than NOTE_ROW_MAX, and
    every one of a batch stored again (a retry after a lost commit), travel as ids to read."""
    optimizer, pool, _ = (PoolQueue(s) for s in stores)
    optimizer.listen()
    params = {"name": 'a "quoted" \\ path é ✓', "x": 0.1}
    optimizer.enqueue([Task(0, params, 7, 1000.0), Task(1, {"x": 1e-300}, 8, 1001.0), _task(2)])
    me = pool.register("local", workers=3)
    pool.claim(me, 3, _LEASE)
    long = {"curve": [i / 3 for i in range(NOTE_ROW_MAX // 10)]}
    written = [
        Result(0, params, Status.OK, math.inf, 1.5, {"m": math.nan, "s": "é"}, None, 1, "h", 1.0, 2.0, 3.0),
        Result(1, {"x": 1e-300}, Status.FAILED, None, math.inf, {}, 'boom: "x" \\ ✓', None, None, None, None, 2.0),
        Result(2, {"x": 0.5}, Status.OK, 0.1 + 0.2, 2.0, long, None, 1, "h", 1.0, 2.0, 3.0),
    ]
    assert pool.complete(me, written) == [0, 1, 2]
    announced = _announced(optimizer, 3)
    assert sorted(announced.rows) == [0, 1] and list(announced.ids) == [2]
    carried = optimizer.carried(announced, {0: params, 1: {"x": "as put"}, 2: {"x": 0.5}})
    read = optimizer.results([0, 1], {1: {"x": "as put"}})
    assert [repr(r) for r in carried] == [repr(r) for r in read]  # NaN included; 2 was not carried
    assert carried[1].params == {"x": "as put"} and math.isinf(carried[0].objective or 0.0)
    assert pool.complete(me, written) == [0, 1, 2]  # the retry: announced by id, read if still wanted
    again = _announced(optimizer, 3)
    assert not again.rows and sorted(again.ids) == [0, 1, 2]


def test_notifications_stay_under_the_payload_limit(stores: list[PostgresStore]) -> None:
    """Results of every length about NOTE_ROW_MAX in one batch: each notification fits under
    PostgreSQL's 8,000 bytes (the statement would fail otherwise) and each result is announced once."""
    optimizer, pool, _ = (PoolQueue(s) for s in stores)
    optimizer.listen()
    optimizer.enqueue([_task(i) for i in range(60)])
    me = pool.register("local", workers=1)
    pool.claim(me, 60, _LEASE)
    written = [
        Result(
            i,
            {"x": i / 4},
            Status.FAILED,
            None,
            math.inf,
            {},
            "e" * (NOTE_ROW_MAX - 190 + 5 * i),
            1,
            "h",
            1.0,
            2.0,
            3.0,
        )
        for i in range(60)
    ]
    assert pool.complete(me, written) == list(range(60))
    announced = _announced(optimizer, 60)
    assert sorted(announced.every_id) == list(range(60))
    assert announced.rows and announced.ids  # some rows fit, some did not
    assert [r.error for r in optimizer.carried(announced, {i: {} for i in range(60)})] == [
        written[i].error for i in sorted(announced.rows)
    ]


def test_a_pool_of_an_earlier_emews_is_still_heard(stores: list[PostgresStore]) -> None:
    """A pool started by an emews that announced comma-separated ids (before results travelled
    with their notification) is heard by an optimizer updated since: its ids are read."""
    optimizer, earlier = PoolQueue(stores[0]), stores[1]
    optimizer.listen()
    earlier.connection.execute("SELECT pg_notify(%s, %s)", (optimizer.channel, "3,4,11"))
    earlier.connection.execute("SELECT pg_notify(%s, %s)", (optimizer.channel, "12"))
    announced = _announced(optimizer, 4)
    assert not announced.rows and sorted(announced.ids) == [3, 4, 11, 12]
    earlier.connection.execute("SELECT pg_notify(%s, %s)", (optimizer.channel, "3,x"))
    with pytest.raises(EmewsError, match="not understood"):
        _announced(optimizer, 1)


def test_a_pool_refuses_an_older_running_optimizer(pg_server: PgServer, schema: str, tmp_path: Path) -> None:
    """A store still at the schema before results travelled with their notification, while an
    optimizer holds its lock: a pool of this emews is refused in one message (the optimizer would
    not read what it announces). Once that optimizer is gone the pool may open it, which brings
    the store up to date, and an older emews then refuses the store."""
    older = PostgresStore(pg_server.url(), schema, root=tmp_path)
    older.connection.execute(
        "UPDATE emews_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),)
    )
    optimizer = PoolQueue(older)
    optimizer.lock_optimizer()
    peek = PostgresStore(pg_server.url(), schema, readonly=True, root=tmp_path)
    pool = PoolQueue(peek)
    assert pool.optimizer_running()
    with pytest.raises(ConfigError, match="older emews") as refused:
        pool.require_current_optimizer()
    assert refused.value.key == "emews version" and str(SCHEMA_VERSION - 1) in str(refused.value)
    older.close()  # the optimizer's connection ends: its lock with it, once the server has ended its session
    assert wait_until(lambda: not pool.optimizer_running(), 30.0)
    pool.require_current_optimizer()
    peek.close()
    current = PostgresStore(pg_server.url(), schema, root=tmp_path)
    assert current.schema_version == SCHEMA_VERSION
    PoolQueue(current).require_current_optimizer()  # up to date: no question asked
    current.close()


def test_a_refused_optimizer_leaves_an_older_store_as_it_was(pg_server: PgServer, schema: str, tmp_path: Path) -> None:
    """While an optimizer of an older emews serves the experiment (its store at the schema before,
    its lock held), ``emews serve`` and ``emews cancel --queued`` of this emews are refused and
    leave the store at its version: opened for writing first, it was brought up to date, and a
    pool of this emews then passed its check and announced what that optimizer cannot read."""
    (tmp_path / "experiment.json").write_text(json.dumps({"store": {"url": pg_server.url(), "schema": schema}}))
    older = PostgresStore(pg_server.url(), schema, root=tmp_path)
    optimizer = PoolQueue(older)
    optimizer.enable()
    older.connection.execute(
        "UPDATE emews_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION - 1),)
    )
    optimizer.lock_optimizer()
    with pytest.raises(OptimizerRunning):
        take_optimizer_lock(tmp_path, "emews serve")  # emews serve, or a job's rank 0
    with pytest.raises(ConfigError, match="optimizer is running"):
        cancel_queued(tmp_path)
    with pytest.raises(ConfigError, match="older emews"):
        queue_for_a_pool(tmp_path).store.close()
    assert older.schema_version == SCHEMA_VERSION - 1
    older.close()


def test_a_pool_for_an_experiment_not_run_yet_on_sqlite_is_refused_for_it(tmp_path: Path) -> None:
    """An experiment with SQLite whose store does not exist yet (its job still queued): refused for
    its store (``store.url``), with nothing created, as one that has run."""
    with pytest.raises(ConfigError, match="PostgreSQL") as refused:
        queue_for_a_pool(tmp_path)
    assert refused.value.key == "store.url" and list(tmp_path.iterdir()) == []


def test_a_nul_in_a_result_text_does_not_lose_the_batch(stores: list[PostgresStore]) -> None:
    """A command's error quotes its stderr, which may hold NUL bytes, which PostgreSQL's text
    cannot: the batch is stored (the NUL as U+FFFD, as undecodable bytes are) instead of failing
    the pool's statement, which lost every result of the batch and, the task run again, the next pool too."""
    optimizer, pool, _ = (PoolQueue(s) for s in stores)
    optimizer.enqueue([_task(0), _task(1)])
    me = pool.register("local", workers=2)
    pool.claim(me, 2, _LEASE)
    bad = Result(0, {"x": 0.0}, Status.FAILED, None, math.inf, {}, "exit 1: a\x00b", 1, "h\x00", 1.0, 2.0, 3.0)
    assert pool.complete(me, [bad, _result(1, 1.0)]) == [0, 1]
    stored = optimizer.results([0, 1])
    assert (stored[0].error, stored[0].host) == ("exit 1: a\ufffdb", "h\ufffd") and stored[1].objective == 1.0


def test_an_optimizer_in_a_copy_of_the_database_is_not_this_ones(pg_server: PgServer, tmp_path: Path) -> None:
    """A database made from another (``CREATE DATABASE ... TEMPLATE``: a staging copy) has the same
    schema oids, so the same optimizer lock keys; advisory locks are per database, and so is the
    look at ``pg_locks``: an optimizer of the copy is not one of the original's experiment."""
    import psycopg

    with psycopg.connect(pg_server.url(), autocommit=True) as admin:
        for name in ("lock_original", "lock_copy"):
            admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute("CREATE DATABASE lock_original")
        PostgresStore(pg_server.url("lock_original"), "exp", root=tmp_path).close()
        admin.execute("CREATE DATABASE lock_copy TEMPLATE lock_original")
    try:
        copy = PoolQueue(PostgresStore(pg_server.url("lock_copy"), "exp", root=tmp_path))
        copy.lock_optimizer()
        original = PoolQueue(PostgresStore(pg_server.url("lock_original"), "exp", root=tmp_path))
        assert not original.optimizer_running()
        original.lock_optimizer()  # the server agrees: a lock of its own database
        assert original.optimizer_running()
        original.store.close()
        copy.store.close()
    finally:
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            for name in ("lock_original", "lock_copy"):
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
