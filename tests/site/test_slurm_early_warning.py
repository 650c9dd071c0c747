"""Slurm's early warning to a job's steps, on the real loopback Slurm with ``srun`` as the launcher.

``--signal=USR1@SECONDS`` (no ``B:``) signals every process of the job's steps (what ``scancel
--signal=USR1 JOB`` sends), and ``srun`` hands the batch shell's ``B:USR1`` (passed on by job.sh) to
every process of its step too: the ranks, the objective's children and the programs they run. The
optimizer rank moved its walltime margin to now; a command objective's program, whose default action
for SIGUSR1 is to die, crashed ('died of signal SIGUSR1'): every running evaluation was lost. The
ranks now ignore the signal (SIG_IGN, which the programs they start inherit), so the evaluations run
to their end and the run stops at the margin (exit status 3) with the rest left for ``emews resume``."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml
from site_helpers import LOOPBACK_SITE, emews, repo_env
from slurm_loopback import LoopbackSlurm

from emews.site.jobs import job_status
from testutil import wait_until

#: the loopback site with srun as its launcher (pmi2: the mpich wheel's MPI under srun)
SRUN_SITE = {**yaml.safe_load(LOOPBACK_SITE.read_text()),
             "launcher": {"type": "srun", "workers_per_node": 3, "args": ["--overcommit", "--mpi=pmi2"]}}

COMMAND = """#!/bin/bash
# an evaluation of a few seconds (a CANDLE model run as a command), its metric on the last line
touch "{started}/$$"
while [ ! -e "{gate}" ]; do sleep 0.1; done
echo "loss 0.25"
"""


@pytest.mark.parametrize("sent", [["--signal=USR1"], ["--batch", "--signal=USR1"]], ids=["steps", "batch-shell"])
def test_slurms_early_warning_lets_the_running_command_evaluations_end_and_stops_at_the_margin(
        slurm_cluster: LoopbackSlurm, tmp_path: Path, sent: list[str]) -> None:
    started, gate = tmp_path / "started", tmp_path / "open"
    started.mkdir()
    model = tmp_path / "model.sh"
    model.write_text(COMMAND.format(started=started, gate=gate))
    model.chmod(0o755)
    site = tmp_path / "srun-site.yaml"
    site.write_text(yaml.safe_dump(SRUN_SITE))
    wf = tmp_path / "wf.yaml"
    wf.write_text(yaml.safe_dump({
        "optimizer": {"name": "random", "options": {"seed": 1}}, "objective": {"command": [str(model)], "metric": "loss"},
        "space": {"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
        "budget": {"evaluations": 4}, "task": {"isolation": "process", "timeout": 600}}))
    exp, env = tmp_path / "exp", repo_env()
    launched = emews("launch", str(wf), "--site", str(site), "--exp-dir", str(exp), cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stderr
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    try:
        assert wait_until(lambda: len(list(started.iterdir())) == 3, timeout=240)  # 3 workers, each running one
        subprocess.run(["scancel", *sent, job_id], env=env, check=True, capture_output=True)
        # the warning reached every rank and program before the evaluations may end: the optimizer's log says so
        assert wait_until(lambda: "walltime margin reached" in (exp / "emews.log").read_text(), timeout=120)
    finally:
        gate.touch()
    from test_slurm_loopback import wait_for
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    with sqlite3.connect(exp / "results.db") as db:
        results = db.execute("SELECT status, error FROM results ORDER BY id").fetchall()
    output = next(exp.glob("job-*.out")).read_text()
    assert results == [("ok", None)] * 3, output  # not 'died of signal SIGUSR1'
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["interrupted"] == "stopped at the walltime margin" and summary["exit_status"] == 3, output
