"""Real Slurm on loopback: the fixture, the site layer end to end, and `emews launch`.

The ``slurm_cluster`` fixture FAILS when Slurm/munge are missing (EMEWS_SKIP_SLURM=1 skips).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from site_helpers import LOOPBACK_SITE
from emews.site import load_site
from emews.site.jobs import JOB_RECORD, cancel_experiment, job_status, submit_experiment
from emews.site.launchers import python_bin
from emews.site.batch_schedulers import SlurmScheduler
from emews.site.schema import SchedulerConfig
from slurm_loopback import LoopbackSlurm

# Each rank writes DIR/rank-N: "rank N of SIZE local L" (stdout lines of ranks interleave).
MPI_HELLO = ("import sys, pathlib; from mpi4py import MPI; from emews.site import local_rank; "
             "c = MPI.COMM_WORLD; pathlib.Path(sys.argv[1], f'rank-{c.rank}').write_text("
             "f'rank {c.rank} of {c.size} local {local_rank()}')")


def rank_reports(directory: Path) -> list[str]:
    return [p.read_text() for p in sorted(directory.glob("rank-*"))]


@pytest.fixture(autouse=True)
def _jobs_import_this_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs inherit the submit environment: let them import emews from this checkout."""
    repo = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", repo + (os.pathsep + old if old else ""))


