"""The batch job ends with the run's exit status, as ``emews launch`` does on the local site.

Found in review: a run that stopped itself at the walltime margin recorded exit status 3 in
``summary.json``, but its Slurm job ended COMPLETED with ``ExitCode=0:0`` (every rank exits 0 to
the launcher, so ``srun`` and ``job.sh`` did too): the batch system, ``sacct`` and a dependent job
(``--dependency=afternotok``, the usual way to chain a resume) saw a finished run. On the real
loopback Slurm; synchronized on rank 0's log line at the pause time and the objective's events.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml
from site_helpers import LOOPBACK_SITE, RUGGED, emews, repo_env
from slurm_loopback import LoopbackSlurm
from test_slurm_loopback import wait_for

from emews.site.jobs import job_status


def slurm_exit_code(job_id: str) -> str:
    """``scontrol``'s ``ExitCode`` of a job (``STATUS:SIGNAL``)."""
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True)
    match = re.search(r"\bExitCode=(\d+:\d+)", shown.stdout)
    assert match, shown.stdout
    return match.group(1)


def rugged_workflow(folder: Path, mode: str, evaluations: int, **sections: object) -> Path:
    """The rugged objective (``mode``: ``wait`` for its gate, ``x`` at once) searched at random."""
    from testutil import write_workflow

    return write_workflow(
        folder, optimizer={"name": "random", "options": {"seed": 2}}, objective={"module": str(RUGGED)},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}, "mode": {"type": "constant", "value": mode}},
        budget={"evaluations": evaluations}, task={}, **sections)


