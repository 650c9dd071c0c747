"""Resuming a pooled experiment after ``kill -9`` of its first job (optimizer and pool 1), on a real
PostgreSQL and real mpiexec jobs: what ``emews resume`` says about the tasks the killed run left
in the shared queue (docs/postgres.md, "Pools")."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import gated_workflow, pooled_run, rows, seen

from testutil import said, wait_until

BUDGET = 6


def test_a_pooled_resume_says_it_waits_for_the_unfinished_tasks(pg_server: PgServer, tmp_path: Path) -> None:
    """Two workers hold two tasks at the gate, more wait queued; the whole job is killed. The
    resume (gate open) names the unfinished tasks as waited for in the shared queue, not as "run
    again" (a live pool may still own them: the resumed run queues none of them again)."""
    wf = gated_workflow(tmp_path, pg_server.url(), BUDGET, store={"lease": 2})
    with pooled_run(tmp_path, wf, workers=2) as run:
        exp, launch, cmd = run.exp, run.launch, run.first
        assert (
            wait_until(
                lambda: (
                    len(list((tmp_path / "marks").iterdir())) == 2
                    and seen(exp, "SELECT id FROM tasks WHERE state = 'queued'")
                    or launch.poll() is not None
                ),
                180,
            )
            and launch.poll() is None
        ), said(launch)
        run.kill()
        unfinished = len(rows(exp, "SELECT id FROM tasks WHERE state IN ('queued', 'leased')"))
        run.open()
        resumed = cmd("resume", "exp", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "interrupted tasks run again" not in resumed.stderr
    assert f"{unfinished} unfinished tasks waited for in the shared queue, not queued again" in resumed.stderr, (
        resumed.stderr
    )
    assert len(rows(exp, "SELECT id FROM results")) == BUDGET