def wait_for(state: Callable[[], str], want: str = "done", timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    seen = state()
    while seen != want and time.monotonic() < deadline:
        time.sleep(0.3)
        seen = state()
    return seen


def test_cluster_runs_a_venv_mpiexec_job(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    out = tmp_path / "wrap.out"
    wrap = f"{python_bin()}/mpiexec -n 4 {sys.executable} -c {shlex.quote(MPI_HELLO)} {tmp_path}"
    proc = subprocess.run(["sbatch", "--parsable", "-n", "4", "--overcommit", f"--output={out}",
                           "--wrap", wrap], capture_output=True, text=True, check=True)
    slurm = SlurmScheduler(SchedulerConfig(type="slurm"))
    job_id = slurm.parse_job_id(proc.stdout)
    assert wait_for(lambda: slurm.job_state(job_id)) == "done", slurm_cluster.log("slurmctld")
    assert rank_reports(tmp_path) == [f"rank {r} of 4 local {r}" for r in range(4)], \
        out.read_text()


def test_site_batch_script_runs_on_slurm(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    site = load_site(str(LOOPBACK_SITE), environ={})
    exp = tmp_path / "exp"
    exp.mkdir()
    workers = site.total_workers(None)
    script = exp / "job.sh"
    script.write_text(site.render_batch_script(exp, workers,
                                               [sys.executable, "-c", MPI_HELLO, str(exp)]))
    job_id = site.submit(script)
    assert wait_for(lambda: site.job_state(job_id)) == "done"
    out = (exp / f"job-{job_id}.out").read_text()
    assert rank_reports(exp) == [f"rank {r} of {workers + 1} local {r}"
                                 for r in range(workers + 1)], out


def test_submit_status_and_cancel_through_the_experiment_dir(slurm_cluster: LoopbackSlurm,
                                                             tmp_path: Path) -> None:
    site = load_site(str(LOOPBACK_SITE), environ={})
    exp = tmp_path / "exp"
    job_id = submit_experiment(site, exp, 3)
    assert job_id and json.loads((exp / JOB_RECORD).read_text())["job_id"] == job_id
    assert job_status(exp) in ("queued", "running", "done")
    assert wait_for(lambda: job_status(exp)) == "done"

    sleeper = tmp_path / "sleeper"
    sleeper.mkdir()
    script = sleeper / "job.sh"
    script.write_text(site.render_batch_script(sleeper, 1, ["sleep", "300"]))
    sleep_id = site.submit(script)
    (sleeper / JOB_RECORD).write_text(json.dumps({"job_id": sleep_id, "site": site.name,
                                                  "scheduler": "slurm"}))
    assert wait_for(lambda: job_status(sleeper), "running", 60) == "running"
    cancel_experiment(sleeper)
    assert wait_for(lambda: job_status(sleeper), "done", 60) == "done"


def _runtime_missing() -> bool:
    return importlib.util.find_spec("emews.__main__") is None or \
        importlib.util.find_spec("emews.cli") is None


@pytest.mark.skipif(_runtime_missing(), reason="emews runtime/CLI (emews.cli, emews.__main__) "
                    "not in the tree yet")
def test_emews_launch_random_on_slurm(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    proc = subprocess.run([sys.executable, "-m", "emews", "launch", "random",
                           "--site", str(LOOPBACK_SITE), "--exp-dir", str(exp)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads((exp / JOB_RECORD).read_text())
    assert record["job_id"] and record["job_id"] in proc.stdout
    assert (exp / "job.sh").is_file()
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    with sqlite3.connect(exp / "results.db") as db:
        rows = db.execute("SELECT status, rank FROM results").fetchall()
    assert len(rows) == 200 and {status for status, _ in rows} == {"ok"}
    assert {rank for _, rank in rows} == {1, 2, 3}
    status = subprocess.run([sys.executable, "-m", "emews", "status", str(exp)], capture_output=True,
                            text=True, timeout=60)
    assert status.returncode == 0 and "job: done, the run finished" in status.stdout and "200/200" in status.stdout


def test_status_tells_a_failed_job_from_a_finished_run(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """A job Slurm ends FAILED before emews' run wrote its summary is "done" to the scheduler; the
    status says that the run did not end (it said "job: done" and nothing else)."""
    from emews.reporting.status import job_state

    site = load_site(str(LOOPBACK_SITE), environ={})
    failed = tmp_path / "failed"
    failed.mkdir()
    script = failed / "job.sh"
    script.write_text(site.render_batch_script(failed, 1, ["false"]))
    job_id = site.submit(script)
    (failed / JOB_RECORD).write_text(json.dumps({"job_id": job_id, "site": site.name, "scheduler": "slurm"}))
    assert wait_for(lambda: job_status(failed), "done", 120) == "done"
    state, running = job_state(failed)
    assert not running and state.startswith("done, without a summary of its run"), state


def scontrol_job(job_id: str) -> dict[str, str]:
    """``scontrol show job`` as a dict; StdOut/StdErr/Command/WorkDir keep their spaces."""
    text = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True,
                          check=True).stdout
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key in ("StdOut", "StdErr", "StdIn", "Command", "WorkDir"):
            fields[key] = value
        elif sep:
            fields.update(item.split("=", 1) for item in line.split() if "=" in item)
    return fields


@pytest.mark.skipif(_runtime_missing(), reason="emews runtime/CLI (emews.cli, emews.__main__) "
                    "not in the tree yet")
def test_hostile_exp_dir_on_slurm_keeps_every_directive(slurm_cluster: LoopbackSlurm,
                                                        tmp_path: Path) -> None:
    """Finding 4d (and 4b's symptom): a space and a command substitution in the exp dir neither
    run nor cut the #SBATCH lines short: name, time limit, tasks and output are the site's."""
    exp = tmp_path / "my dir $(touch PWNED_dir) `touch PWNED_tick`" / "exp"
    proc = subprocess.run([sys.executable, "-m", "emews", "launch", "random", "--site",
                           str(LOOPBACK_SITE), "--exp-dir", str(exp),
                           "--set", "budget.evaluations=12"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = json.loads((exp / JOB_RECORD).read_text())["job_id"]
    job = scontrol_job(job_id)
    assert (job["JobName"], job["TimeLimit"], job["NumTasks"]) == ("emews", "00:05:00", "4")
    assert job["StdOut"] == str(exp / f"job-{job_id}.out")
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    assert (exp / f"job-{job_id}.out").is_file()
    with sqlite3.connect(exp / "results.db") as db:
        assert db.execute("SELECT count(*) FROM results WHERE status = 'ok'").fetchone() == (12,)
    assert not [p for p in tmp_path.rglob("PWNED*")], "a command in the exp dir ran"


def test_a_stopped_cluster_leaves_none_of_its_jobs_processes_running(slurm_cluster: LoopbackSlurm,
                                                                       tmp_path: Path) -> None:
    """A test that failed while its job hung (ranks spinning in MPI_Init beside a stopped one) left
    the job's processes running after its cluster stopped: orphans that took CPU from every later
    test. Stopping a cluster now ends what its jobs started, a stopped process too."""
    from slurm_loopback import missing_tools, process_alive

    assert not missing_tools()  # slurm_cluster failed otherwise; this test starts a cluster of its own
    pids = tmp_path / "pids"
    job = f"sleep 100000 & echo $! > {pids}.tmp; sh -c 'kill -STOP $$' & echo $! >> {pids}.tmp; mv {pids}.tmp {pids}; wait"
    with LoopbackSlurm() as cluster:
        subprocess.run(["sbatch", "--parsable", "-n", "1", f"--output={tmp_path / 'out'}", "--wrap", job],
                       capture_output=True, text=True, check=True, env=cluster.env)
        deadline = time.monotonic() + 120
        while not pids.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        started = [int(line) for line in pids.read_text().split()]
        assert len(started) == 2 and all(process_alive(pid) for pid in started)
    assert not [pid for pid in started if process_alive(pid)]
