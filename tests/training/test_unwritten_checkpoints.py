"""Checkpoints a task's process never wrote: it was killed after ``ctx.report`` handed the
snapshot to its background writer, before the writer wrote it (``before``) or while it wrote it
(``mid``: its temporary file begun; ``stuck``: the same, killed by the task timeout). Their rows stayed ``staged`` in the store for good, seen by
nothing but raw SQL; and the temporary file of a write killed midway stayed in the trial's folder
until the next ``emews resume`` (never, in a pooled run). Now the row is ``lost`` once the task's
run ends (its retry here), ``emews checkpoints`` counts it in a note, and the worker that saw its
process die removes the temporary file before the retry starts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from testutil import killed_workflow, query


@pytest.mark.parametrize("how", ["before", "mid", "stuck"])
def test_a_checkpoint_its_killed_process_never_wrote_is_lost_and_leaves_no_temporary_file(
    emews_cmd, tmp_path: Path, how: str
) -> None:
    # stuck: the task timeout kills it (the retry needs a few seconds of it)
    wf, log = killed_workflow(tmp_path, how, 20 if how == "stuck" else 120, checkpoints={"keep_last": 1})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    starts = [json.loads(line) for line in log.read_text().splitlines()]
    # the retry restored step 1 (step 2 was never written), with no temporary file left in its folder
    assert [(s["restored"], s["temps"]) for s in starts] == [(0, []), (1, [])], starts
    ended = "timeout" if how == "stuck" else "crashed"
    assert query(exp, "SELECT task, attempt, status FROM attempts") == [(0, 1, ended)]
    rows = query(exp, "SELECT step, path, state FROM checkpoints ORDER BY id")
    assert [(step, Path(path).name, state) for step, path, state in rows] == [
        (1, "step-00000001-000.ckpt", "deleted"),   # keep_last: 1, once the retry's step 2 was written
        (2, "step-00000002-001.ckpt", "lost"),      # the killed process's: never written
        (2, "step-00000002-000.ckpt", "deleted"),   # the retry's (its serials from 0 again)
        (3, "step-00000003-001.ckpt", "durable"),
    ], rows
    assert sorted(p.relative_to(exp).as_posix() for p in (exp / "checkpoints").rglob("*") if p.is_file()) == [
        "checkpoints/000000/step-00000003-001.ckpt"]  # no temporary file: retention counted none either
    listed = emews_cmd("checkpoints", "exp")
    assert listed.returncode == 0, listed.stderr
    assert "step-00000003-001.ckpt" in listed.stdout and ".tmp" not in listed.stdout, listed.stdout
    assert "1 checkpoint" in listed.stderr and "never written" in listed.stderr, listed.stderr
    assert "trial 0 step 2" in listed.stderr, listed.stderr


def test_a_resume_finds_the_checkpoints_an_earlier_run_never_wrote_lost(emews_cmd, tmp_path: Path) -> None:
    """A row an earlier run left staged with no file (its job killed before the writer got to it, or
    an older emews that never settled it) is lost once ``emews resume`` starts, whatever it runs."""
    wf, _ = killed_workflow(tmp_path, "none")
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    (path,) = [p for (p,) in query(exp, "SELECT path FROM checkpoints WHERE step = 2")]
    (exp / path).unlink()
    with sqlite3.connect(exp / "results.db") as db:  # as the killed run left it
        db.execute("UPDATE checkpoints SET state = 'staged' WHERE step = 2")
    proc = emews_cmd("resume", "exp", "--set", "budget.evaluations=2", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert query(exp, "SELECT trial, step, state FROM checkpoints WHERE trial = 0 ORDER BY step") == [
        (0, 1, "durable"), (0, 2, "lost"), (0, 3, "durable")]
