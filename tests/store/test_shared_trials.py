"""Trial schedulers across pools on a real PostgreSQL (tests/store/conftest.py): two pools' trial
services on one experiment's store, each deciding on its own trials' reports; before a decision
each takes in the other's reports, so a rung holds every pool's trials."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
from pgserver import PgServer

from emews.core.direction import Direction
from emews.core.results import Outcome, Status, Task
from emews.core.space import Float, Space
from emews.runtime.shared_trials import SharedTrials
from emews.runtime.trial_reports import Afterwards
from emews.store.pool_queue import PoolQueue
from emews.store.postgres import PostgresStore
from emews.training.messages import Action, CheckpointNote, Reply, Report
from emews.training.schedulers.asha import ASHA
from emews.training.schedulers.median import MedianStopping
from testutil import wait_until


def _service(store: PostgresStore) -> SharedTrials:
    scheduler = ASHA(max_t=9, grace_period=1, reduction_factor=3).bind(
        metric="loss", direction=Direction.MINIMIZE, space=Space({"rate": Float(0.0, 1.0)}), seed=0
    )
    service = SharedTrials(store, scheduler, metric="loss")
    service.rebuild()
    return service


def _report(service: SharedTrials, trial: int, step: int, loss: float) -> Action:
    task = Task(trial, {"rate": loss}, trial, time.time())
    reply = service.handle(Report(trial, 1, step, {"loss": loss}, time.time()), task)
    assert reply is not None
    return reply.decision.action


def test_a_pool_stops_a_trial_that_ranks_low_among_every_pools_trials(stores: list[PostgresStore]) -> None:
    first, second = _service(stores[0]), _service(stores[1])
    assert _report(first, 0, 1, 0.20) is Action.CONTINUE  # alone at rung 1 in the experiment
    assert _report(first, 1, 1, 0.10) is Action.CONTINUE  # the best of 2: in the best ceil(2/3) = 1
    # the second pool's first trial arrives at rung 1 with the worst loss: among all three it is
    # not in the best ceil(3/3) = 1, so it stops; alone in its own pool it would go on (below)
    assert _report(second, 2, 1, 0.90) is Action.STOP
    # and the first pool learns the second's reports as well
    assert _report(first, 3, 1, 0.95) is Action.STOP


def test_alone_in_its_pool_a_trial_would_go_on(stores: list[PostgresStore]) -> None:
    """The control: the same report with no other pool's reports stored goes on."""
    second = _service(stores[1])
    assert _report(second, 2, 1, 0.90) is Action.CONTINUE


def test_a_pool_that_joins_late_starts_from_every_report(stores: list[PostgresStore]) -> None:
    first = _service(stores[0])
    for trial, loss in enumerate([0.1, 0.2, 0.3]):
        _report(first, trial, 1, loss)
    late = _service(stores[1])  # rebuilt from the three stored reports
    assert _report(late, 3, 1, 0.5) is Action.STOP


def test_which_schedulers_span_pools() -> None:
    assert ASHA().spans_pools and MedianStopping().spans_pools
    assert not ASHA(variant="promotion").spans_pools


def test_a_report_committed_late_is_taken_in_at_the_next_decision(stores: list[PostgresStore]) -> None:
    """A report another pool committed after a later seq was decided on (its insert was still in
    flight) is not skipped: the next decision replays it."""
    first, second = _service(stores[0]), _service(stores[1])
    raw = stores[1].connection
    with raw.transaction():  # the second pool's report gets its seq now, commits after the first pool decides
        raw.execute("INSERT INTO reports (trial, step, metrics, time) VALUES (7, 1, %s, 0)", ('{"loss": 0.05}',))
        assert _report(first, 0, 1, 0.20) is Action.CONTINUE  # alone: trial 7's report is not visible yet
    # now visible: rung 1 holds 0.20 (trial 0), 0.05 (trial 7); trial 1 at 0.15 ranks 2nd of 3, out of
    # the best ceil(3/3) = 1 (without trial 7 it would be the best of 2 and go on)
    assert _report(first, 1, 1, 0.15) is Action.STOP


def test_a_report_racing_a_claim_of_its_task_is_refused_not_stored(
    stores: list[PostgresStore], pg_server: PgServer, tmp_path: Path
) -> None:
    """Pool 1's lease on task 0 ended and pool 2's claim of it is in flight (its transaction not
    committed) when pool 1's trial reports: the report waits for that claim, sees the task is pool
    2's and is refused (answered stop, nothing stored), its checkpoint file deleted once the trial
    ended. (Its lease checked in a statement of its own, then inserted, the report was stored.)"""
    queue = PoolQueue(stores[1])
    queue.enable()
    task = Task(0, {"rate": 0.5}, 0, time.time())
    queue.enqueue([task])
    first, second = queue.register("local", 1), queue.register("local", 1)
    assert [c.task.id for c in queue.claim(first, 1, 60)] == [0]
    stores[1].connection.execute("UPDATE tasks SET lease_until = 0 WHERE id = 0")  # pool 1's lease ended
    service = _service(stores[0])
    dropped: list[int] = []
    service.lease_to(first, dropped.append)
    written = tmp_path / "checkpoints" / "000000" / "step-00000001-000.ckpt"
    written.parent.mkdir(parents=True)
    written.write_bytes(b"pool 1's step 1")
    report = Report(0, 1, 1, {"loss": 0.5}, time.time(), checkpoint=CheckpointNote(str(written), 15))
    replies: list[Reply | None] = []
    raw = stores[1].connection
    with psycopg.connect(pg_server.url(), autocommit=True) as watcher:
        with raw.transaction():  # pool 2's claim, not committed yet
            assert [c.task.id for c in queue.claim(second, 1, 60)] == [0]
            reporting = threading.Thread(target=lambda: replies.append(service.handle(report, task)))
            reporting.start()
            waiting = "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND state = 'active'"
            assert wait_until(lambda: replies or watcher.execute(waiting).fetchall(), 60)
        reporting.join(60)
    assert replies and replies[0] is not None and replies[0].decision.action is Action.STOP
    assert stores[1].connection.execute("SELECT count(*) FROM reports").fetchone()[0] == 0
    assert service.intercept(task, Outcome(0, Status.OK, 0.5)) is Afterwards.DROPPED and dropped == [0]
    assert not written.exists()  # no row names it: a restore can never see it
