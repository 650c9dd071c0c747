"""A second optimizer for one pooled experiment, on a real PostgreSQL and real mpiexec jobs: it is
refused in one line naming what the user did (docs/postgres.md, "One optimizer per experiment")."""

from __future__ import annotations

import signal
from pathlib import Path

from pgserver import PgServer
from pooled import gated_workflow, pooled_run, seen

from testutil import said, wait_until


def test_a_second_serve_is_refused_naming_the_serve_that_runs(pg_server: PgServer, tmp_path: Path) -> None:
    """The launch's job is stopped (SIGTERM) with tasks left in the queue; ``emews serve`` brings
    the optimizer back; a second ``emews serve`` meanwhile is refused, exit 2, in one line that
    says another optimizer serves the experiment (before: 'this experiment was launched without
    pools ... --pools')."""
    wf = gated_workflow(tmp_path, pg_server.url(), 4, store={"lease": 60})
    with pooled_run(tmp_path, wf, workers=1) as run:
        exp, launch, cmd = run.exp, run.launch, run.first
        assert (
            wait_until(
                lambda: seen(exp, "SELECT id FROM tasks WHERE state = 'leased'") or launch.poll() is not None, 180
            )
            and launch.poll() is None
        ), said(launch)
        launch.send_signal(signal.SIGTERM)
        assert launch.wait(timeout=120) == 143
        first = cmd.popen("serve", "exp")
        assert first.stderr.readline().startswith(f"serving {exp}"), said(first)
        second = cmd("serve", "exp", timeout=120)
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=120)
    assert second.returncode == 2, second.stderr
    assert "--pools" not in second.stderr, second.stderr
    assert ": emews serve: another optimizer serves this experiment" in second.stderr, second.stderr
    assert len(second.stderr.splitlines()) == 1, second.stderr
