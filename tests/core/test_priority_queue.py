"""Priorities in a job's own queue: higher first, in the order put within a priority."""

from __future__ import annotations

import time

from emews.core.evaluator import Evaluator
from emews.core.queues import QueuePair
from emews.core.results import Task
from emews.core.space import Float, Space


def test_put_orders_the_queue_by_priority_then_arrival() -> None:
    queues = QueuePair()
    evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=1, budget=None)
    low = evaluator.put([{"x": 0.1}, {"x": 0.2}])
    high = evaluator.put([{"x": 0.3}, {"x": 0.4}], priority=5)
    middle = evaluator.put([{"x": 0.5}], priority=1)
    negative = evaluator.put([{"x": 0.6}], priority=-1)
    later_high = evaluator.put([{"x": 0.7}], priority=5)
    assert [t.id for t in queues.tasks] == [*high, *later_high, *middle, *low, *negative]


def test_a_mixed_batch_is_ordered_too() -> None:
    queues = QueuePair()
    queues.submit([Task(i, {}, 0, time.time(), priority=p) for i, p in enumerate([0, 2, 0, 1, 2])])
    assert [t.id for t in queues.tasks] == [1, 4, 3, 0, 2]


def test_equal_priorities_keep_the_order_put() -> None:
    queues = QueuePair()
    queues.submit([Task(i, {}, 0, time.time()) for i in range(5)])
    queues.submit([Task(i, {}, 0, time.time()) for i in range(5, 8)])
    assert [t.id for t in queues.tasks] == list(range(8))


def test_a_bad_priority_is_refused() -> None:
    evaluator = Evaluator(QueuePair(), Space({"x": Float(0.0, 1.0)}), workers=1, budget=None)
    for bad in (float("nan"), float("inf"), "high"):
        try:
            evaluator.put([{"x": 0.1}], priority=bad)  # type: ignore[arg-type]
        except ValueError as exc:
            assert "priority" in str(exc)
        else:
            raise AssertionError(f"priority {bad!r} accepted")
