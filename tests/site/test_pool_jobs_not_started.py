"""``emews status`` names an attached pool's batch job whose pool has not joined (docs/postgres.md,
"Pools"): one that waits in Slurm's queue, and one that ended before its pool started (its output
named). Before, status listed the registered pools only ("pools: 1" after two attaches) and said
nothing of either. Real loopback Slurm and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from emews.site.jobs import JOB_RECORD
from site_helpers import LOOPBACK_SITE
from slurm_loopback import LoopbackSlurm
from slurm_pools import PgServer, gated_launch, job_state, jobs_import_this_tree, postgres  # noqa: F401
from pooled import gated_workflow, wait_for_queued
from test_slurm_loopback import wait_for


def test_status_names_pool_jobs_whose_pool_has_not_joined(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    wf = gated_workflow(tmp_path, postgres.url(), 4, store={"lease": 600})
    exp = tmp_path / "exp"
    jobs: list[str] = []
    try:
        with gated_launch(tmp_path, wf, workers=1) as cmd:
            wait_for_queued(exp)
            later = ["--set", 'scheduler.directives=["--overcommit", "--begin=now+3600"]']  # pending an hour
            broken = ["--set", "launcher.command=/bin/false"]  # its job ends before a pool starts
            for extra in (later, broken):
                attached = cmd("attach", "exp", "--site", str(LOOPBACK_SITE), "--workers", "1", *extra, timeout=120)
                assert attached.returncode == 0, attached.stderr
            jobs = [json.loads((exp / "pools" / f"pool-00{n}" / JOB_RECORD).read_text())["job_id"] for n in (1, 2)]
            assert wait_for(lambda: job_state(jobs[1]), "done", 120) == "done"
            assert job_state(jobs[0]) == "queued"
            status = cmd("status", "exp", timeout=120, check=True).stdout.splitlines()
            at = status.index("pools: 1")
            assert status[at + 1].startswith("  pool 1: running, local, "), status
            assert status[at + 2:] == [
                f"  pools/pool-001: batch job {jobs[0]} waits in the batch queue; its pool has not started",
                f"  pools/pool-002: batch job {jobs[1]} ended before its pool started (its output: "
                f"pools/pool-002/job-{jobs[1]}.out)",
            ], status
    finally:
        for job in jobs:
            subprocess.run(["scancel", job], capture_output=True)
