"""A loopback Slurm's stop kills what it started and outlived its daemons (a job's orphan), and
nothing else: ``SLURM_CONF`` is set session-wide by the ``slurm_cluster`` fixture, so a process that
another test of the session started carries this cluster's ``SLURM_CONF`` too, and must live on."""

from __future__ import annotations

import subprocess
from pathlib import Path

from slurm_loopback import LoopbackSlurm, process_alive

from testutil import wait_until

#: a batch job that leaves an orphan: ``sleep`` started by a shell that exits at once (its parent is
#: then init, out of the job's process tree: proctrack/linuxproc does not kill it with the job)
ORPHANING = "#!/bin/sh\nsh -c 'sleep 600 & echo $! > {pid}.tmp; mv {pid}.tmp {pid}'\n"


def queued(cluster: LoopbackSlurm, job: str) -> bool:
    """Whether ``job`` is still pending or running."""
    listed = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=cluster.env, capture_output=True, text=True)
    return listed.stdout.strip() in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING")


def test_stop_kills_its_jobs_orphan_and_spares_another_process_with_its_slurm_conf(tmp_path: Path) -> None:
    script, pid_file = tmp_path / "job.sh", tmp_path / "orphan.pid"
    script.write_text(ORPHANING.format(pid=pid_file))
    cluster = LoopbackSlurm()
    bystander = None
    try:
        cluster.start()
        # another test's process in a session whose SLURM_CONF names this cluster
        bystander = subprocess.Popen(["sleep", "600"], env=cluster.env)
        job = subprocess.run(
            ["sbatch", "--parsable", f"--output={tmp_path / 'job.out'}", str(script)],
            env=cluster.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert int(job) >= cluster.first_job_id
        assert wait_until(pid_file.exists, 120), cluster.log("slurmctld")
        orphan = int(pid_file.read_text())
        assert wait_until(lambda: not queued(cluster, job), 120), cluster.log("slurmctld")
        assert process_alive(orphan)  # the job ended, its orphan lives on
        cluster.stop()
        assert wait_until(lambda: not process_alive(orphan), 30), "the job's orphan outlived the cluster"
        assert process_alive(bystander.pid), "the cluster's stop killed a process it did not start"
    finally:
        cluster.stop()
        cluster.cleanup()
        if bystander is not None:
            bystander.kill()
            bystander.wait()
        with_orphan = pid_file.read_text() if pid_file.exists() else ""
        if with_orphan and process_alive(int(with_orphan)):
            subprocess.run(["kill", "-9", with_orphan], check=False)
