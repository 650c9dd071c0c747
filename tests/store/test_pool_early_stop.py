"""A stop signal to ``emews attach`` as its pool starts stops the pool: Hydra's ``mpiexec`` drops a
signal that comes before its proxies run, so the stop is also handed to the pool's rank 0 once it
has registered in the store (as ``emews launch`` hands one to its rank 0 once it joined the lease)."""

from __future__ import annotations

import signal
from pathlib import Path

from pgserver import PgServer
from pooled import gated_command, gated_workflow, pooled_run, seen, stored, wait_for_queued

from testutil import dropping_site, wait_until

BUDGET = 4


def test_a_stop_that_mpiexec_drops_reaches_the_pools_rank_0(pg_server: PgServer, tmp_path: Path) -> None:
    """The attached pool's launcher line is a shell that drops every SIGTERM (``trap '' TERM``;
    ``mpiexec`` is its child), so only the handover can stop the pool. SIGTERM to ``emews attach``
    once the shell runs: the pool stops (its row says so), attach exits 143 before the gate opens,
    and the launch's own pool then runs every evaluation. Without the handover the pool ran on:
    its row never said stopped and attach waited at the gate with the tasks it held."""
    wf = gated_workflow(tmp_path, pg_server.url(), BUDGET)
    second = gated_command(tmp_path)
    site, deaf = dropping_site(tmp_path)
    with pooled_run(tmp_path, wf, workers=1) as run:
        exp = run.exp
        wait_for_queued(exp)
        attached = run.attach(1, "--site", str(site), command=second)
        assert wait_until(deaf.exists, timeout=60)
        attached.send_signal(signal.SIGTERM)
        stopped = wait_until(lambda: seen(exp, "SELECT 1 FROM pools WHERE id = 2 AND stopped IS NOT NULL"), 120)
        if not stopped:
            second.kill_all()
        assert stopped, (seen(exp, "SELECT id, stopped FROM pools ORDER BY id"), attached.communicate(timeout=60))
        _, err = attached.communicate(timeout=180)
        assert attached.returncode == 128 + signal.SIGTERM, err
        assert second.processes() == {}, second.processes()
    assert stored(exp) == list(range(BUDGET))
