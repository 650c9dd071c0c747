"""``mv EXP EXP2`` while a run on a PostgreSQL store trains: the checkpoint files went where the
experiment went (the writers follow it), but the store's rows did not: its TrialStore was opened as
read-only for SQLite's sake and so never followed the directory. Every checkpoint written after the
move was stored by its absolute path in EXP2 (another move, or a copy, then names the wrong files),
retention resolved paths under the old name (rows marked deleted, their files left in EXP2: 24 of 34
files in a digits run) and restores looked under the old name. Now a writing PostgreSQL store
follows the directory as the SQLite store does: rows stay relative, retention and restores act in EXP2."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import rows

from emews.training.checkpoints import read_checkpoint
from testutil import EmewsCommand, said, wait_until, write_gated_workflow

TRAINER = '''\
import os, pathlib, time

def run(params, ctx):
    events = pathlib.Path(params["events"])
    state, start = ctx.restore(default=(None, 0))  # the retry: step 4, then it writes step 5
    if state is not None:
        (events / f"restored-{ctx.task_id}-{state['trial']}-{start}").touch()
    ctx.report(step=start + 1, metrics={"loss": 1.0}, checkpoint={"trial": ctx.task_id, "step": start + 1})
    (events / f"reported-{ctx.task_id}-{ctx.attempt}").touch()
    while not os.path.exists(params["gate"]):
        time.sleep(0.01)
    for step in range(start + 2, 5):
        ctx.report(step=step, metrics={"loss": 1.0 / step}, checkpoint={"trial": ctx.task_id, "step": step})
    crashed = events / f"crashed-{ctx.task_id}"
    if not crashed.exists():  # its retry restores the newest checkpoint the moved experiment holds
        crashed.touch()
        os._exit(3)
    return 0.25
'''


def test_a_postgres_run_moved_while_it_trains_keeps_its_checkpoint_rows_in_the_moved_experiment(
    pg_server: PgServer, tmp_path: Path
) -> None:
    wf, events, gate = write_gated_workflow(tmp_path, TRAINER,
                                            budget={"evaluations": 2}, task={"timeout": 120, "retries": 1},
                                            checkpoints={"keep_last": 1, "background": False}, store={"url": pg_server.url()})
    exp, moved = tmp_path / "exp", tmp_path / "exp2"
    emews_cmd = EmewsCommand(tmp_path)
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", str(exp))
    assert wait_until(lambda: len(list(events.glob("reported-*"))) >= 2, timeout=180), said(job)
    exp.rename(moved)
    gate.touch()
    out, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    assert not exp.exists(), sorted(str(p.relative_to(tmp_path)) for p in exp.rglob("*"))
    restored = sorted(p.name for p in events.glob("restored-*"))
    assert restored == ["restored-0-0-4", "restored-1-1-4"], (restored, err)
    stored = rows(moved, "SELECT trial, step, path, state FROM checkpoints ORDER BY trial, step")
    assert [(t, s) for t, s, _, _ in stored] == [(t, s) for t in (0, 1) for s in (1, 2, 3, 4, 5)], stored
    for trial, step, path, state in stored:
        assert not Path(path).is_absolute(), stored
        assert (moved / path).exists() == (state == "durable"), stored  # retention deleted in EXP2
        if state == "durable":
            assert read_checkpoint(moved / path) == {"trial": trial, "step": step}
