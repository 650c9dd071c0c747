"""An attached pool's batch job is watched as a launch's is: ``job.sh`` runs the watch of its start
beside its launcher line, and a pool whose rank 0 has not registered in the store within the start's
bound (``EMEWS_START_TIMEOUT``) is stopped: its output and the pool's ``emews.log`` say so once,
naming the rank that never came, the job exits 1, and the experiment goes on without it. A pool that
starts is seen registered (its row in the store, by its job id) and runs. Real loopback Slurm and
PostgreSQL.

Found in review: a batch pool's start was not watched (``emews attach EXP --site <slurm>``), so a
pool rank stopped before ``MPI_Init`` held the pool's other ranks there until the walltime."""

from __future__ import annotations

import json
from pathlib import Path

from emews.processes.tree import alive
from emews.site.jobs import JOB_RECORD
from slurm_loopback import LoopbackSlurm
from slurm_pools import PgServer, gated_launch, job_state, jobs_import_this_tree, postgres  # noqa: F401
from pooled import gated_workflow, held_by, seen, wait_for_queued
from test_slurm_job_exit import slurm_exit_code
from test_slurm_loopback import wait_for
from test_slurm_start_bound import stopping_slurm_site
from testutil import wait_until


def watches(pool_dir: Path) -> list[int]:
    """The pids of the watches of the start of the pool at ``pool_dir`` (``job.sh``'s, on this host)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--watch-start" in argv and str(pool_dir).encode() in argv and alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def test_a_batch_pool_whose_rank_never_starts_ends_at_the_bound(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    """Pool 1 on Slurm: its rank 2 (of 3) stops itself before it execs Python, so its ranks 0 and 1
    wait in MPI_Init and rank 0 never registers. Its job's watch stops it at the 15 s bound: one line,
    naming rank 2, in its output and the pool's emews.log, exit 1, its marks removed; without the watch
    it ran to its walltime. Healed, pool 2 on the same site registers, its watch sees it and ends while
    the pool runs (default bound), and it runs tasks; the launch ends with every evaluation stored."""
    wf = gated_workflow(tmp_path, postgres.url(), 4, store={"lease": 5})
    exp = tmp_path / "exp"
    site = stopping_slurm_site(tmp_path)
    with gated_launch(tmp_path, wf, workers=1) as cmd:
        wait_for_queued(exp)
        cmd.env["EMEWS_START_TIMEOUT"] = "15"  # the attach's: sbatch passes it on to the job
        attached = cmd("attach", "exp", "--site", str(site), "--workers", "2", timeout=120)
        del cmd.env["EMEWS_START_TIMEOUT"]
        assert attached.returncode == 0, attached.stderr
        stuck = exp / "pools" / "pool-001"
        job_id = json.loads((stuck / JOB_RECORD).read_text())["job_id"]
        assert wait_for(lambda: job_state(job_id), "done", 240) == "done"
        out = (stuck / f"job-{job_id}.out").read_text()
        said = [line for line in out.splitlines() if line.startswith("emews")]
        assert len(said) == 1 and f"emews attach {exp}" in said[0], out
        assert ("the pool's job ended before it ran (its ranks did not all start within 15 s "
                "(rank 2 of 3 never reached MPI_Init") in said[0], out
        assert "rank 2 of 3 never reached MPI_Init" in (stuck / "emews.log").read_text()
        assert slurm_exit_code(job_id) == "1:0", out
        assert list(stuck.glob(".start*")) == []  # the marks and the watch's word are removed
        assert seen(exp, "SELECT id FROM pools ORDER BY id") == [(1,)]  # it never registered

        (tmp_path / "healed").touch()
        attached = cmd("attach", "exp", "--site", str(site), "--workers", "2", timeout=120)
        assert attached.returncode == 0, attached.stderr
        started = exp / "pools" / "pool-002"
        second = json.loads((started / JOB_RECORD).read_text())["job_id"]
        assert wait_until(lambda: held_by(exp, 2), 240), seen(exp, "SELECT id, state, pool FROM tasks ORDER BY id")
        # its watch saw the pool registered and ended, the pool running (its tasks held at the gate)
        assert wait_until(lambda: not watches(started), 120), watches(started)
        assert job_state(second) == "running" and held_by(exp, 2)
        assert not (started / ".start").exists()
        (tmp_path / "open").touch()  # the job ends once the optimizer is done (before the launch's processes are killed)
        assert wait_for(lambda: job_state(second), "done", 240) == "done"
        assert slurm_exit_code(second) == "0:0", (started / f"job-{second}.out").read_text()
    assert [i for (i,) in seen(exp, "SELECT id FROM results ORDER BY id")] == list(range(4))


def test_a_requeued_batch_pool_is_bounded_at_its_next_start(
        slurm_cluster: LoopbackSlurm, postgres: PgServer, tmp_path: Path) -> None:
    """Pool 1 on Slurm starts, registers (its watch ends) and holds tasks at the gate; then its rank 2
    is made to stop itself again and its job is requeued (``scontrol requeue``, as a preemption does).
    The job's second start, under the same job id, is watched as its first was: the row the first start
    registered is not taken for this start's (only a pool registered since this start's launcher
    started counts), so the job is stopped at the 15 s bound with the pool-not-started line, exit 1.
    Was: the watch found the first start's row by the job id and ended at once, and the second start
    waited in MPI_Init until the walltime."""
    from test_slurm_training_stops import _requeue_now

    wf = gated_workflow(tmp_path, postgres.url(), 4, store={"lease": 5})
    exp = tmp_path / "exp"
    site = stopping_slurm_site(tmp_path)
    (tmp_path / "healed").touch()  # the first start's rank 2 starts
    with gated_launch(tmp_path, wf, workers=1) as cmd:
        wait_for_queued(exp)
        cmd.env["EMEWS_START_TIMEOUT"] = "15"  # the attach's: sbatch passes it on to the job, at each start
        attached = cmd("attach", "exp", "--site", str(site), "--workers", "2", timeout=120)
        del cmd.env["EMEWS_START_TIMEOUT"]
        assert attached.returncode == 0, attached.stderr
        pool = exp / "pools" / "pool-001"
        job_id = json.loads((pool / JOB_RECORD).read_text())["job_id"]
        assert wait_until(lambda: held_by(exp, 2), 240), seen(exp, "SELECT id, state, pool FROM tasks ORDER BY id")
        assert wait_until(lambda: not watches(pool), 120), watches(pool)  # its first start ended

        (tmp_path / "healed").unlink()  # the second start's rank 2 stops itself before Python
        _requeue_now(job_id, cmd.env)
        assert wait_for(lambda: job_state(job_id), "done", 240) == "done"
        out = (pool / f"job-{job_id}.out").read_text()
        assert ("the pool's job ended before it ran (its ranks did not all start within 15 s "
                "(rank 2 of 3 never reached MPI_Init") in out, out
        assert slurm_exit_code(job_id) == "1:0", out
        assert list(pool.glob(".start*")) == []
        assert seen(exp, "SELECT id FROM pools ORDER BY id") == [(1,), (2,)]  # its second start never registered
    assert [i for (i,) in seen(exp, "SELECT id FROM results ORDER BY id")] == list(range(4))
