"""A pool frozen (SIGSTOP) past its task's lease, then thawed (SIGCONT), while another pool trains
that trial on: the thawed pool's next report is not stored and is answered stop, its trial ends
there, and the pool drops the task without a result (docs/postgres.md, "Leases and kill -9")."""

from __future__ import annotations

from pathlib import Path

import pytest
from pgserver import PgServer
from pooled import pooled_run, rows, seen, trainer_command, trainer_reports

from testutil import events, trainer_workflow, wait_until


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_thawed_pool_that_lost_its_lease_stops_training_the_trial(
    pg_server: PgServer, tmp_path: Path, isolation: str
) -> None:
    """Pool 1 trains the one trial to step 2 and waits at its gate; its whole job is frozen until
    pool 2 (attached) took the task (its lease ended), restored step 2 and stored steps 3 and 4;
    thawed, pool 1's trial reports step 3: answered stop, not stored (its checkpoint file deleted),
    and it trains no further. Pool 2 trains to the end: every step stored once, the result pool
    2's, both jobs exit 0."""
    wf = trainer_workflow(
        tmp_path,
        [0.1],
        epochs=6,
        task={"isolation": isolation, "timeout": 300},
        store={"url": pg_server.url(), "lease": 2},
    )
    log = tmp_path / "trainer.log"
    first, second = trainer_command(tmp_path, 3, "open-1"), trainer_command(tmp_path, 5, "open-2")
    with pooled_run(tmp_path, wf, workers=1, command=first, gates=("open-1", "open-2")) as run:
        exp = run.exp
        assert wait_until(lambda: seen(exp, "SELECT step FROM reports WHERE step = 2"), 180), events(log)
        # the report row is stored before the background writer renames step 2's file into place:
        # frozen before that, pool 1 leaves no restorable step 2 and pool 2 rightly trains step 2 again
        step_2 = exp / "checkpoints" / "000000"
        assert wait_until(lambda: any(step_2.glob("step-00000002-*.ckpt")), 180), events(log)
        run.frozen_while_pool_2_trains(second, "SELECT step FROM reports WHERE step = 4")
        pool_1 = next(e["pid"] for e in events(log) if e["event"] == "start" and e["restored"] == 0)
        answered = wait_until(lambda: [e for e in trainer_reports(tmp_path, pool_1) if e["step"] == 3], 120)
        assert answered, events(log)
    assert rows(exp, "SELECT step, count(*) FROM reports WHERE trial = 0 GROUP BY step ORDER BY step") == [
        (step, 1) for step in range(1, 7)]  # fmt: skip
    assert rows(exp, "SELECT step, count(*) FROM checkpoints WHERE trial = 0 GROUP BY step ORDER BY step") == [
        (step, 1) for step in range(1, 7)]  # fmt: skip
    assert rows(exp, "SELECT id, status, pool FROM results") == [(0, "ok", 2)]
    # pool 1's refused step 3 wrote a checkpoint that no row names: deleted, a restore never sees it
    on_disk = {p.name for p in (exp / "checkpoints" / "000000").glob("*.ckpt")}
    assert on_disk == {Path(p).name for (p,) in rows(exp, "SELECT path FROM checkpoints")}
    starts = [e for e in events(log) if e["event"] == "start"]
    assert [(e["pid"] == pool_1, e["restored"]) for e in starts] == [(True, 0), (False, 2)]
    pool_2 = starts[1]["pid"]
    assert [(e["step"], e["action"]) for e in trainer_reports(tmp_path, pool_1)] == [(1, "continue"), (2, "continue"), (3, "stop")]
    assert [(e["step"], e["action"]) for e in trainer_reports(tmp_path, pool_2)] == [(s, "continue") for s in (3, 4, 5, 6)]
    assert "pool 1 lost the lease of task 0" in (exp / "emews.log").read_text()
