"""A PBS or LSF pool's job (``emews attach EXP --site <pbs|lsf site>``) runs the watch of its start as a
Slurm one does: there is no qsub or bsub here, so their fakes run the job script they are handed, at
once, on this machine, in the batch system's environment variable that names the job (``PBS_JOBID``,
``LSB_JOBID``: the pool registers with it, and its watch looks for it). The pool's rank 2 stops itself
before Python: the watch runs beside the launcher, stops the job at the 15 s bound, and the script
exits 1 with the pool-not-started line naming rank 2; the experiment goes on without the pool.

Left untested by rev70 (only the Slurm pool's watch ran, on the loopback Slurm)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from emews.site.jobs import JOB_RECORD
from site_helpers import FakeTools
from slurm_pools import PgServer, gated_launch, jobs_import_this_tree, postgres  # noqa: F401
from pooled import gated_workflow, seen, wait_for_queued
from test_slurm_pool_start_bound import watches
from test_slurm_start_bound import stopping_slurm_site
from testutil import wait_until

#: runs the script ``$1`` here in the background as job ``$3`` (``$2``: the variable naming it), in a
#: session of its own, its output and exit status in the fake's folder; the fake's own output is the id line
RUN_JOB = """
run_job() {{
  ( export "$2=$3"; setsid -w bash "$1" > "$d/job.out" 2>&1 < /dev/null; echo $? > "$d/job.rc" ) > /dev/null 2>&1 &
}}
{submit}
"""

SCHEDULERS = {
    "pbs": ({"type": "pbs", "queue": "debug", "walltime": "00:05:00", "nodes": 1},
            "qsub", 'run_job "${{!#}}" PBS_JOBID {job}.fake-pbs; echo "{job}.fake-pbs"', "PBS_JOBID", "{job}.fake-pbs"),
    "lsf": ({"type": "lsf", "queue": "debug", "walltime": "00:05:00", "nodes": 1},
            "bsub", 'run_job "$d/bsub.$n.stdin" LSB_JOBID {job}; echo "Job <{job}> is submitted to queue <debug>."',
            "LSB_JOBID", "{job}"),
}


def _kill_job(variable: str, job_id: str) -> None:
    """SIGKILL what is left of the fake job (its processes have ``variable=job_id`` in their environment)."""
    mark = f"{variable}={job_id}".encode()
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and mark in environ:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("kind", sorted(SCHEDULERS))
def test_a_pbs_or_lsf_pool_whose_rank_never_starts_ends_at_the_bound(
        kind: str, postgres: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler, tool, submit, variable, named = SCHEDULERS[kind]
    job = str(40_000 + os.getpid() % 20_000)  # its own: the processes left are found by it
    fakes = FakeTools(tmp_path / "fake")
    fakes.add(tool, RUN_JOB.format(submit=submit.format(job=job)))
    fakes.add("qstat", 'printf "Job Id: %s\\n    job_state = R\\n" "$3"')
    fakes.add("bjobs", 'echo "RUN"')
    monkeypatch.setenv("PATH", f"{fakes.bin}{os.pathsep}{os.environ['PATH']}")
    job_id = named.format(job=job)
    wf = gated_workflow(tmp_path, postgres.url(), 4, store={"lease": 5})
    exp = tmp_path / "exp"
    site = stopping_slurm_site(tmp_path, scheduler=scheduler)
    try:
        with gated_launch(tmp_path, wf, workers=1) as cmd:
            wait_for_queued(exp)
            cmd.env["EMEWS_START_TIMEOUT"] = "15"  # the attach's: the job's environment is the submitter's
            attached = cmd("attach", "exp", "--site", str(site), "--workers", "2", timeout=120)
            del cmd.env["EMEWS_START_TIMEOUT"]
            assert attached.returncode == 0, attached.stderr
            pool = exp / "pools" / "pool-001"
            assert json.loads((pool / JOB_RECORD).read_text())["job_id"] == job_id
            assert "--watch-start 3" in (pool / "job.sh").read_text()
            assert wait_until(lambda: watches(pool), 120), (fakes.capture / "job.out")  # the watch started
            rc = fakes.capture / "job.rc"
            assert wait_until(rc.exists, 240), (fakes.capture / "job.out").read_text()
            out = (fakes.capture / "job.out").read_text()
            said = [line for line in out.splitlines() if line.startswith("emews")]
            assert len(said) == 1 and f"emews attach {exp}" in said[0], out
            assert ("the pool's job ended before it ran (its ranks did not all start within 15 s "
                    "(rank 2 of 3 never reached MPI_Init") in said[0], out
            assert "rank 2 of 3 never reached MPI_Init" in (pool / "emews.log").read_text()
            assert rc.read_text().strip() == "1", out
            assert list(pool.glob(".start*")) == [] and not watches(pool)
            assert seen(exp, "SELECT id FROM pools ORDER BY id") == [(1,)]  # it never registered
    finally:
        _kill_job(variable, job_id)
    assert [i for (i,) in seen(exp, "SELECT id FROM results ORDER BY id")] == list(range(4))
