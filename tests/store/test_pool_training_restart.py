"""A pooled training run while its PostgreSQL server restarts (``pg_ctl stop`` then ``start``): the
pools record their trials' reports on new connections, as its queue does, and the run completes."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import pooled_run, rows, seen, trainer_command

from testutil import events, trainer_workflow, wait_until


def test_a_server_restart_mid_training_does_not_end_the_pool(own_server: PgServer, tmp_path: Path) -> None:
    """Both trials of the pool report step 2 and wait; the server restarts; their next reports go
    to the store on a new connection (the pool failed: "emews: terminating connection due to
    administrator command", exit 1); each trial trains once to its end, every report stored once."""
    wf = trainer_workflow(
        tmp_path, [0.1, 0.2], epochs=4, task={"isolation": "process", "timeout": 300},
        store={"url": own_server.url(), "lease": 30, "retry": 60},
    )
    with pooled_run(tmp_path, wf, workers=2, command=trainer_command(tmp_path, 3)) as run:
        exp = run.exp
        both = wait_until(lambda: len(seen(exp, "SELECT trial FROM reports WHERE step = 2")) == 2, 180)
        assert both, seen(exp, "SELECT trial, step FROM reports")
        own_server.stop()
        own_server.restart()
    assert rows(exp, "SELECT id, status FROM results ORDER BY id") == [(0, "ok"), (1, "ok")]
    assert rows(exp, "SELECT trial, count(*), max(step) FROM reports GROUP BY trial ORDER BY trial") == [
        (0, 4, 4), (1, 4, 4)]
    assert sorted(e["task"] for e in events(tmp_path / "trainer.log") if e["event"] == "start") == [0, 1]  # none ran again
