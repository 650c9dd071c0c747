"""A worker pool submitted to the real loopback Slurm (issue 26): an experiment launched here with
``--pools`` (its optimizer and a pool of 2 workers) and ``emews attach EXP --site <slurm>`` whose
batch job joins it from Slurm; both pools run evaluations, each stored once, the Slurm pool's row
names its job, and the batch job ends once the optimizer has finished."""

from __future__ import annotations

import json
from pathlib import Path

from emews.site.jobs import JOB_RECORD
from site_helpers import LOOPBACK_SITE
from slurm_loopback import LoopbackSlurm
from slurm_pools import PgServer, gated_launch, job_state, jobs_import_this_tree, postgres  # noqa: F401
from pooled import gated_command, gated_workflow, held_by, seen, wait_for_queued
from test_slurm_loopback import wait_for
from testutil import EmewsCommand, events, trainer_workflow, wait_until


def test_a_pool_on_slurm_joins_an_experiment(slurm_cluster: LoopbackSlurm, postgres: PgServer,
                                             tmp_path: Path) -> None:
    wf = gated_workflow(tmp_path, postgres.url(), 10, store={"lease": 5})
    cmd = gated_command(tmp_path)
    launch = cmd.popen("launch", str(wf), "--workers", "2", "--pools", "1", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    try:
        wait_for_queued(exp)
        attached = cmd("attach", "exp", "--site", str(LOOPBACK_SITE), "--workers", "2", timeout=120)
        assert attached.returncode == 0, attached.stderr
        pool_dir = exp / "pools" / "pool-001"
        record = json.loads((pool_dir / JOB_RECORD).read_text())
        assert f"submitted pool job {record['job_id']}" in attached.stdout
        ran = wait_until(lambda: held_by(exp, 2), 240)
        assert ran, (pool_dir / "emews.log").read_text() if (pool_dir / "emews.log").exists() else "no pool log"
        (tmp_path / "open").touch()
        out, err = launch.communicate(timeout=300)
        assert launch.returncode == 0, err
        assert wait_for(lambda: job_state(record["job_id"]), "done", 120) == "done"
    finally:
        (tmp_path / "open").touch()
        cmd.kill_all()
    results = seen(exp, "SELECT id, pool FROM results ORDER BY id")
    assert [i for i, _ in results] == list(range(10)) and {p for _, p in results} == {1, 2}
    pools = seen(exp, "SELECT id, site, job_id, stopped IS NOT NULL FROM pools ORDER BY id")
    assert pools[1][1:] == ("slurm-loopback", record["job_id"], True), pools


def test_cancel_ends_an_attached_pools_batch_job_and_its_tasks_run_elsewhere(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    """``emews cancel EXP`` cancels the pools' batch jobs too (a pool waits for queued work after its
    optimizer is gone, holding its allocation until the walltime); the pool hands the tasks it held
    back as it ends (none leased to it once its job is over; status calls it stopped) and they run
    on the other pool, each stored once; a second cancel says the job had ended."""
    wf = gated_workflow(tmp_path, postgres.url(), 8, store={"lease": 5})
    exp = tmp_path / "exp"
    with gated_launch(tmp_path, wf, workers=2) as cmd:
        wait_for_queued(exp)
        attached = cmd("attach", "exp", "--site", str(LOOPBACK_SITE), "--workers", "2", timeout=120)
        assert attached.returncode == 0, attached.stderr
        job_id = json.loads((exp / "pools" / "pool-001" / JOB_RECORD).read_text())["job_id"]
        assert wait_until(lambda: held_by(exp, 2), 240)
        cancelled = cmd("cancel", "exp", timeout=120)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.splitlines() == [f"cancelled pool job {job_id} (pool-001)"]
        assert wait_for(lambda: job_state(job_id), "done", 120) == "done"
        # its tasks handed back as it ended (the launch's pool, its workers held at the gate, claims none yet)
        assert held_by(exp, 2) == []
        status = cmd("status", "exp", timeout=120, check=True).stdout
        assert "pool 2: stopped" in status and "queue: " in status, status
        again = cmd("cancel", "exp", timeout=120)
        assert again.returncode == 0 and again.stdout.splitlines() == [f"pool job {job_id} (pool-001) had ended"]
    assert [i for i, _ in seen(exp, "SELECT id, pool FROM results ORDER BY id")] == list(range(8))


def _each_stored_once_and_the_paused_trial_moved_once(exp: Path, log: Path) -> None:
    """Results 0, 1 and 2 are stored, and the trainer's ``log`` says one trial, the one the Slurm
    pool paused, started again once: from its own checkpoint, at the step where it paused."""
    assert [i for (i,) in seen(exp, "SELECT id FROM results ORDER BY id")] == [0, 1, 2]
    logged = events(log)
    starts = [(e["task"], e["restored"], e["from_trial"]) for e in logged if e["event"] == "start"]
    moved = [start for start in starts if start[1] > 0]
    assert len(moved) == 1, starts  # the trial the pool paused, once
    trial, step, source = moved[0]
    paused = [e["step"] for e in logged if e["event"] == "report" and e["task"] == trial and e["action"] == "pause"]
    assert paused == [step] and source == trial, (paused, moved)  # its own checkpoint, where it paused


def test_a_pool_job_at_its_walltime_margin_ends_itself_and_its_trial_goes_on_elsewhere(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    """An attached pool on Slurm with a 1-minute walltime (Slurm's shortest): at its margin (half of
    it, from the end Slurm gives the job) its trial pauses with its checkpoint, and the pool job then
    ends itself ("stopped at the walltime margin": it sat idle, its paused task leased, until Slurm
    killed it at its time limit); the launch's pool continues the trial from its own checkpoint, and
    every evaluation is stored once."""
    wf = trainer_workflow(tmp_path, [0.1, 0.2, 0.3], epochs=40, task={"isolation": "process", "timeout": 300},
                          store={"url": postgres.url("emews"), "lease": 5},
                          optimizer={"name": "sweep", "options": {"backlog": 10}})  # all queued: one for Slurm
    cmd, on_slurm = EmewsCommand(tmp_path), EmewsCommand(tmp_path)
    gate = tmp_path / "open"  # the launch's trials wait at step 2 until the Slurm pool's job is over
    cmd.env.update(TRAINER_GATE_AT="2", TRAINER_GATE=str(gate), TRAINER_LOG=str(tmp_path / "trainer.log"))
    on_slurm.env.update(TRAINER_STEP_SLEEP="1", TRAINER_LOG=str(tmp_path / "trainer.log"))  # 40 s: past its margin
    launch = cmd.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    try:
        queued = wait_until(lambda: seen(exp, "SELECT id FROM tasks WHERE state = 'queued'") or launch.poll(), 240)
        assert queued and launch.poll() is None, launch.communicate(timeout=60) if launch.poll() is not None else queued
        attached = on_slurm("attach", "exp", "--site", str(LOOPBACK_SITE), "--workers", "1",
                       "--set", "scheduler.walltime=00:01:00", timeout=120)
        assert attached.returncode == 0, attached.stderr
        job_id = json.loads((exp / "pools" / "pool-001" / JOB_RECORD).read_text())["job_id"]
        assert wait_for(lambda: job_state(job_id), "done", 240) == "done"
        output = (exp / "pools" / "pool-001" / f"job-{job_id}.out").read_text()
        assert "stopped: stopped at the walltime margin" in output and "TIME LIMIT" not in output, output
        gate.touch()
        out, err = launch.communicate(timeout=300)
        assert launch.returncode == 0, err
    finally:
        gate.touch()
        cmd.kill_all()
        on_slurm.kill_all()
    _each_stored_once_and_the_paused_trial_moved_once(exp, tmp_path / "trainer.log")


def test_a_pool_job_warned_by_slurm_hands_its_trial_back_and_ends_as_at_its_walltime_margin(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    """``scancel --batch --signal=USR1`` is what ``--signal=B:USR1@SECONDS`` sends the batch shell:
    the attached pool's job passes it on to its ranks, its trial pauses with its checkpoint, the pool
    hands it back and ends itself as at its walltime margin (the shell died of the signal before:
    job FAILED with signal 10, the trial leased to a pool that was gone); the launch's pool continues
    the trial from the pool's checkpoint, and every evaluation is stored once."""
    import subprocess

    wf = trainer_workflow(tmp_path, [0.1, 0.2, 0.3], epochs=40, task={"isolation": "process", "timeout": 300},
                          store={"url": postgres.url("emews"), "lease": 600},  # back at once or not in time
                          optimizer={"name": "sweep", "options": {"backlog": 10}})
    cmd, on_slurm = EmewsCommand(tmp_path), EmewsCommand(tmp_path)
    gate = tmp_path / "open"  # the launch's trials wait at step 2 until the Slurm pool's job is over
    log = tmp_path / "trainer.log"
    cmd.env.update(TRAINER_GATE_AT="2", TRAINER_GATE=str(gate), TRAINER_LOG=str(log))
    on_slurm.env.update(TRAINER_STEP_SLEEP="1", TRAINER_LOG=str(log))
    launch = cmd.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    try:
        queued = wait_until(lambda: seen(exp, "SELECT id FROM tasks WHERE state = 'queued'") or launch.poll(), 240)
        assert queued and launch.poll() is None, launch.communicate(timeout=60) if launch.poll() is not None else queued
        attached = on_slurm("attach", "exp", "--site", str(LOOPBACK_SITE), "--workers", "1", timeout=120)
        assert attached.returncode == 0, attached.stderr
        pool_dir = exp / "pools" / "pool-001"
        job_id = json.loads((pool_dir / JOB_RECORD).read_text())["job_id"]

        def slurm_trial_reported() -> bool:
            held = set(held_by(exp, 2))
            return any(e["event"] == "report" and e["task"] in held for e in events(log))

        assert wait_until(slurm_trial_reported, 240), events(log)
        subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], check=True, capture_output=True)
        assert wait_for(lambda: job_state(job_id), "done", 240) == "done"
        output = (pool_dir / f"job-{job_id}.out").read_text()
        assert "stopped: stopped at the walltime margin" in output, output
        assert "handed back to the queue" in output, output
        shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
        assert "JobState=COMPLETED" in shown and "ExitCode=0:0" in shown, shown
        assert held_by(exp, 2) == []
        gate.touch()
        out, err = launch.communicate(timeout=300)
        assert launch.returncode == 0, err
    finally:
        gate.touch()
        cmd.kill_all()
        on_slurm.kill_all()
    _each_stored_once_and_the_paused_trial_moved_once(exp, log)
