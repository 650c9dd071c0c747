"""A batch job stopped by the batch system (``emews cancel`` = scancel: SIGTERM to every process of
the job, as at the walltime) stores what arrived, says so, and ``emews resume`` finishes it, on the
real loopback Slurm. Issue 8: "SIGTERM/SIGINT anywhere (launch, rank 0, batch job)"."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from site_helpers import emews, launch_rugged, repo_env
from slurm_loopback import LoopbackSlurm

from emews.site.jobs import job_status


def test_a_cancelled_batch_job_stores_what_arrived_and_resume_finishes(slurm_cluster: LoopbackSlurm,
                                                                       tmp_path: Path) -> None:
    from test_slurm_loopback import wait_for

    from testutil import wait_until

    events, gate = tmp_path / "events", tmp_path / "gate"
    events.mkdir()
    env = repo_env(RUGGED_EVENTS=str(events), RUGGED_GATE=str(gate))
    exp = launch_rugged(tmp_path, env, mode="wait", evaluations=8, isolation="process")
    assert wait_until(lambda: len(list(events.glob("started-*"))) >= 2, timeout=240)

    cancelled = emews("cancel", str(exp), cwd=tmp_path, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    assert wait_until(lambda: (exp / "summary.json").exists() and (exp / "results.csv").exists()
                      and not (exp / "lease.json").exists(), timeout=60)
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["interrupted"] == "stopped by SIGTERM"
    status = emews("status", str(exp), cwd=tmp_path, env=env)
    assert status.stdout.splitlines()[0] == ("job: done, the run ended with exit status 143: stopped by SIGTERM; "
                                             f"continue with: emews resume {exp}"), status.stdout

    gate.touch()
    resumed = emews("resume", str(exp), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    with sqlite3.connect(exp / "results.db") as db:
        rows = db.execute("SELECT id, status FROM results ORDER BY id").fetchall()
    assert rows == [(i, "ok") for i in range(8)]


def test_a_batch_job_cancelled_as_it_runs_ends_its_run_before_slurm_calls_it_done(
        slurm_cgroup_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """``scancel`` of a running job on a cluster that kills every process of the job's step once its
    batch shell ends (proctrack/cgroup): job.sh passes the SIGTERM on, waits for its launcher (rank 0
    stops the run: its summary and results.csv) and runs its end step, which exits 128 + 15; Slurm
    calls the job done only then, so all of it is there at that moment (looked at once). Was: the
    shell died of the SIGTERM, the step ended with it and its processes were killed mid-stop (no
    summary; ExitCode 0:15)."""
    import subprocess

    from test_slurm_job_exit import slurm_exit_code
    from test_slurm_loopback import wait_for

    from testutil import wait_until

    events, gate = tmp_path / "events", tmp_path / "gate"
    events.mkdir()
    env = repo_env(RUGGED_EVENTS=str(events), RUGGED_GATE=str(gate))
    exp = launch_rugged(tmp_path, env, mode="wait", evaluations=8, isolation="process")
    assert wait_until(lambda: len(list(events.glob("started-*"))) >= 2, timeout=240)
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    subprocess.run(["scancel", job_id], check=True, capture_output=True)
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    out = (exp / f"job-{job_id}.out").read_text()
    assert (exp / "summary.json").exists() and (exp / "results.csv").exists(), out
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["interrupted"] == "stopped by SIGTERM" and summary["exit_status"] == 143, summary
    assert list(exp.glob(".start*")) == [], out
    assert slurm_exit_code(job_id) == "143:0", out
