"""A batch job whose rank is killed leaves no MPICH shared-memory segment on its node (rev75), on the
real loopback Slurm with ``srun --mpi=pmi2`` as the launcher (MPICH's segment is then named after the
PMI job ``JOBID.STEP``: a later job of the same id hung on a stale one in ``MPI_Init``).

The ranks record their node's segments after ``MPI_Init``; job.sh's end step (``emews run --job-exit``,
once the launcher line ended) removes those no live process maps. A job cancelled (``scancel``: SIGTERM
to every process of the job; job.sh's shell passes it on and runs its end step once the launcher ended)
stops its ranks cleanly: MPICH removes the segment in ``MPI_Finalize``, the end step the records. A job
killed whole leaves both to the experiment's next job. Each test looks only at the segments its own
job's rank mapped."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml
from site_helpers import LOOPBACK_SITE, emews, repo_env
from slurm_loopback import LoopbackSlurm, kill_job_processes
from test_slurm_loopback import wait_for

from emews.processes import mpich_shm
from emews.site.jobs import job_status
from testutil import segments_left, shm_mapper_workflow, wait_until

#: the loopback site with srun as its launcher (pmi2: the mpich wheel's MPI under srun); a task that
#: dies ends the step (without it srun waits for the other tasks, and rank 0 for the dead worker)
SRUN_SITE = {
    **yaml.safe_load(LOOPBACK_SITE.read_text()),
    "launcher": {"type": "srun", "workers_per_node": 3, "args": ["--overcommit", "--mpi=pmi2", "--kill-on-bad-exit=1"]},
}


def submit(tmp_path: Path, then: str) -> tuple[Path, Path, dict[str, str]]:
    """Launch one ``shm_mapper`` evaluation (``then``) on the srun site; the experiment, the file of
    the segments its worker maps, and the environment."""
    site = tmp_path / "srun-site.yaml"
    site.write_text(yaml.safe_dump(SRUN_SITE))
    wf, mapped = shm_mapper_workflow(tmp_path, then)
    exp, env = tmp_path / "exp", repo_env()
    launched = emews("launch", str(wf), "--site", str(site), "--exp-dir", str(exp), cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stderr
    return exp, mapped, env


def job_output(exp: Path) -> str:
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    out = exp / f"job-{job_id}.out"
    return out.read_text() if out.exists() else ""


def test_a_batch_job_whose_rank_is_killed_leaves_no_segment(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """The worker rank SIGKILLs itself in its task; srun ends the step (rank 0 stops on its SIGTERM,
    then the step's last tasks are killed), and once job.sh's end step ran the segment its ranks
    mapped is gone, their records with it."""
    exp, mapped, _ = submit(tmp_path, "kill")
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    assert re.search(r"task [1-3]: Killed", job_output(exp)), job_output(exp)  # the worker's own death
    assert segments_left(mapped) == [], job_output(exp)
    assert list(exp.glob(".shm-*")) == []


def test_a_cancelled_batch_job_leaves_no_segment(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """scancel while the task runs: the ranks stop on SIGTERM and finalize MPI, which removes the segment."""
    exp, mapped, env = submit(tmp_path, "wait")
    assert wait_until(mapped.exists, timeout=240), job_output(exp)
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    subprocess.run(["scancel", job_id], env=env, check=True, capture_output=True)
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    assert wait_until(lambda: segments_left(mapped) == [], timeout=60), job_output(exp)
    assert list(exp.glob(".shm-*")) == [], job_output(exp)


def test_a_batch_job_killed_whole_leaves_its_segment_to_the_next_job_of_its_experiment(
    slurm_cluster: LoopbackSlurm, tmp_path: Path
) -> None:
    """Every process of the job SIGKILLed at once (a scancel past Slurm's KillWait, the OOM killer): no
    end step runs, and the segment its ranks mapped stays with their records (EXP/.shm-TOKEN). The
    experiment's next batch job (``emews resume``) removes what those records name on its node that no
    process maps, and the records (without it both stayed for good: only a local launch looked)."""
    exp, mapped, env = submit(tmp_path, "wait")
    assert wait_until(mapped.exists, timeout=240), job_output(exp)
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    assert kill_job_processes(job_id)
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    left, records = segments_left(mapped), list(exp.glob(".shm-*"))
    try:
        assert left and len(records) == 1, job_output(exp)  # what the next job is for
        (tmp_path / "gate").touch()  # the task runs again and returns
        resumed = emews("resume", str(exp), cwd=tmp_path, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert wait_for(lambda: job_status(exp), "done", 240) == "done"
        assert [name for name in left if (mpich_shm.SHM_DIR / name).exists()] == [], job_output(exp)
        assert list(exp.glob(".shm-*")) == [], job_output(exp)
    finally:
        mpich_shm.remove_unmapped(left)
