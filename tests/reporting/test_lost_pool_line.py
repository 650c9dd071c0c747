"""What ``emews status`` says becomes of a lost pool's tasks: queued again while the run goes on,
cancelled once the optimizer has finished (570d17c: a complete run has nothing pending; the line
said "queued again at the next claim", which no longer happens)."""

from __future__ import annotations

from emews.reporting.pool_status import _coming_back


def test_a_lost_pools_tasks_return_to_the_queue_while_the_run_goes_on() -> None:
    assert (
        _coming_back(None, 100.0, finished=False) == "its tasks' leases ended: they are queued again at the next claim"
    )
    assert (
        _coming_back(700.0, 100.0, finished=False)
        == "its tasks return to the queue when their leases end, in 10 min 00 s"
    )


def test_a_lost_pools_tasks_are_cancelled_once_the_run_has_finished() -> None:
    assert (
        _coming_back(50.0, 100.0, finished=True) == "its tasks' leases ended: they are cancelled: the run has finished"
    )
    line = _coming_back(700.0, 100.0, finished=True)
    assert line == "its tasks are cancelled when their leases end, in 10 min 00 s: the run has finished"
