"""On a Slurm that holds a job to its ``--mem`` (a memory cgroup: task/cgroup, ConstrainRAMSpace), an
objective that outgrows it is taken by the kernel's OOM killer: the task is recorded out of memory
with the job's limit, the run goes on and ends, the job ends with the run's status. Slurm's cgroup v1
layout puts the job's processes in ``job_N/step_*/task_*`` under a limit set on ``job_N``: the kill is
counted in the task's own cgroup (v1 counts no subtree), where the worker and its objective process
live, and the limit is the hierarchy's (review rev90, finding b)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from memory_cgroup import OOM_AT_400 as OOM
from memory_cgroup import mode_workflow
from site_helpers import LOOPBACK_SITE, emews, repo_env
from slurm_loopback import LoopbackSlurm
from test_slurm_job_exit import slurm_exit_code
from test_slurm_loopback import wait_for

from emews.site.jobs import job_status


def test_a_task_past_the_jobs_mem_is_recorded_out_of_memory_and_the_run_goes_on(
    slurm_memory_cluster: LoopbackSlurm, tmp_path: Path
) -> None:
    from testutil import stored_rows, wait_until

    site = tmp_path / "site.yaml"
    loopback = yaml.safe_load(LOOPBACK_SITE.read_text())
    loopback["scheduler"]["directives"] = [*loopback["scheduler"]["directives"], "--mem=400M"]
    loopback["launcher"]["workers_per_node"] = 1  # one task at a time: no other is killed meanwhile
    site.write_text(yaml.safe_dump(loopback))
    wf = mode_workflow(tmp_path, ["oom-rss", "ok"], "process")
    exp = tmp_path / "exp"
    launched = emews("launch", str(wf), "--site", str(site), "--exp-dir", str(exp), cwd=tmp_path, env=repo_env())
    assert launched.returncode == 0, launched.stderr
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    assert wait_until(lambda: (exp / "summary.json").exists(), timeout=60)
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    out = (exp / f"job-{job_id}.out").read_text()
    rows = {json.loads(r["params"])["mode"]: r for r in stored_rows(exp)}
    assert {m: r["status"] for m, r in rows.items()} == {"oom-rss": "crashed", "ok": "ok"}, out
    assert rows["oom-rss"]["error"].splitlines()[0] == OOM, rows["oom-rss"]["error"]
    assert f"most frequent failure: 1x {OOM}" in out, out
    assert json.loads((exp / "summary.json").read_text())["exit_status"] == 0
    assert slurm_exit_code(job_id) == "0:0", out
