"""A pool that joins while the optimizer waits for a result gets work for every one of its workers
at once: the optimizer's side learns that the pools' capacity grew (the new pool's registration is
announced in the store) and the optimizer proposes for it then, not after its next result
(docs/postgres.md, "Pools")."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import join_while_gated, running_on, seen


def test_a_pool_that_joins_gets_work_for_every_worker_before_any_result(pg_server: PgServer, tmp_path: Path) -> None:
    """The first pool (1 worker, holding 2) runs at the gate; the optimizer (random, backlog 1) keeps
    what the pools hold, and the largest hold again, in flight: 4 tasks, 2 of them queued. A pool of
    3 workers (holding 4) attaches: the 2 queued tasks are not enough for it, and its third worker
    must start a task while no result is stored (it waited for pool 1's first result, which comes
    only when the gate opens: the optimizer, blocked in its wait, did not see the capacity grow)."""
    states = "SELECT state, count(*) FROM tasks GROUP BY state ORDER BY state"
    join_while_gated(tmp_path, pg_server.url(), 40, {"name": "random", "options": {"seed": 1, "backlog": 1}},
                     first_holds=lambda exp: seen(exp, states) == [("leased", 2), ("queued", 2)] and running_on(exp, 1))
