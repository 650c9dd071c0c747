"""``emews status`` names an attached pool's batch job whose pool has not joined (docs/postgres.md,
"Pools"): one that waits in Slurm's queue, and one that ended before its pool started (its output
named). Before, status listed the registered pools only ("pools: 1" after two attaches) and said
nothing of either. Real loopback Slurm and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from emews.site.jobs import JOB_RECORD
from site_helpers import LOOPBACK_SITE
from test_slurm_loopback import wait_for

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "store"))  # the suite's PostgreSQL server (tests/store/pgserver.py)
sys.path.insert(0, str(TESTS))
from pgserver import PgServer, running_server  # noqa: E402
from pooled import gated_command, gated_workflow, wait_for_queued  # noqa: E402
from slurm_loopback import LoopbackSlurm  # noqa: E402


@pytest.fixture(scope="module")
def postgres() -> Iterator[PgServer]:
    with running_server("emews-pg-unstarted-") as server:
        yield server


@pytest.fixture(autouse=True)
def _jobs_import_this_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(TESTS.parent) + (os.pathsep + old if old else ""))


def _state(job_id: str) -> str:
    from emews.site.batch_schedulers import BATCH_SCHEDULERS
    from emews.site.schema import SchedulerConfig

    return BATCH_SCHEDULERS["slurm"](SchedulerConfig(type="slurm")).job_state(job_id)


def test_status_names_pool_jobs_whose_pool_has_not_joined(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    wf = gated_workflow(tmp_path, postgres.url(), 4, store={"lease": 600})
    cmd = gated_command(tmp_path)
    launch = cmd.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    jobs: list[str] = []
    try:
        wait_for_queued(exp)
        later = ["--set", 'scheduler.directives=["--overcommit", "--begin=now+3600"]']  # pending an hour
        broken = ["--set", "launcher.command=/bin/false"]  # its job ends before a pool starts
        for extra in (later, broken):
            attached = cmd("attach", "exp", "--site", str(LOOPBACK_SITE), "--workers", "1", *extra, timeout=120)
            assert attached.returncode == 0, attached.stderr
        jobs = [json.loads((exp / "pools" / f"pool-00{n}" / JOB_RECORD).read_text())["job_id"] for n in (1, 2)]
        assert wait_for(lambda: _state(jobs[1]), "done", 120) == "done"
        assert _state(jobs[0]) == "queued"
        status = cmd("status", "exp", timeout=120, check=True).stdout.splitlines()
        at = status.index("pools: 1")
        assert status[at + 1].startswith("  pool 1: running, local, "), status
        assert status[at + 2:] == [
            f"  pools/pool-001: batch job {jobs[0]} waits in the batch queue; its pool has not started",
            f"  pools/pool-002: batch job {jobs[1]} ended before its pool started (its output: "
            f"pools/pool-002/job-{jobs[1]}.out)",
        ], status
        (tmp_path / "open").touch()
        _, err = launch.communicate(timeout=300)
        assert launch.returncode == 0, err
    finally:
        (tmp_path / "open").touch()
        cmd.kill_all()
        for job in jobs:
            subprocess.run(["scancel", job], capture_output=True)
