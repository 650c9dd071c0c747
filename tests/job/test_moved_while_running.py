"""``mv EXP EXP2`` while the experiment runs: the run ended with the optimizer rank's 'not an
experiment directory (no such folder; did you mean EXP2?)', a traceback in its log, MPI_Abort and
exit status 1, and wrote neither summary.json nor results.csv (nothing was lost: the store lived on
in EXP2). Now it says in one line where the directory went and writes its outputs there."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from gated_job import launch_gated

from testutil import said, wait_until, write_gated_workflow


def test_an_experiment_moved_while_it_runs_ends_with_its_outputs_where_it_went(emews_cmd, tmp_path: Path) -> None:
    gated = launch_gated(emews_cmd, tmp_path, evaluations=4, timeout=30)
    job, exp, moved = gated.job, gated.exp, tmp_path / "exp2"
    assert wait_until(lambda: len(gated.started()) >= 2, timeout=180), said(job)
    exp.rename(moved)
    gated.gate.touch()
    out, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    said_lines = [line for line in err.splitlines() if line.startswith("emews")]
    assert said_lines == [f"emews: the experiment directory {exp} was moved to {moved} while it ran: its summary "
                          f"and results.csv are written there (follow it with: emews status {moved})"], err
    assert "Traceback" not in err and "not an experiment directory" not in err and "Abort" not in err
    assert f"results: {moved / 'results.db'} and {moved / 'results.csv'}" in err
    assert json.loads((moved / "summary.json").read_text())["exit_status"] == 0
    assert len((moved / "results.csv").read_text().splitlines()) == 5
    assert not (moved / "lease.json").exists() and not exp.exists()
    status = emews_cmd("status", str(moved))
    assert status.returncode == 0 and "not running" in status.stdout and "4/4 evaluations: 4 ok" in status.stdout


TRAINER = '''\
import os, pathlib, time

def run(params, ctx):
    events = pathlib.Path(params["events"])
    state, start = ctx.restore(default=(None, 0))
    if state is not None:
        (events / f"restored-{ctx.task_id}-{state['trial']}-{start}").touch()
    ctx.report(step=1, metrics={"loss": 1.0}, checkpoint={"trial": ctx.task_id, "step": 1})
    (events / f"reported-{ctx.task_id}-{ctx.attempt}").touch()
    while not os.path.exists(params["gate"]):
        time.sleep(0.01)
    ctx.report(step=2, metrics={"loss": 0.5}, checkpoint={"trial": ctx.task_id, "step": 2})
    crashed = events / f"crashed-{ctx.task_id}"
    if not crashed.exists():  # each trial crashes once after the move (a worker's child starts again
        crashed.touch()       # twice): its retry restores what the moved experiment holds
        # a report promises its snapshot, not the file (a background thread writes it, maybe after
        # the move): the crash waits for step 1's file where the experiment is now (its step 2's
        # may well die with it)
        step1 = pathlib.Path(ctx.checkpoints_root) / f"{ctx.task_id:06d}" / "step-00000001-000.ckpt"
        waited = time.monotonic()
        while not step1.exists():
            if time.monotonic() - waited > 60:  # never written where the experiment went
                (events / f"lost-{ctx.task_id}").touch()
                break
            time.sleep(0.01)
        os._exit(3)
    return 0.5
'''


def test_a_training_run_moved_while_it_runs_writes_and_restores_its_checkpoints_where_it_went(
    emews_cmd, tmp_path: Path
) -> None:
    """``mv EXP EXP2`` while trials train: the checkpoints written after the move went to a new
    ``EXP/checkpoints`` (``mkdir -p`` made the old name again), the moved store called them durable
    though EXP2 did not hold them, and a retry's restore read the old name (nothing there). Now the
    writers follow the directory: no folder is made under the old name, every checkpoint is in EXP2,
    and each trial's retry (its worker's child started again, twice on one worker) restores its own
    checkpoint from there (step 1's at least: the trainer's crash waits for its file, as its report
    does not)."""
    from emews.training.checkpoints import read_checkpoint

    wf, events, gate = write_gated_workflow(tmp_path, TRAINER,
                                            budget={"evaluations": 3}, task={"timeout": 120, "retries": 1})
    exp, moved = tmp_path / "exp", tmp_path / "exp2"
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", str(exp))
    assert wait_until(lambda: len(list(events.glob("reported-*"))) >= 2, timeout=180), said(job)
    exp.rename(moved)
    gate.touch()  # trials 0 and 1 write their step-2 checkpoints and crash, trial 2 starts; all run again
    out, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    assert not exp.exists(), sorted(str(p.relative_to(tmp_path)) for p in exp.rglob("*"))
    assert not list(events.glob("lost-*")), sorted(p.name for p in events.glob("lost-*"))
    restored = sorted(p.name.rsplit("-", 1)[0] for p in events.glob("restored-*"))  # trial and whose
    assert restored == ["restored-0-0", "restored-1-1", "restored-2-2"], (restored, err)
    db = sqlite3.connect(moved / "results.db")
    rows = db.execute("SELECT trial, step, path, state FROM checkpoints ORDER BY trial, step, id").fetchall()
    assert {(trial, step) for trial, step, _, _ in rows} == {(t, s) for t in (0, 1, 2) for s in (1, 2)}, rows
    for trial, step, path, state in rows:
        assert not Path(path).is_absolute(), path
        if state == "durable":
            assert read_checkpoint(moved / path) == {"trial": trial, "step": step}
    assert {(t, s) for t, s, _, state in rows if state == "durable"} >= {(1, 1), (1, 2), (2, 1), (2, 2)}, rows


WRITER = '''\
import os, pathlib, time

def run(params, ctx):
    events = pathlib.Path(params["events"])
    (ctx.run_dir / "before.txt").write_text("before")
    print("printed before", ctx.task_id, flush=True)
    (events / f"started-{ctx.task_id}").touch()
    while not os.path.exists(params["gate"]):
        time.sleep(0.01)
    (ctx.run_dir / "after.txt").write_text("after")  # the objective asks again: where the experiment is now
    print("printed after", ctx.task_id, flush=True)
    return 0.5
'''


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_task_that_began_before_the_move_has_its_run_dir_and_output_where_the_experiment_went(
    emews_cmd, tmp_path: Path, isolation: str
) -> None:
    """``mv EXP EXP2`` while tasks run: ``ctx.run_dir`` of a task that began before the move made
    ``EXP/runs/SHARD/ID`` again under the old name (``mkdir -p``), and what the task printed stayed in
    its worker's spool for good (the child kept the spool's old path: its output, and every later
    task's, never reached a run dir). Now the task's run dir and its output are where the
    experiment went."""
    wf, events, gate = write_gated_workflow(tmp_path, WRITER,
                                            budget={"evaluations": 3}, task={"timeout": 120, "isolation": isolation})
    exp, moved = tmp_path / "exp", tmp_path / "exp2"
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", str(exp))
    assert wait_until(lambda: len(list(events.glob("started-*"))) >= 2, timeout=180), said(job)
    exp.rename(moved)
    gate.touch()
    out, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    assert not exp.exists(), sorted(str(p.relative_to(tmp_path)) for p in exp.rglob("*"))
    for task in range(3):
        run_dir = moved / "runs" / "000" / f"{task:06d}"
        assert (run_dir / "before.txt").read_text() == "before", sorted(p.name for p in run_dir.iterdir())
        assert (run_dir / "after.txt").read_text() == "after", sorted(p.name for p in run_dir.iterdir())
        if isolation == "process":  # inline: the worker's own output, the job's
            printed = (run_dir / "stdout.txt").read_text().splitlines()
            assert printed == [f"printed before {task}", f"printed after {task}"], printed
