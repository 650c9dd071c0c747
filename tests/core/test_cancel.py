"""``evaluator.cancel``: tasks no worker was given are taken back (no result comes for them; they
leave ``pending`` and the budget); a task already given runs to its end."""

from __future__ import annotations

from emews.core.evaluator import Evaluator
from emews.core.queues import QueuePair
from emews.core.space import Float, Space


def test_cancel_takes_back_what_no_worker_has() -> None:
    queues = QueuePair()
    evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=1, budget=5)
    ids = evaluator.put([{"x": i / 10} for i in range(5)])
    given = queues.tasks.popleft()  # the distributor gave the first one to a worker
    assert evaluator.remaining == 0
    cancelled = evaluator.cancel([given.id, ids[1], ids[3], 99])
    assert cancelled == [ids[1], ids[3]]
    assert [t.id for t in queues.tasks] == [ids[2], ids[4]]
    assert evaluator.pending == 3 and evaluator.remaining == 2  # the budget gets them back
    assert evaluator.cancel([ids[1]]) == []  # cancelled once


def test_cancel_is_refused_with_replicates() -> None:
    from emews.core.replicates import ReplicatingEvaluator, replicated_space

    space = Space({"x": Float(0.0, 1.0)})
    inner = Evaluator(QueuePair(), replicated_space(space, 2), workers=1, budget=4)
    view = ReplicatingEvaluator(inner, space, 2)
    (point,) = view.put([{"x": 0.5}])
    try:
        view.cancel([point])
    except ValueError as exc:
        assert "replicates" in str(exc)
    else:
        raise AssertionError("cancel with replicates accepted")


def test_observers_see_what_was_cancelled() -> None:
    """What leaves an id without a result for good (``results.csv`` written during the run steps
    over it, rather than waiting for it until the run's end)."""
    from emews.core.evaluator import EvaluatorObserver

    seen: list[list[int]] = []

    class Cancels(EvaluatorObserver):
        def cancelled(self, ids: list[int]) -> None:
            seen.append(list(ids))

    queues = QueuePair()
    evaluator = Evaluator(queues, Space({"x": Float(0.0, 1.0)}), workers=1, budget=3, observers=[Cancels()])
    ids = evaluator.put([{"x": i / 10} for i in range(3)])
    queues.tasks.popleft()  # given to a worker: not cancelled
    assert evaluator.cancel(ids) == ids[1:]
    assert evaluator.cancel(ids) == []
    assert seen == [ids[1:]]
