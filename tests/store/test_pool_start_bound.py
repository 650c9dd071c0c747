"""An attached pool's start is bounded as a launch's is: a pool job whose rank 0 has not registered
in the store within the start's bound (``EMEWS_START_TIMEOUT``) is stopped, ``emews attach`` says so
in one line and exits 1, and the experiment goes on without it.

Found in review: ``emews attach`` handed a dropped stop over but had no bound, so a pool rank
stopped before ``MPI_Init`` held the pool's other ranks (and ``emews attach``) until the walltime."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import gated_command, gated_workflow, rows, wait_for_queued

from testutil import stopping_site

BUDGET = 4


def test_a_pool_whose_rank_never_starts_is_stopped_at_the_bound(pg_server: PgServer, tmp_path: Path) -> None:
    """The attached pool's rank 2 stops itself (SIGSTOP) before it execs Python, so its ranks 0 and 1
    wait in MPI_Init and its rank 0 never registers: attach stops its job at the 15 s bound, says so
    once (and in the pool's emews.log), exit 1, nothing left running; the launch's own pool then runs
    every evaluation. Without the bound attach waited in MPI_Init until the test's timeout."""
    wf = gated_workflow(tmp_path, pg_server.url(), BUDGET)
    first, second = gated_command(tmp_path), gated_command(tmp_path)
    second.env["EMEWS_START_TIMEOUT"] = "15"
    site = stopping_site(tmp_path, "kill -STOP")
    launch = first.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    try:
        wait_for_queued(exp)
        attached = second.popen("attach", "exp", "--workers", "2", "--site", str(site))
        try:
            _, err = attached.communicate(timeout=240)
        finally:
            second.kill_all()  # without the bound: it waits in MPI_Init
        assert attached.returncode == 1, err
        said = [line for line in err.splitlines() if line.startswith("emews")]
        assert len(said) == 1 and "emews attach" in said[0], err
        assert "did not all start within 15 s (rank 2 of 3 never reached MPI_Init" in said[0], err
        assert not (exp / "pools" / "pool-001" / ".start").exists()  # its ranks' start marks are removed
        assert "did not all start within 15 s" in (exp / "pools" / "pool-001" / "emews.log").read_text()
        assert second.processes() == {}, second.processes()
        assert rows(exp, "SELECT id FROM pools ORDER BY id") == [(1,)]  # it never registered
        (tmp_path / "open").touch()
        _, launch_err = launch.communicate(timeout=300)
    finally:
        (tmp_path / "open").touch()
        first.kill_all()
        second.kill_all()
    assert launch.returncode == 0, launch_err
    assert [i for (i,) in rows(exp, "SELECT id FROM results ORDER BY id")] == list(range(BUDGET))
