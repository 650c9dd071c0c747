"""Two pools' feeders on one experiment's real PostgreSQL store (tests/store/conftest.py): each feeds
its own queue pair, drained by a thread that evaluates tasks as a distributor's workers would; the
optimizer's side queues the tasks and learns every result by notification."""

from __future__ import annotations

import os
import selectors
import socket
import threading
import time
from pathlib import Path

from pooled import ok_result

from emews.core.queues import QueuePair
from emews.core.results import Task
from emews.runtime.pool_feeder import PoolFeeder, PoolQueuePair
from emews.store.pool_queue import PoolQueue
from emews.store.postgres import PostgresStore
from emews.training.messages import CheckpointNote, Report
from testutil import wait_until

TASKS = 40


def _evaluate(queues: QueuePair, host: str, stop: threading.Event, first: threading.Barrier | None = None) -> None:
    """Stands in for a distributor and its workers: each task queued is run and its result delivered
    (with ``first``, not before every pool has a task: a pool holds a few, so each gets some)."""
    while not stop.is_set():
        if not queues.tasks:
            queues.new_tasks.wait(0.05)
            queues.new_tasks.clear()
            continue
        task: Task = queues.tasks.popleft()
        if first is not None:
            first.wait(timeout=60.0)
            first = None
        x = float(task.params["x"])
        queues.deliver([ok_result(task, x * x, host=host, started=(now := time.time()), finished=now)])


def _collect_all(optimizer: PoolQueue) -> list[int]:
    seen: list[int] = []
    deadline = time.monotonic() + 120.0  # a safety net against a hang, not a measurement
    while len(seen) < TASKS:
        assert time.monotonic() < deadline, f"{len(seen)} of {TASKS} results notified"
        seen += optimizer.receive(timeout=5.0).every_id  # [] also when a pool's start or end was announced
    return seen


def _pool(store: PostgresStore, host: str, lease_s: float) -> tuple[PoolFeeder, PoolQueuePair]:
    queue = PoolQueue(store)
    queues = PoolQueuePair()
    return PoolFeeder(queue, queues, queue.register("local", workers=2, host=host), hold=3, lease_s=lease_s), queues


def test_two_pools_share_an_experiment(stores: list[PostgresStore]) -> None:
    optimizer = PoolQueue(stores[0])
    optimizer.listen()
    pools = [_pool(stores[k], f"host{k}", lease_s=60.0) for k in (1, 2)]
    stop = threading.Event()
    threads = [threading.Thread(target=f.run) for f, _ in pools]
    both = threading.Barrier(2)
    threads += [threading.Thread(target=_evaluate, args=(q, f"host{k}", stop, both)) for k, (_, q) in enumerate(pools)]
    for t in threads:
        t.start()
    try:
        optimizer.enqueue([Task(i, {"x": i / 8}, i, 1000.0 + i) for i in range(TASKS)])
        seen = _collect_all(optimizer)
    finally:
        stop.set()
        for f, _ in pools:
            f.stop()
        for t in threads:
            t.join()
    assert sorted(seen) == list(range(TASKS))
    rows = stores[0].connection.execute("SELECT id, pool, host FROM results ORDER BY id").fetchall()
    assert [r[0] for r in rows] == list(range(TASKS))  # every task stored exactly once
    by_pool = {f.pool: f.stored for f, _ in pools}
    assert all(by_pool.values()), f"a pool ran nothing: {by_pool}"
    assert {r[0]: r[1] for r in rows} == {i: p for p, ids in by_pool.items() for i in ids}
    listed = optimizer.pools()
    assert [p.tasks_done for p in listed] == [len(by_pool[p.id]) for p in listed]
    assert all(p.stopped is not None for p in listed)


