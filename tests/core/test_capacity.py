"""``evaluator.capacity`` is a plain read; ``get(..., more_room=N)`` returns early once the workers
can hold more than the ``N`` the optimizer proposed for (a pool joined: docs/optimizers.md), with
or without replicates, and ``AskTellOptimizer`` proposes for the new room before any result.
``evaluator.room(own)`` is the one call an optimizer that keeps evaluations outstanding makes
before each proposal: the capacity read first, then how many to keep (the queue pair's rule: a
job's own count; with pools, at least what they hold) and how many to propose."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from emews.core.evaluator import Evaluator, Room
from emews.core.queues import QueuePair
from emews.core.replicates import ReplicatingEvaluator, replicated_space
from emews.core.results import Result, Status
from emews.core.space import Float, Space
from emews.optimizers.random import RandomSearch
from emews.runtime.pool_bridge import PooledQueuePair
from testutil import wait_until

SPACE = Space({"x": Float(0.0, 1.0)})


def _ok(queues: QueuePair) -> list[Result]:
    """Results for every task queued (as the distributor would hand them back)."""
    tasks = list(queues.tasks)
    queues.tasks.clear()
    return [Result(t.id, t.params, Status.OK, 1.0, 1.0) for t in tasks]


def _in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    out: list[object] = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return thread, out


def test_reading_the_capacity_changes_nothing_and_more_room_takes_what_was_proposed_for() -> None:
    queues = QueuePair()
    queues.capacity = 3
    evaluator = Evaluator(queues, SPACE, workers=2, budget=10)
    assert [evaluator.capacity for _ in range(3)] == [3, 3, 3]
    room = evaluator.capacity
    evaluator.put([{"x": 0.5}])
    queues.capacity = 5  # a pool joined between the optimizer's read and its wait: get returns at once
    assert evaluator.get(1, timeout=60.0, more_room=room) == []
    assert evaluator.pending == 1 and evaluator.capacity == 5


def test_more_room_wakes_a_waiting_get_only_past_the_count_given() -> None:
    queues = QueuePair()
    evaluator = Evaluator(queues, SPACE, workers=2, budget=10)
    (task_id,) = evaluator.put([{"x": 0.5}])
    room = evaluator.capacity  # the workers: nothing prefetched yet
    assert room == 2
    queues.capacity = 2  # the distributor's count of the same workers: no more room than was read
    thread, out = _in_thread(lambda: evaluator.get(1, timeout=120.0, more_room=room))
    assert wait_until(lambda: queues.optimizer_waits, 60)
    queues.capacity = 3
    thread.join(60)
    assert out == [[]]
    thread, out = _in_thread(lambda: evaluator.get(1, timeout=120.0, more_room=3))
    assert wait_until(lambda: queues.optimizer_waits, 60)
    queues.deliver(_ok(queues))
    thread.join(60)
    assert [[r.id for r in got] for got in out] == [[task_id]]  # type: ignore[attr-defined]


@pytest.mark.parametrize("given", [True, 2.5, "4"])
def test_more_room_is_a_count_not_a_flag(given: object) -> None:
    evaluator = Evaluator(QueuePair(), SPACE, workers=1, budget=10)
    evaluator.put([{"x": 0.5}])
    with pytest.raises(TypeError, match=r"more_room=.*the capacity the optimizer proposed for"):
        evaluator.get(1, timeout=60.0, more_room=given)  # type: ignore[arg-type]


def test_replicates_wake_when_a_whole_point_more_fits() -> None:
    """With 2 replicates a point is 2 tasks: room for 3 tasks is still room for 1 point."""
    queues = QueuePair()
    inner = Evaluator(queues, replicated_space(SPACE, 2), workers=2, budget=10)
    view = ReplicatingEvaluator(inner, SPACE, 2)
    (point,) = view.put([{"x": 0.5}])
    room = view.capacity
    assert room == 1
    queues.capacity = 3
    thread, out = _in_thread(lambda: view.get(1, timeout=120.0, more_room=room))
    assert wait_until(lambda: queues.optimizer_waits, 60)
    queues.deliver(_ok(queues))  # both replicates: the point's result, not an early wake
    thread.join(60)
    assert [[r.id for r in got] for got in out] == [[point]]  # type: ignore[attr-defined]
    view.put([{"x": 0.25}])
    queues.capacity = 4
    assert view.get(1, timeout=120.0, more_room=room) == []


def test_ask_tell_proposes_for_the_room_that_grew_while_it_waited() -> None:
    """random (backlog 1) keeps what the workers hold in flight: 1; the capacity grows to 4 while
    it waits for that result, and it puts 3 more before any result comes."""
    queues = QueuePair()
    evaluator = Evaluator(queues, SPACE, workers=1, budget=4)
    thread, out = _in_thread(lambda: RandomSearch(seed=1, backlog=1).run(evaluator))
    assert wait_until(lambda: queues.optimizer_waits and len(queues.tasks) == 1, 60)
    queues.capacity = 4
    assert wait_until(lambda: len(queues.tasks) == 4, 60), len(queues.tasks)
    queues.deliver(_ok(queues))
    thread.join(60)
    assert not thread.is_alive() and out == [None] and evaluator.remaining == 0


def test_room_in_a_job_keeps_the_optimizers_own_count_whatever_the_prefetch() -> None:
    """A job's workers are fixed: the capacity its distributor writes (prefetch) is no more workers."""
    queues = QueuePair()
    queues.capacity = 6
    evaluator = Evaluator(queues, SPACE, workers=2, budget=10)
    evaluator.put([{"x": 0.5}])
    assert evaluator.room(3) == Room(in_flight=3, propose=2, capacity=6)
    assert evaluator.room(1) == Room(in_flight=1, propose=0, capacity=6)  # never below nothing


