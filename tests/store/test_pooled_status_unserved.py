"""``emews status`` of a pooled experiment whose optimizer is gone (its launch killed, no ``emews
serve``) while a pool still runs: the pools finish what is queued or leased, and nothing more is
proposed, so the status gives no time to the budget's end (it did: the rate of the pool's last
results times what the budget has left, as if the run went on) and says that no optimizer runs and
what continues it (docs/postgres.md, "Pools")."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import gated_workflow, pooled_run, rows, running_on, seen

from testutil import wait_until


def test_status_gives_no_eta_while_no_optimizer_runs(pg_server: PgServer, tmp_path: Path) -> None:
    wf = gated_workflow(tmp_path, pg_server.url(), 20, optimizer={"name": "random", "options": {"seed": 1, "backlog": 1}},
                        store={"lease": 600})
    with pooled_run(tmp_path, wf, workers=1) as run:
        exp, first = run.exp, run.first
        assert wait_until(lambda: running_on(exp, 1), 180), seen(exp, "SELECT id, state, pool FROM tasks")
        run.attach(2)
        assert wait_until(lambda: len(running_on(exp, 2)) == 2, 180), seen(exp, "SELECT id, state, pool FROM tasks")
        first.kill_all()  # the optimizer and pool 1, kill -9
        run.launch.wait(timeout=60)
        run.open()
        # pool 2 ends what it holds and what was queued; pool 1's tasks stay leased to it (600 s)
        idle = "SELECT count(*) FROM tasks WHERE state = 'queued' OR (state = 'leased' AND pool = 2)"
        assert wait_until(lambda: rows(exp, idle) == [(0,)] and rows(exp, "SELECT count(*) FROM results")[0][0] > 0, 180)
        status = first("status", "exp", timeout=120, check=True).stdout.splitlines()
        run.kill()  # pool 2, idle with no optimizer
    headline = next(line for line in status if "workers busy" in line)
    assert headline.endswith("ETA -"), status
    assert any(line.startswith("optimizer: none runs") and "continue with: emews serve " in line for line in status), status