def test_a_lost_pools_tasks_run_elsewhere(stores: list[PostgresStore]) -> None:
    """A pool that claims and then stops answering (as after kill -9): once its short leases end the
    other pool runs those tasks; its late results are then ignored. 0 lost, 0 duplicates."""
    optimizer = PoolQueue(stores[0])
    optimizer.listen()
    optimizer.enqueue([Task(i, {"x": i / 8}, i, 1000.0 + i) for i in range(TASKS)])
    lost, lost_queues = _pool(stores[1], "lost", lease_s=1.0)
    lost.step()  # claims 3 tasks into its queue, which nothing will run
    held = [t.id for t in lost_queues.tasks]
    assert len(held) == 3
    alive, queues = _pool(stores[2], "alive", lease_s=6.0)  # idle, it claims again at each heartbeat (2 s)
    stop = threading.Event()
    threads = [
        threading.Thread(target=alive.run),
        threading.Thread(target=_evaluate, args=(queues, "alive", stop)),
    ]
    for t in threads:
        t.start()
    try:
        seen = _collect_all(optimizer)
    finally:
        stop.set()
        alive.stop()
        for t in threads:
            t.join()
    assert sorted(seen) == list(range(TASKS)) and sorted(alive.stored) == list(range(TASKS))
    attempts = dict(stores[0].connection.execute("SELECT id, attempt FROM tasks").fetchall())
    assert all(attempts[i] == 1 for i in held)
    # the lost pool wakes up and sends its (late) results: ignored, the first ones stand
    for task in list(lost_queues.tasks):
        lost_queues.deliver([ok_result(task, -1.0, host="lost", started=0.0, finished=0.0)])
    lost.step()
    assert sorted(lost.late) == sorted(held) and lost.stored == []
    rows = stores[0].connection.execute("SELECT id, host FROM results ORDER BY id").fetchall()
    assert rows == [(i, "alive") for i in range(TASKS)]


def test_the_read_ahead_grows_for_short_tasks_only(stores: list[PostgresStore]) -> None:
    """Tasks done at once drain what the pool holds: its hold doubles (up to its maximum) and the
    store's row says so; a pool whose tasks are still running keeps its first hold."""
    optimizer = PoolQueue(stores[0])
    optimizer.enqueue([Task(i, {"x": i / 8}, i, 1000.0 + i) for i in range(TASKS)])
    queue = PoolQueue(stores[1])
    queues = PoolQueuePair()
    short = PoolFeeder(queue, queues, queue.register("local", workers=2, hold=2), hold=2, lease_s=60.0, max_hold=16)
    stop = threading.Event()
    worker = threading.Thread(target=_evaluate, args=(queues, "h", stop))
    worker.start()
    try:
        deadline = time.monotonic() + 120.0  # a safety net against a hang, not a measurement
        while len(short.stored) < TASKS and time.monotonic() < deadline:
            if not short.step():
                short.sleep()
    finally:
        stop.set()
        worker.join()
    assert sorted(short.stored) == list(range(TASKS))
    assert short.hold > 2
    holds = dict(stores[0].connection.execute("SELECT id, hold FROM pools").fetchall())
    assert holds[short.pool] == short.hold
    assert optimizer.live_capacity(60.0) == short.hold
    optimizer.enqueue([Task(i, {"x": 0.5}, i, 2000.0) for i in range(TASKS, TASKS + 10)])
    busy = PoolFeeder(
        queue, PoolQueuePair(), queue.register("local", workers=2, hold=2), hold=2, lease_s=60.0, max_hold=16
    )
    for _ in range(5):  # nothing runs its tasks: nothing turns over
        busy.step()
    assert busy.hold == 2 and busy.held == 2