def test_room_with_pools_keeps_at_least_what_they_hold_within_the_budget() -> None:
    queues = PooledQueuePair()
    queues.capacity = 6
    evaluator = Evaluator(queues, SPACE, workers=1, budget=4)
    evaluator.put([{"x": 0.5}])
    assert evaluator.room(2) == Room(in_flight=6, propose=3, capacity=6)  # 5 more wanted, 3 left
    queues.capacity = 1
    assert evaluator.room(2) == Room(in_flight=2, propose=1, capacity=1)


def test_an_own_count_that_reads_the_capacity_is_read_after_room_reads_it() -> None:
    """The optimizer's rule (random's backlog: a multiple of the capacity) is called after the
    capacity room waits on was read: a pool that joins in between wakes the wait at once."""
    queues = QueuePair()
    queues.capacity = 2
    evaluator = Evaluator(queues, SPACE, workers=1, budget=10)
    order: list[str] = []

    def own() -> int:
        queues.capacity = 5  # a pool joins while the optimizer works out its count
        order.append("own")
        return evaluator.capacity

    room = evaluator.room(own)
    assert order == ["own"] and room == Room(in_flight=5, propose=5, capacity=2)
    evaluator.put([{"x": 0.5}] * room.propose)
    assert evaluator.get(1, timeout=60.0, more_room=room.capacity) == []


def test_room_with_replicates_counts_points() -> None:
    """2 replicates a point: pools holding 5 tasks hold 2 whole points, an own count of 3 points is 6 tasks."""
    queues = PooledQueuePair()
    queues.capacity = 5
    inner = Evaluator(queues, replicated_space(SPACE, 2), workers=1, budget=20)
    view = ReplicatingEvaluator(inner, SPACE, 2)
    view.put([{"x": 0.5}])
    assert view.room(1) == Room(in_flight=3, propose=2, capacity=2)  # 5 tasks: 3 points outstanding
    assert view.room(lambda: 4) == Room(in_flight=4, propose=3, capacity=2)
