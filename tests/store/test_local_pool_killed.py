"""A pool with no batch job to ask (``emews attach`` on ``local``: a login node, a workstation)
killed with SIGKILL: ``emews status`` on its host sees that its process is gone (the pool records
its rank 0's pid and start time at registration) and shows it lost at once, its workers no longer
counted, instead of running until its lease ends (docs/postgres.md, "Pools")."""

from __future__ import annotations

import re
from pathlib import Path

from pgserver import PgServer
from pooled import gated_command, gated_workflow, pooled_run, running_on, seen

from testutil import wait_until


def test_a_local_pool_killed_with_sigkill_is_lost_at_once(pg_server: PgServer, tmp_path: Path) -> None:
    """Pool 1 (the launch's) and an attached local pool 2 each run a task at the gate; pool 2's
    every process is killed with SIGKILL. Its heartbeat is seconds old and its lease (600 s) far
    from ending, yet ``emews status`` must say it is lost, holding its task, and count one
    worker (pool 1's), while pool 1 still runs."""
    wf = gated_workflow(tmp_path, pg_server.url(), 8, optimizer={"name": "random", "options": {"seed": 1}},
                        store={"lease": 600})
    second = gated_command(tmp_path)
    with pooled_run(tmp_path, wf, workers=1) as run:
        exp, first = run.exp, run.first
        assert wait_until(lambda: running_on(exp, 1), 180), seen(exp, "SELECT id, state, pool FROM tasks")
        attached = run.attach(1, command=second)
        assert wait_until(lambda: running_on(exp, 2), 180), seen(exp, "SELECT id, state, pool FROM tasks")
        second.kill_all()
        attached.wait(timeout=60)
        said: list[str] = []

        def lost() -> bool:
            said[:] = first("status", "exp", timeout=120).stdout.splitlines()
            return any(re.match(r"  pool 2: lost \(its process ended", line) for line in said)

        assert wait_until(lost, 240), said
        pool_2 = next(line for line in said if line.startswith("  pool 2:"))
        beat = re.search(r"heartbeat (\d+) s ago", pool_2)
        assert beat and int(beat.group(1)) < 600, pool_2  # not by the end of its lease
        # and when its task comes back: its lease's end, minutes away (600 s from its last renewal)
        back = re.search(r"its tasks return to the queue when their leases end, in (\d+) min", pool_2)
        assert back and 1 <= int(back.group(1)) <= 10, pool_2
        assert any(line.startswith("  pool 1: running") for line in said), said
        assert any(re.search(r"workers busy: \d+/1\b", line) for line in said), said  # pool 1's only
        run.kill()  # the test is done with pool 1