def test_the_read_ahead_stays_for_tasks_longer_than_a_round_trip(stores: list[PostgresStore]) -> None:
    """Tasks that ran 3 s each (their recorded times): every result turns over what the pool holds
    and its worker takes the next task at once, so the distributor's queue is empty then too; the
    hold must stay (it doubled at every turn-over: 3, 6, 12 with 2 workers on 3 s tasks)."""
    optimizer = PoolQueue(stores[0])
    optimizer.enqueue([Task(i, {"x": i / 8}, i, 1000.0 + i) for i in range(TASKS)])
    queue = PoolQueue(stores[1])
    queues = PoolQueuePair()
    long = PoolFeeder(queue, queues, queue.register("local", workers=2, hold=2), hold=2, lease_s=60.0, max_hold=16)
    for _ in range(4 * TASKS):  # a bound against a hang
        if len(long.stored) == TASKS:
            break
        long.step()
        done = []
        while queues.tasks:  # the workers take every queued task, each running 3 s
            result = ok_result(queues.tasks.popleft(), 0.5, started=103.0, finished=103.0)
            result.started = 100.0
            done.append(result)
        queues.deliver(done)
    assert sorted(long.stored) == list(range(TASKS)) and long.hold == 2


def test_a_pool_that_takes_a_task_over_clears_what_its_earlier_writers_left(
    stores: list[PostgresStore], tmp_path: Path
) -> None:
    """A pool on node9 claims task 0, its trial stages step 2's checkpoint (the row ``staged``, the
    writer's temporary file there), and the pool dies: its lease ends. A running pool that takes the
    task over left both: a start's cleanup (``dead_pools_cleared``) skips a trial a live pool holds,
    so they waited for the next pool or optimizer to start after the task ended. Now the takeover
    clears them before the task reaches its workers: the dead writer's temporary file goes (a live
    writer's of this host stays), the row is ``lost``."""
    optimizer = PoolQueue(stores[0])
    optimizer.enqueue([Task(0, {"x": 0.5}, 0, 1000.0)])
    dead, dead_queues = _pool(stores[1], "node9", lease_s=60.0)
    dead.step()
    assert [t.id for t in dead_queues.tasks] == [0]
    trial = tmp_path / "checkpoints" / "000000"
    trial.mkdir(parents=True)
    staged = CheckpointNote(str(trial / "step-00000002-000.ckpt"), 7)
    stores[1].add_report(Report(0, 1, 2, {"loss": 0.5}, time.time(), checkpoint=staged), 0.5, 0.5, holder=dead.pool)
    elsewhere = trial / ".step-00000002-000.ckpt@node9.cluster.4242.1.tmp"  # the dead pool's writer
    elsewhere.write_bytes(b"partial")
    live = trial / f".step-00000001-000.ckpt@{socket.gethostname()}.{os.getpid()}.1.tmp"  # a writer still alive here
    live.write_bytes(b"partial")
    states = "SELECT state FROM checkpoints WHERE trial = 0"
    assert stores[0].connection.execute(states).fetchall() == [("staged",)]
    stores[0].connection.execute("UPDATE tasks SET lease_until = 0 WHERE id = 0")  # node9's pool is gone
    alive, queues = _pool(stores[2], "alive", lease_s=60.0)
    assert wait_until(lambda: alive.step() and queues.tasks, 60)
    assert [t.id for t in queues.tasks] == [0]
    assert stores[0].connection.execute("SELECT attempt, pool FROM tasks WHERE id = 0").fetchall() == [(1, alive.pool)]
    assert sorted(p.name for p in trial.iterdir()) == [live.name]
    assert stores[0].connection.execute(states).fetchall() == [("lost",)]


def test_a_failed_distributor_wakes_its_feeder() -> None:
    """A pool's distributor that fails (a task found the disk full) wakes the feeder sleeping on the
    pair's pipe, which then stops the pool at once: it slept on until its next heartbeat (a third of
    ``store.lease``), its workers idle and its tasks held."""
    queues = PoolQueuePair()
    try:
        with selectors.DefaultSelector() as waiting:
            waiting.register(queues.fileno(), selectors.EVENT_READ)
            assert waiting.select(0) == []
            queues.fail(RuntimeError("task 1 failed for want of disk space"))
            assert [key.fd for key, _ in waiting.select(0)] == [queues.fileno()]
    finally:
        queues.close()