def test_a_job_stopped_at_the_walltime_margin_exits_3(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    from testutil import wait_until, walltime_pause_time

    events, gate = tmp_path / "events", tmp_path / "gate"
    events.mkdir()
    env = repo_env(RUGGED_EVENTS=str(events), RUGGED_GATE=str(gate))
    wf = rugged_workflow(tmp_path, "wait", 8, walltime={"limit": "00:00:30", "margin": 15})
    exp = tmp_path / "exp"
    launched = emews("launch", str(wf), "--site", str(LOOPBACK_SITE), "--exp-dir", str(exp), cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stderr
    assert walltime_pause_time(exp) is not None
    gate.touch()
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    assert wait_until(lambda: (exp / "summary.json").exists(), timeout=60)
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["interrupted"] == "stopped at the walltime margin" and summary["exit_status"] == 3
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    assert slurm_exit_code(job_id) == "3:0", (exp / f"job-{job_id}.out").read_text()


def test_a_job_whose_ranks_never_ran_the_experiment_fails(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """The launcher line fails before any run (here: every rank a world of one, a launcher without
    the MPI library's PMI): no summary, and the job's status is the launcher's, not 0. Found in
    review too: each of the 4 processes said "emews run: needs at least 2 MPI ranks", which reads as
    if too few were started; one line now says the launcher and the MPI library did not connect."""
    site = tmp_path / "site.yaml"
    site.write_text(
        yaml.safe_dump(
            {**yaml.safe_load(LOOPBACK_SITE.read_text()), "launcher": {"type": "srun", "workers_per_node": 3}}
        )
    )
    wf = rugged_workflow(tmp_path, "x", 4)
    exp = tmp_path / "exp"
    env = repo_env(SLURM_MPI_TYPE="none")
    launched = emews("launch", str(wf), "--site", str(site), "--exp-dir", str(exp), cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stderr
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    assert not (exp / "summary.json").exists()
    out = (exp / f"job-{job_id}.out").read_text()
    assert slurm_exit_code(job_id) != "0:0", out
    # said once, and why: not "needs at least 2 MPI ranks" from each of the 4 processes srun started
    said = [line for line in out.splitlines() if line.startswith("emews run:")]
    assert len(said) == 1 and "srun started 4 processes" in said[0] and "--mpi=" in said[0], out


def test_status_of_a_job_cancelled_while_queued_says_it_never_ran(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """``emews status`` of a job cancelled while it was queued said "it ended before the run did (see its
    output file in the experiment)", but a job that never started has no output file; a job that ran
    and failed is pointed to its own file."""
    from emews.reporting.status import job_state
    from emews.site import load_site
    from emews.site.jobs import JOB_RECORD, cancel_experiment

    site = load_site(str(LOOPBACK_SITE), ["scheduler.directives=[--overcommit, --hold]"], environ={})
    held = tmp_path / "held"
    held.mkdir()
    (held / "job.sh").write_text(site.render_batch_script(held, 1, ["false"]))
    job_id = site.submit(held / "job.sh")
    (held / JOB_RECORD).write_text(json.dumps({"job_id": job_id, "site": site.name, "scheduler": "slurm"}))
    assert job_state(held) == ("queued", True)
    cancel_experiment(held)
    assert wait_for(lambda: job_status(held), "done", 120) == "done"
    state, running = job_state(held)
    assert not running and "never started" in state and "see" not in state, state

    site = load_site(str(LOOPBACK_SITE), environ={})
    failed = tmp_path / "failed"
    failed.mkdir()
    (failed / "job.sh").write_text(site.render_batch_script(failed, 1, ["false"]))
    job_id = site.submit(failed / "job.sh")
    (failed / JOB_RECORD).write_text(json.dumps({"job_id": job_id, "site": site.name, "scheduler": "slurm"}))
    assert wait_for(lambda: job_status(failed), "done", 120) == "done"
    state, running = job_state(failed)
    assert not running and state.startswith("done, without a summary of its run"), state
    assert f"see {failed / f'job-{job_id}.out'}" in state, state


def test_cancel_of_a_job_slurm_does_not_know_says_it_was_not_found(slurm_cluster: LoopbackSlurm,
                                                                   tmp_path: Path) -> None:
    """emews cancel of a job id Slurm does not know (forgotten, or never submitted to this cluster:
    job.json copied from another one) said 'job N of exp had ended' (and scancel of it exits 0
    saying nothing); it now says Slurm does not know it. A queued job is still cancelled."""
    from emews.site import load_site
    from emews.site.jobs import JOB_RECORD

    site = load_site(str(LOOPBACK_SITE), ["scheduler.directives=[--overcommit, --hold]"], environ={})
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "workflow.yaml").write_text(rugged_workflow(tmp_path, "x", 2).read_text())
    (exp / "site.yaml").write_text(LOOPBACK_SITE.read_text())
    (exp / "job.sh").write_text(site.render_batch_script(exp, 1, ["false"]))
    held = site.submit(exp / "job.sh")
    (exp / JOB_RECORD).write_text(json.dumps({"job_id": held, "site": site.name, "scheduler": "slurm"}))
    cancelled = emews("cancel", str(exp), cwd=tmp_path, env=repo_env())
    assert cancelled.returncode == 0 and cancelled.stdout.splitlines() == [f"cancelled job {held} of exp"], cancelled
    assert wait_for(lambda: job_status(exp), "done", 120) == "done"
    unknown = str(int(held) + 100000)
    (exp / JOB_RECORD).write_text(json.dumps({"job_id": unknown, "site": site.name, "scheduler": "slurm"}))
    proc = emews("cancel", str(exp), cwd=tmp_path, env=repo_env())
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.splitlines() == [
        f"job {unknown} of exp: not found by slurm (it ended and was forgotten, or was never submitted to this "
        "cluster); nothing cancelled"
    ], proc.stdout
    assert job_status(exp) == "done"  # a job it does not know is over, for the lease and status


def test_status_of_a_job_whose_run_had_no_room_for_its_summary(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """A batch job whose run hit a full disk wrote no summary.json, only its exit record (room taken
    at the run's start); emews status said 'done, without a summary of its run: it ended before the
    run did', as of a killed job. It now says how the run ended, from that record."""
    from emews.config.exit_record import record_exit, reserve_exit_record
    from emews.reporting.status import job_state
    from emews.site import load_site
    from emews.site.jobs import JOB_RECORD

    site = load_site(str(LOOPBACK_SITE), environ={})
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "job.sh").write_text(site.render_batch_script(exp, 1, ["true"]))
    job_id = site.submit(exp / "job.sh")
    (exp / JOB_RECORD).write_text(json.dumps({"job_id": job_id, "site": site.name, "scheduler": "slurm"}))
    reserve_exit_record(exp)  # what the job's run does at its start, and at its end on a full disk:
    record_exit(exp, 1)
    assert wait_for(lambda: job_status(exp), "done", 120) == "done"
    state, running = job_state(exp)
    assert not running and state == (
        f"done, the run ended with exit status 1 and could not write its summary (see {exp / 'emews.log'})"
    ), state


def test_resume_takes_the_lease_of_a_job_slurm_has_forgotten(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """A job killed on its node leaves its lease; once slurmctld has forgotten the job (MinJobAge, 300 s
    by default) and no accounting answers sacct, its state was "unknown" and emews resume said "the
    experiment is in use by ... batch job N" for good."""
    wf = rugged_workflow(tmp_path, "x", 4)
    exp = tmp_path / "exp"
    env = repo_env()
    launched = emews("launch", str(wf), "--site", str(LOOPBACK_SITE), "--exp-dir", str(exp), cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stderr
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    forgotten = "999999"  # a job id this cluster never gave: as slurmctld answers for a forgotten job
    record = json.loads((exp / "job.json").read_text())
    (exp / "job.json").write_text(json.dumps({**record, "job_id": forgotten}))
    (exp / "lease.json").write_text(
        json.dumps(
            {
                "token": "killed",
                "owners": [{"host": "nid001", "pid": 4242, "started": 1.0}],
                "job_id": forgotten,
                "command": "emews launch",
                "since": 1.0,
            }
        )
    )
    assert job_status(exp) == "done"
    resumed = emews("resume", str(exp), "--set", "budget.evaluations=6", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    assert json.loads((exp / "summary.json").read_text())["completed"] == 6
