"""A pool that stops cleanly (a stop signal to its rank 0) keeps what its workers finish while it
stops: a result that arrives between the feeder's stop and the workers' end is stored, not thrown
away with the task handed back to run again elsewhere (docs/postgres.md, "A pool that stops
cleanly")."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from pgserver import PgServer
from pooled import gated_command, gated_workflow, pooled_run, rank_zero, rows, running_on, seen, wait_for_queued

from testutil import wait_until

BUDGET = 8


def test_a_result_that_comes_while_a_pool_stops_is_stored(pg_server: PgServer, tmp_path: Path) -> None:
    """The attached pool (1 worker) runs a task at the gate when its rank 0 gets SIGTERM; once its
    feeder has stopped (the pool's row says stopped), the gate opens: the task ends while rank 0
    waits for its worker, and its result is stored as pool 2's (attempt 0), not handed back with
    the task taken ahead and run again on pool 1 (it was, attempt 1: the finished evaluation
    thrown away while its lease of 600 s held). Every evaluation is stored once."""
    wf = gated_workflow(tmp_path, pg_server.url(), BUDGET, store={"lease": 600})
    second = gated_command(tmp_path)
    second.env["EMEWS_ABORT_GRACE"] = "120"  # rank 0 waits for its worker's last result (a safety net)
    with pooled_run(tmp_path, wf, workers=2) as run:
        exp = run.exp
        wait_for_queued(exp)
        attached = run.attach(1, command=second)
        running = wait_until(lambda: running_on(exp, 2), 120)
        assert running and len(running) == 1, seen(exp, "SELECT id, state, pool FROM tasks ORDER BY id")
        pid = wait_until(lambda: rank_zero(second), 60)
        assert pid, second.processes()
        os.kill(pid, signal.SIGTERM)
        assert wait_until(lambda: seen(exp, "SELECT 1 FROM pools WHERE id = 2 AND stopped IS NOT NULL"), 120)
        (tmp_path / "open").touch()
        _, err = attached.communicate(timeout=180)
        assert "pool 2: 1 results stored" in err, err
    results = rows(exp, "SELECT r.id, r.pool, t.attempt FROM results r JOIN tasks t ON t.id = r.id ORDER BY r.id")
    assert [i for i, *_ in results] == list(range(BUDGET))
    assert [(p, a) for i, p, a in results if i == running[0]] == [(2, 0)], results
