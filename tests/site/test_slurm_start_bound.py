"""A batch job's start is bounded as a local one's is: ``job.sh`` runs the watch of its start beside
its launcher line, so a job whose rank 0 has not joined the lease within the start's bound
(``EMEWS_START_TIMEOUT``) is stopped, its output and ``emews.log`` say so and name the rank that
never came, it exits 1, and ``emews resume`` then runs the experiment. On the real loopback Slurm.

Found in review: a batch job's start was not watched, so a rank stopped before ``MPI_Init`` (a
node that froze as the job started) held every other rank there until the walltime."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import yaml
from site_helpers import LOOPBACK_SITE, emews, repo_env
from slurm_loopback import LoopbackSlurm
from test_slurm_job_exit import slurm_exit_code
from test_slurm_loopback import wait_for

from emews.site.jobs import job_status
from testutil import stopping_rank, stored_rows, write_workflow


def stopping_slurm_site(folder: Path, launcher: dict | None = None, scheduler: dict | None = None) -> Path:
    """The loopback site whose launcher (``mpiexec``, else ``launcher``'s, e.g. ``srun``) is a shell that
    wraps the ranks' Python: rank 2 stops itself (SIGSTOP) before it execs Python, until
    ``folder/healed`` exists (:func:`testutil.stopping_rank`); ``scheduler``: another scheduler section
    (a PBS or LSF one, whose fake client runs the job here)."""
    site = yaml.safe_load(LOOPBACK_SITE.read_text())
    site["launcher"] = {**site["launcher"], **(launcher or {})}
    site["scheduler"] = scheduler or site["scheduler"]
    wrapper = folder / "launcher"
    real = shutil.which(launcher["command"]) if launcher else str(Path(sys.executable).parent / "mpiexec")
    wrapper.write_text("\n".join(["#!/bin/bash", *stopping_rank(folder, "kill -STOP"), f'exec {real} "$@"', ""]))
    wrapper.chmod(0o755)
    site["launcher"]["command"] = str(wrapper)
    path = folder / "stopping-slurm.yaml"
    path.write_text(yaml.safe_dump(site))
    return path


def test_a_batch_job_whose_rank_never_starts_ends_at_the_bound(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """Rank 2 of 4 stops itself before it execs Python: ranks 0, 1 and 3 wait in MPI_Init. The job's
    watch stops it at the 15 s bound: its output says so once, naming rank 2, as does emews.log, and
    the job exits 1 (without the watch it ran to its walltime). Healed, emews resume runs every
    evaluation (the default bound: a start that is only slow is not stopped)."""
    (tmp_path / "model.py").write_text("def run(params):\n    return params['x']\n")
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}}, budget={"evaluations": 6})
    exp = tmp_path / "exp"
    site = stopping_slurm_site(tmp_path)
    launched = emews("launch", str(wf), "--site", str(site), "--exp-dir", str(exp), cwd=tmp_path,
                     env=repo_env(EMEWS_START_TIMEOUT="15"))
    assert launched.returncode == 0, launched.stderr
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    out = (exp / f"job-{job_id}.out").read_text()
    said = [line for line in out.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and f"emews resume {exp}" in said[0], out
    assert "did not all start within 15 s (rank 2 of 4 never reached MPI_Init" in said[0], out
    assert "rank 2 of 4 never reached MPI_Init" in (exp / "emews.log").read_text()
    assert slurm_exit_code(job_id) == "1:0", out
    assert not (exp / "summary.json").exists()  # nothing ran
    assert list(exp.glob(".start*")) == []  # the marks and the watch's word are removed

    (tmp_path / "healed").touch()
    resumed = emews("resume", str(exp), cwd=tmp_path, env=repo_env())
    assert resumed.returncode == 0, resumed.stderr
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    assert slurm_exit_code(job_id) == "0:0", (exp / f"job-{job_id}.out").read_text()
    assert len(stored_rows(exp)) == 6
    assert json.loads((exp / "summary.json").read_text())["exit_status"] == 0
    assert list(exp.glob(".start*")) == []


def test_a_batch_job_cancelled_as_it_starts_leaves_no_start_marks(
        slurm_cgroup_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """``scancel`` while the job's start is watched (rank 2 stopped before Python, ranks 0, 1 and 3
    marked and waiting in MPI_Init, the bound far off), on a cluster that kills every process of the
    job's step when its batch shell ends (proctrack/cgroup): job.sh passes the SIGTERM on and outlives
    it, waits for its launcher and the watch (which removes the ranks' marks once the launcher ended),
    then runs its end step, which says the job was stopped as it started and exits 128 + 15. All of it
    before Slurm calls the job done: looked at once, then. Was: ``.start-TOKEN`` left in the
    experiment, no line from the end step, ExitCode 0:15 (the shell died of the SIGTERM, the watch
    was killed with the step before its launcher ended). The ranks waiting in MPI_Init map their
    node's MPICH segment: the watch records it at a look (``EXP/.shm-TOKEN/NODE``) before the cancel,
    which kills them there, and the end step removes it. Was (rev84): nothing recorded it, the segment
    was left in 2 of 3 runs."""
    import subprocess

    from emews.job.start_marks import missing
    from emews.processes.mpich_shm import SHM_DIR
    from testutil import wait_until

    (tmp_path / "model.py").write_text("def run(params):\n    return params['x']\n")
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}}, budget={"evaluations": 6})
    exp = tmp_path / "exp"
    launched = emews("launch", str(wf), "--site", str(stopping_slurm_site(tmp_path)), "--exp-dir", str(exp),
                     cwd=tmp_path, env=repo_env(EMEWS_START_TIMEOUT="600"))
    assert launched.returncode == 0, launched.stderr
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    marks = lambda: next(exp.glob(".start-*"), None)  # noqa: E731
    assert wait_until(lambda: marks() is not None and missing(marks(), 4).startswith("rank 2 of 4"), timeout=240)
    recorded = lambda: [name for record in exp.glob(".shm-*/*") for name in record.read_text().split()]  # noqa: E731
    assert wait_until(recorded, timeout=120), "the watch recorded no segment of the ranks waiting in MPI_Init"
    segments = recorded()
    subprocess.run(["scancel", job_id], check=True, capture_output=True)
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    out = (exp / f"job-{job_id}.out").read_text()
    assert list(exp.glob(".start*")) == [], out
    assert [name for name in segments if (SHM_DIR / name).exists()] == [], out  # removed by the end step
    assert list(exp.glob(".shm-*")) == [], out
    said = [line for line in out.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and "the job ended before its run did (stopped by SIGTERM as it started)" in said[0], out
    assert "stopped by SIGTERM as it started" in (exp / "emews.log").read_text()
    assert slurm_exit_code(job_id) == "143:0", out


def test_a_batch_job_under_srun_whose_rank_never_starts_ends_at_the_bound(
        slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """The same under ``srun --mpi=pmi2`` as the launcher (the pip MPICH's PMI under srun): rank 2 of 4
    stops itself before Python; the watch stops the job at the 15 s bound, naming rank 2 (read from the
    rank's PMI_RANK, which srun's pmi2 sets equal to SLURM_PROCID before MPI_Init), exit 1, marks removed."""
    (tmp_path / "model.py").write_text("def run(params):\n    return params['x']\n")
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}}, budget={"evaluations": 6})
    exp = tmp_path / "exp"
    site = stopping_slurm_site(tmp_path, {"type": "srun", "command": "srun", "args": ["--overcommit", "--mpi=pmi2"]})
    launched = emews("launch", str(wf), "--site", str(site), "--exp-dir", str(exp), cwd=tmp_path,
                     env=repo_env(EMEWS_START_TIMEOUT="15"))
    assert launched.returncode == 0, launched.stderr
    assert "--mpi=pmi2" in (exp / "job.sh").read_text()  # the wrapper execs srun with its flags
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    out = (exp / f"job-{job_id}.out").read_text()
    said = [line for line in out.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and "did not all start within 15 s (rank 2 of 4 never reached MPI_Init" in said[0], out
    assert slurm_exit_code(job_id) == "1:0", out
    assert list(exp.glob(".start*")) == []


def test_a_requeued_batch_job_is_bounded_at_its_next_start(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """A launch's batch job runs (rank 0 joined its lease, the tasks wait at a gate) and is requeued
    (``scontrol requeue``, as a preemption does). While it is pending, its lease is put back as a
    first start killed whole leaves it (rank 0 SIGKILLed at the end of KillWait: it still names that
    rank 0; Slurm sends SIGCONT with its SIGTERM, so a frozen rank 0 cannot stand in for it). The
    job's second start, under the same job id and lease token, has its rank 2 stop itself before
    Python: the first start's rank 0 must not count as this start's (it is dead), so the watch stops
    the job at the 15 s bound, naming rank 2, exit 1 (counted as joined, the second start would wait
    in MPI_Init until the walltime)."""
    import subprocess

    from gated_job import write_gated

    from testutil import wait_until

    gated = write_gated(tmp_path, evaluations=4, timeout=600)
    env = repo_env(MARK_DIR=str(gated.marks), GATE_FILE=str(gated.gate), GATE_END=str(gated.end),
                   GATE_TIMEOUT="600", GATE_PACE="0", GATE_SAYS="10", EMEWS_START_TIMEOUT="15")
    exp = tmp_path / "exp"
    (tmp_path / "healed").touch()  # the first start's rank 2 starts
    launched = emews("launch", str(gated.workflow), "--site", str(stopping_slurm_site(tmp_path)), "--workers", "2",
                     "--exp-dir", str(exp), cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stderr
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    assert wait_until(lambda: len(gated.started()) == 2, timeout=240), (exp / f"job-{job_id}.out").read_text()
    joined = (exp / "lease.json").read_text()  # its one owner: the first start's rank 0
    (rank0,) = json.loads(joined)["owners"]
    (tmp_path / "healed").unlink()  # the second start's rank 2 stops itself before Python
    subprocess.run(["scontrol", "requeue", job_id], env=env, check=True, capture_output=True)
    state = lambda: subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True,  # noqa: E731
                                   text=True).stdout.strip()
    assert wait_until(lambda: state() == "PENDING", timeout=120)
    assert wait_until(lambda: not Path(f"/proc/{rank0['pid']}").exists(), timeout=120)  # the first start is over
    (exp / "lease.json").write_text(joined)  # as rank 0 SIGKILLed left it
    subprocess.run(["scontrol", "update", f"jobid={job_id}", "starttime=now"], env=env, check=True, capture_output=True)
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    out = (exp / f"job-{job_id}.out").read_text()
    assert "did not all start within 15 s (rank 2 of 3 never reached MPI_Init" in out, out
    assert slurm_exit_code(job_id) == "1:0", out
    assert list(exp.glob(".start*")) == []
