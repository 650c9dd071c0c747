"""Two pools train one trial from the same point: a pool frozen (SIGSTOP) before its first report
and the pool that took the task over once the lease ended. Their checkpoints of the same step and
serial must not share a path: the frozen pool's refused write replaced the file a stored row of
the other pool names (docs/training.md, "Checkpoints"; docs/postgres.md, "Leases and kill -9")."""

from __future__ import annotations

import re
from pathlib import Path

from pgserver import PgServer
from pooled import pooled_run, rows, seen, trainer_command, trainer_reports

from emews.training.checkpoints import read_checkpoint
from testutil import events, trainer_workflow, wait_until


def test_two_pools_training_one_trial_never_write_the_same_checkpoint_file(pg_server: PgServer, tmp_path: Path) -> None:
    """Pool 1 starts the trial and is frozen before its step-1 report (its checkpoints carry a
    1000-byte blob); pool 2 takes the task (attempt 1), trains from scratch and stores steps 1 and
    2, then waits; pool 1 thawed reports step 1 (answered stop, not stored). Every checkpoint a
    row names is pool 2's, whole (the size the row says, no blob), and no other file is left.
    Before, both wrote TRIAL/step-00000001-000.ckpt: pool 1's write replaced pool 2's stored one."""
    wf = trainer_workflow(
        tmp_path,
        [0.1],
        epochs=4,
        task={"isolation": "inline", "timeout": 300},
        store={"url": pg_server.url(), "lease": 2},
    )
    log = tmp_path / "trainer.log"
    first = trainer_command(tmp_path, 1, "open-1", TRAINER_BLOB="1000")
    second = trainer_command(tmp_path, 3, "open-2")
    with pooled_run(tmp_path, wf, workers=1, command=first, gates=("open-1", "open-2")) as run:
        exp = run.exp
        assert wait_until(lambda: [e for e in events(log) if e["event"] == "start"], 180), events(log)
        run.frozen_while_pool_2_trains(second, "SELECT step FROM checkpoints WHERE step = 2")
        pool_1 = events(log)[0]["pid"]
        assert wait_until(lambda: trainer_reports(tmp_path, pool_1), 120), events(log)
    assert [(e["step"], e["action"]) for e in trainer_reports(tmp_path, pool_1)] == [(1, "stop")]
    assert rows(exp, "SELECT id, status, pool FROM results") == [(0, "ok", 2)]
    named = rows(exp, "SELECT step, path, size FROM checkpoints WHERE trial = 0 ORDER BY step")
    assert [step for step, *_ in named] == [1, 2, 3, 4]
    for step, path, size in named:
        file = exp / path
        assert file.stat().st_size == size, (step, path)  # not replaced by the frozen pool's write
        assert "blob" not in read_checkpoint(file), (step, path)
    on_disk = {p.relative_to(exp).as_posix() for p in (exp / "checkpoints").rglob("*.ckpt")}
    assert on_disk == {path for _, path, _ in named}


OLD_NAME = re.compile(r"checkpoints/000000/step-\d{8}-\d{3}\.ckpt")


def test_a_resume_restores_the_checkpoints_of_the_layout_before(pg_server: PgServer, tmp_path: Path) -> None:
    """A pooled run trains its trial to step 3 and its job is killed (kill -9): its checkpoints are
    named as every experiment before the attempt was in the name (a first attempt's still are:
    ``step-STEP-SERIAL.ckpt``). ``emews resume`` runs the task again (attempt 1): it restores
    step 3 from that file, writes steps 4 and 5 under the new names (``-a1``), and every file is
    named by its one row."""
    wf = trainer_workflow(
        tmp_path,
        [0.1],
        epochs=5,
        task={"isolation": "process", "timeout": 300},
        store={"url": pg_server.url(), "lease": 15},
    )
    log = tmp_path / "trainer.log"
    cmd = trainer_command(tmp_path, 4)
    with pooled_run(tmp_path, wf, workers=1, command=cmd) as run:
        exp = run.exp

        def durable() -> list[tuple]:
            named = seen(exp, "SELECT path FROM checkpoints WHERE step = 3")
            return [p for p in named if (exp / p[0]).exists()]

        assert wait_until(durable, 180), events(log)
        run.kill()
        before = rows(exp, "SELECT step, path FROM checkpoints ORDER BY step")
        assert [s for s, _ in before] == [1, 2, 3] and all(OLD_NAME.fullmatch(p) for _, p in before), before
        run.open()
        resumed = cmd("resume", "exp", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert rows(exp, "SELECT id, status FROM results") == [(0, "ok")]
    assert [e["restored"] for e in events(log) if e["event"] == "start"] == [0, 3]
    after = rows(exp, "SELECT step, path FROM checkpoints ORDER BY step")
    assert after[:3] == before
    assert [(s, Path(p).name) for s, p in after[3:]] == [
        (4, "step-00000004-000-a1.ckpt"),
        (5, "step-00000005-001-a1.ckpt"),
    ]
    on_disk = {p.relative_to(exp).as_posix() for p in (exp / "checkpoints").rglob("*.ckpt")}
    assert on_disk == {p for _, p in after}
