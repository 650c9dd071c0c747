"""``emews resume`` of a finished batch experiment submits nothing, on the real loopback Slurm: one
line says there is nothing to resume, the job record and every other file stay as they were."""

from __future__ import annotations

from pathlib import Path

from site_helpers import emews, launch_rugged, repo_env
from slurm_loopback import LoopbackSlurm

from emews.site import load_site
from emews.site.jobs import JOB_RECORD, job_status


def files_of(exp: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``exp``: its size and modification time (ns); not SQLite's WAL index."""
    return {
        str(p.relative_to(exp)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in exp.rglob("*")
        if p.is_file() and not p.name.endswith("-shm")
    }


def test_resume_of_a_finished_batch_experiment_submits_nothing(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    from test_slurm_loopback import wait_for

    from testutil import wait_until

    env = repo_env()
    exp = launch_rugged(tmp_path, env, mode="ok", evaluations=4, isolation="inline")
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    assert wait_until(lambda: (exp / "summary.json").exists() and not (exp / "lease.json").exists(), timeout=60)
    before = files_of(exp)
    assert JOB_RECORD in before

    resumed = emews("resume", str(exp), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "submitted job" not in resumed.stdout
    assert resumed.stderr.splitlines() == [
        f"emews: nothing to resume: {exp} has the 4 evaluations of its budget (budget.evaluations: 4); "
        "raise it with --set budget.evaluations=N to go on"
    ]
    assert files_of(exp) == before  # the job record too: no job was submitted


def test_resume_asks_for_another_allocation_with_set(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """A job stopped at its walltime is resumed in a new allocation, often a longer one or in another
    queue: ``emews resume EXP --set scheduler.walltime=...`` was refused ("resume can only change the
    budget and the walltime settings", allowed: walltime.limit, ...) while ``EMEWS_WALLTIME`` did it,
    and ``--set walltime.limit`` left ``#SBATCH --time`` as it was. The scheduler's walltime, queue
    and account (what ``EMEWS_WALLTIME``/``QUEUE``/``ACCOUNT`` set) apply to the resumed job; other
    site keys stay refused, naming the allowed ones."""
    import subprocess

    from test_slurm_loopback import wait_for

    from testutil import wait_until

    env = repo_env()
    exp = launch_rugged(tmp_path, env, mode="ok", evaluations=2, isolation="inline")
    assert "#SBATCH --time=00:05:00" in (exp / "job.sh").read_text().splitlines()
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    assert wait_until(lambda: (exp / "summary.json").exists() and not (exp / "lease.json").exists(), timeout=60)

    refused = emews("resume", str(exp), "--set", "launcher.workers_per_node=1", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "scheduler.walltime=HH:MM:SS" in refused.stderr, refused.stderr

    resumed = emews(
        "resume",
        str(exp),
        "--set",
        "budget.evaluations=4",
        "--set",
        "scheduler.walltime=00:07:00",
        "--set",
        "scheduler.queue=debug",
        cwd=tmp_path,
        env=env,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "#SBATCH --time=00:07:00" in (exp / "job.sh").read_text().splitlines()
    job_id = resumed.stdout.split("submitted job ")[1].split()[0]
    shown = subprocess.run(["scontrol", "show", "job", job_id], env=slurm_cluster.env, capture_output=True, text=True)
    assert "TimeLimit=00:07:00" in shown.stdout, shown.stdout + shown.stderr
    # the job reads its site back (the walltime margin where the batch system gives no end time)
    kept = load_site(str(exp / "site.yaml"), environ={})
    assert (kept.config.scheduler.walltime, kept.config.scheduler.queue, kept.name) == (
        "00:07:00",
        "debug",
        "slurm-loopback",
    )
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"


def test_resume_with_emews_walltime_writes_it_into_the_site_the_job_reads(
    slurm_cluster: LoopbackSlurm, tmp_path: Path
) -> None:
    """``EMEWS_WALLTIME=... emews resume EXP`` submitted the longer allocation but left EXP/site.yaml at
    the old walltime (only ``--set scheduler.walltime`` updated it), which the job reads back for its
    margin where the batch system gives no end time: the two routes now agree."""
    from test_slurm_loopback import wait_for

    from testutil import wait_until

    env = repo_env()
    exp = launch_rugged(tmp_path, env, mode="ok", evaluations=2, isolation="inline")
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    assert wait_until(lambda: (exp / "summary.json").exists() and not (exp / "lease.json").exists(), timeout=60)

    longer = {**env, "EMEWS_WALLTIME": "00:08:00"}
    resumed = emews("resume", str(exp), "--set", "budget.evaluations=4", cwd=tmp_path, env=longer)
    assert resumed.returncode == 0, resumed.stderr
    assert "#SBATCH --time=00:08:00" in (exp / "job.sh").read_text().splitlines()
    assert load_site(str(exp / "site.yaml"), environ={}).config.scheduler.walltime == "00:08:00"
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
