"""A plain Slurm ``scancel`` of an attached pool's batch job (not ``emews cancel``) on the real
loopback Slurm: ``scancel JOBID`` stops the pool as a stop signal does (it hands back what it held,
the experiment goes on on the other pool, ``emews status`` calls it stopped and counts its workers
no more); a pool killed with its job (SIGKILL: no time to stop) is shown lost as soon as its
heartbeat is late and Slurm says the job ended, not running until its lease ends (docs/postgres.md, "Pools")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from emews.site.jobs import JOB_RECORD
from site_helpers import LOOPBACK_SITE
from slurm_loopback import LoopbackSlurm, kill_job_processes
from slurm_pools import PgServer, gated_launch, job_state, jobs_import_this_tree, postgres  # noqa: F401
from pooled import gated_workflow, held_by, running_on, seen, wait_for_queued
from test_slurm_loopback import wait_for
from testutil import EmewsCommand, status_comes_to_say, wait_until

BUDGET = 8


def _attach_on_slurm(cmd: EmewsCommand, exp: Path) -> tuple[str, list[int]]:
    """A pool of 2 workers attached on Slurm once the launch's pool holds its tasks; its job id and
    the tasks it runs (their marks are there)."""
    wait_for_queued(exp)
    attached = cmd("attach", "exp", "--site", str(LOOPBACK_SITE), "--workers", "2", timeout=120)
    assert attached.returncode == 0, attached.stderr
    job_id = json.loads((exp / "pools" / "pool-001" / JOB_RECORD).read_text())["job_id"]
    running = wait_until(lambda: running_on(exp, 2), 240)
    assert running, seen(exp, "SELECT id, state, pool FROM tasks ORDER BY id")
    return job_id, running


def _pool_line(cmd: EmewsCommand, pool: int) -> tuple[str, str]:
    status = cmd("status", "exp", timeout=120, check=True).stdout
    return next(line for line in status.splitlines() if line.startswith(f"  pool {pool}: ")), status


def _not_running(cmd: EmewsCommand, pool: int) -> tuple[str, str] | None:
    """Pool ``pool``'s line in ``emews status`` and the whole status, once it does not say running."""
    line, status = _pool_line(cmd, pool)
    return None if line.startswith(f"  pool {pool}: running,") else (line, status)


def test_scancel_stops_an_attached_pool_as_a_stop_signal_does(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    wf = gated_workflow(tmp_path, postgres.url(), BUDGET, store={"lease": 600})
    exp = tmp_path / "exp"
    with gated_launch(tmp_path, wf, workers=2) as cmd:
        job_id, running = _attach_on_slurm(cmd, exp)
        status_comes_to_say(cmd, "workers busy: 4/4")  # each pool tells what runs within a second or so
        subprocess.run(["scancel", job_id], check=True, capture_output=True)
        assert wait_for(lambda: job_state(job_id), "done", 240) == "done"
        output = (exp / "pools" / "pool-001" / f"job-{job_id}.out").read_text()
        assert "handed back to the queue; stopped: stopped by SIGTERM" in output, output
        assert held_by(exp, 2) == []  # back at once
        line, status = _pool_line(cmd, 2)
        assert line.startswith("  pool 2: stopped, slurm-loopback, job " + job_id), status
        assert "workers busy: 2/2" in status, status  # the launch's pool alone
        assert "0 evaluations" in cmd("results", "exp", timeout=120, check=True).stdout
    results = seen(exp, "SELECT id, pool FROM results ORDER BY id")
    assert results == [(i, 1) for i in range(BUDGET)]
    attempts = dict(seen(exp, "SELECT id, attempt FROM tasks"))
    assert all(attempts[i] == 1 for i in running)  # started on pool 2: one more attempt each


LEASE = 30  # seconds: a heartbeat every 10 s; the tasks the killed pool held come back 30 s after its last


def test_a_pool_killed_with_its_job_is_lost_once_its_heartbeat_is_late(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    """Every process of the pool's job killed at once (SIGKILL: a node lost, the OOM killer, a
    scancel past its KillWait), so the job ends with nothing handed back, the pool's row not stopped.
    Once its heartbeat is later than its period (a third of the 30 s lease) ``emews status`` says it
    is lost, its batch job ended, and counts its workers no more, while the lease still holds (it
    said running, 4/4 workers busy, until the lease ended); the tasks then run on the launch's pool,
    each stored once. The status that first tells the pool is not running is the one checked: it
    is read within one ``emews status`` of the heartbeat being late, so a loaded machine has 20 s
    (two thirds of the lease) to run one."""
    wf = gated_workflow(tmp_path, postgres.url(), BUDGET, store={"lease": LEASE})
    exp = tmp_path / "exp"
    with gated_launch(tmp_path, wf, workers=2) as cmd:
        job_id, running = _attach_on_slurm(cmd, exp)
        assert kill_job_processes(job_id)  # no process of the job had time to stop
        assert wait_for(lambda: job_state(job_id), "done", 240) == "done"
        line, status = wait_until(lambda: _not_running(cmd, 2), 240) or _pool_line(cmd, 2)
        age = int(line.split("heartbeat ")[1].split(" s ago")[0])
        assert line.startswith("  pool 2: lost (its batch job ended without it stopping; "), status
        assert age < LEASE and "workers busy: 2/2" in status, status  # within the lease: its workers are gone
    results = seen(exp, "SELECT id, pool FROM results ORDER BY id")
    assert results == [(i, 1) for i in range(BUDGET)]
    line, status = _pool_line(cmd, 2)
    assert line.startswith("  pool 2: gone ("), status
