"""A stopping pool hands back what it holds, one more attempt for each task a worker started and
none for one a worker only held ahead (prefetched behind a running task) and gave back unstarted
(docs/postgres.md, "A pool that stops cleanly"). A real pool (its distributor, feeder and a worker
loop over in-process transport) on a real PostgreSQL store; a gate, not timing, holds the running task."""

from __future__ import annotations

import threading
import time


from emews.core.results import Outcome, Status, Task
from emews.job.pool_run import PoolRun
from emews.runtime.pool_feeder import PoolFeeder, PoolQueuePair
from emews.runtime.transport import Tag, ThreadHub
from emews.runtime.worker import worker_loop
from emews.store.pool_queue import PoolQueue
from emews.store.postgres import PostgresStore

GATED = 1  # task 0 ends at once (tasks are short: the worker may hold more ahead), task 1 runs until the stop


class _GatedRunner:
    """Runs task 0 at once and task 1 until the stop reaches its worker; says when the worker holds
    a task ahead behind task 1 (in its queue or its inbox)."""

    def __init__(self) -> None:
        self.prefetched = threading.Event()
        self.began: list[int] = []

    def start(self) -> None: ...

    def close(self) -> None: ...

    def run(self, task: Task, should_abort, team=None) -> Outcome | None:  # noqa: ANN001 (the worker's inbox)
        self.began.append(task.id)
        now = time.time()
        if task.id != GATED:
            return Outcome(task.id, Status.OK, float(task.id), started=now, finished=now)
        while not should_abort():
            if len(should_abort.queued or ()) > 1 or any(m.tag is Tag.TASK for m in should_abort.held):
                self.prefetched.set()
            time.sleep(0.005)
        return None  # aborted mid-task: it stays among the worker's unfinished


def test_a_task_held_ahead_by_a_worker_and_handed_back_unstarted_keeps_its_attempt(
    stores: list[PostgresStore],
) -> None:
    """Task 0 ends at once, so the worker takes tasks ahead; task 1 runs at the gate while task 2
    waits behind it in the worker's own queue (the distributor said it started: it was handed to a
    worker). The pool stops: task 1 (started) is queued again with attempt 1, task 2 (never started)
    with attempt 0. Without the fix the worker's unstarted task counted as started (attempt 1)."""
    optimizer = PoolQueue(stores[0])
    optimizer.enqueue([Task(i, {"x": i}, i, 1000.0 + i) for i in range(3)])
    hub = ThreadHub(2)
    run = PoolRun(PoolQueue(stores[1]), hub.endpoint(0), [1], site="local", sign=1.0, lease_s=600.0)
    runner = _GatedRunner()
    worker = threading.Thread(target=worker_loop, args=(hub.endpoint(1), runner), daemon=True)
    worker.start()
    run.start()
    try:
        assert runner.prefetched.wait(timeout=120), (runner.began, run.feeder.held)
    finally:
        run.stop()
        run.close(abort=True)
        worker.join(timeout=60)
    assert runner.began == [0, GATED]
    assert sorted(run.handed_back) == [1, 2]
    states = stores[0].connection.execute("SELECT id, state, attempt FROM tasks ORDER BY id").fetchall()
    assert [tuple(r) for r in states] == [(0, "done", 0), (1, "queued", 1), (2, "queued", 0)]


def test_a_task_given_back_and_handed_out_again_counts_as_the_last_news_says(stores: list[PostgresStore]) -> None:
    """The distributor's news reach the feeder in its order: both tasks handed to a worker, both
    given back unstarted (a recall), task 1 handed out again: handed back, task 1 counts an attempt
    and task 0 none (news applied out of order would count task 1 as never started)."""
    PoolQueue(stores[0]).enqueue([Task(i, {"x": i}, i, 1000.0 + i) for i in range(2)])
    queue, queues = PoolQueue(stores[1]), PoolQueuePair()
    feeder = PoolFeeder(queue, queues, queue.register("local", 1), hold=2, lease_s=600.0)
    try:
        feeder.step()
        tasks = list(queues.tasks)
        assert [t.id for t in tasks] == [0, 1]
        feeder.started(tasks)
        feeder.unstarted([0, 1])
        feeder.started(tasks[1:])
        assert feeder.hand_back() == [0, 1]
    finally:
        queues.close()
    attempts = stores[0].connection.execute("SELECT id, attempt FROM tasks ORDER BY id").fetchall()
    assert [tuple(r) for r in attempts] == [(0, 0), (1, 1)]


def test_a_pool_stopped_before_it_fed_records_its_stop(stores: list[PostgresStore]) -> None:
    """A stop signal that reaches a pool's rank 0 after it registered and before its feeder ran
    (``emews attach``'s handover sends it just then) makes ``lead_pool`` stop the run without running
    it: the pool's row then said running (``stopped`` NULL) until its heartbeat ended, as the feeder
    records the end only as its loop ends. :meth:`PoolRun.stop` records it now."""
    hub = ThreadHub(2)
    run = PoolRun(PoolQueue(stores[1]), hub.endpoint(0), [1], site="local", sign=1.0, lease_s=600.0)
    worker = threading.Thread(target=worker_loop, args=(hub.endpoint(1), _GatedRunner()), daemon=True)
    worker.start()
    try:
        run.stop()  # as lead_pool does when Interrupted comes before run.run()
    finally:
        run.close(abort=True)
        worker.join(timeout=60)
    rows = stores[0].connection.execute("SELECT id, stopped IS NOT NULL FROM pools").fetchall()
    assert [tuple(r) for r in rows] == [(run.pool, True)]
