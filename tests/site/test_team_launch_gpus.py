"""``ctx.launch`` on the real loopback Slurm with 4 fake GPUs (gres) and srun binding tasks to cores
(task/affinity), on a site whose launcher binds the GPUs (perlmutter's ``srun --gpus-per-task=1
--gpu-bind=closest``) and on one where emews does (frontier's ``node.gpu_ids``): each rank of the
program a multi-rank task launches sees the GPUs of one of its task's slots, not every GPU of the
node, and runs on the cores Slurm gave the team member it stands for."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from slurm_loopback import LoopbackSlurm, missing_tools
from test_slurm_loopback import wait_for

from emews.site.jobs import job_status

REPO = Path(__file__).resolve().parents[2]

SITE = {
    "description": "loopback Slurm with 4 fake GPUs, bound by srun as on perlmutter",
    "scheduler": {
        "type": "slurm",
        "queue": "debug",
        "walltime": "00:05:00",
        "nodes": 1,
        "directives": ["--overcommit"],
    },
    # 3 ranks (the optimizer and 2 workers): the loopback node's 2 CPUs take no more with GPUs asked for
    "launcher": {"type": "srun", "workers_per_node": 2, "args": ["--overcommit", "--mpi=pmi2"]},
    "node": {"cores": 2, "gpus": 4, "gpus_per_worker": 1, "gpu_binding": "launcher", "gpu_env": "CUDA_VISIBLE_DEVICES"},
}

OBJECTIVE = """
import json, os, sys
GPU_ENV = {gpu_env!r}
PROGRAM = ("import os; os.write(1, (os.environ['SLURM_LOCALID'] + ' ' + os.environ.get(%r, '-') + ' '"
           " + ','.join(map(str, sorted(os.sched_getaffinity(0)))) + chr(10)).encode())" % GPU_ENV)

def run(params, ctx):
    done = ctx.launch([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120)
    if done is None:
        return {{"value": -1.0}}
    return {{"value": float(done.returncode), "lines": sorted(done.stdout.splitlines()), "stderr": done.stderr[-500:],
            "leader": os.environ.get(GPU_ENV), "leader_cores": sorted(os.sched_getaffinity(0))}}
"""

#: srun binds world rank 0 to core 0, rank 1 to core 1, rank 2 to core 0 (the loopback node has 2:
#: a map stands for perlmutter's --cpus-per-task=32 --cpu-bind=cores and frontier's -c7 over 64), so
#: the team (ranks 1 and 2) has cores 1 and 0, and a step of 2 ranks with the same map would run its
#: rank 0 on core 0 and its rank 1 on core 1
BOUND = {
    "scheduler": {**SITE["scheduler"], "directives": ["--overcommit", "--exclusive"]},
    "launcher": {**SITE["launcher"], "args": ["--overcommit", "--mpi=pmi2", "--cpu-bind=map_cpu:0,1,0"]},
}
PERLMUTTER_STYLE = {**SITE, **BOUND}
FRONTIER_STYLE = {
    **SITE,
    **BOUND,
    "node": {
        "cores": 2,
        "gpus": 4,
        "gpu_ids": ["2", "3", "0", "1"],
        "gpus_per_worker": 1,
        "gpu_binding": "env",
        "gpu_env": "ROCR_VISIBLE_DEVICES",
    },
}


@pytest.fixture(scope="module")
def gpu_slurm() -> Iterator[LoopbackSlurm]:
    if missing_tools():
        if os.environ.get("EMEWS_SKIP_SLURM") == "1":
            pytest.skip("Slurm is not installed (skipped: EMEWS_SKIP_SLURM=1)")
        pytest.fail(f"the Slurm test cluster needs {', '.join(missing_tools())}")
    with LoopbackSlurm(gpus=4, bind_cores=True) as cluster:
        yield cluster


def run_team_task(cluster: LoopbackSlurm, tmp_path: Path, site: dict, env: dict[str, str] | None = None) -> list[dict]:
    """Launch a 2-task sweep of 2-rank tasks that each ctx.launch a 2-rank program on ``site``, wait
    for the job, and return each task's metrics (both tasks must have ended ok)."""
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    (tmp_path / "obj.py").write_text(OBJECTIVE.format(gpu_env=site["node"]["gpu_env"]))
    (tmp_path / "wf.yaml").write_text(
        yaml.safe_dump(
            {
                "optimizer": {"name": "sweep"},
                "objective": {"module": "obj.py", "function": "run", "metric": "value"},
                "space": {"x": {"type": "categorical", "values": [1, 2]}},
                "budget": {"evaluations": 2},
                "task": {"timeout": 120, "ranks": 2, "isolation": "process"},
            }
        )
    )
    env = {
        **cluster.env,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    exp = tmp_path / "exp"
    proc = subprocess.run(
        [sys.executable, "-m", "emews", "launch", "wf.yaml", "--site", "./site.yaml", "--exp-dir", str(exp)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
    output = "".join(p.read_text() for p in exp.glob("job-*.out"))
    with sqlite3.connect(exp / "results.db") as db:
        rows = db.execute("SELECT status, objective, metrics FROM results ORDER BY id").fetchall()
    assert [(status, objective) for status, objective, _ in rows] == [("ok", 0.0), ("ok", 0.0)], output
    return [json.loads(metrics) for _, _, metrics in rows]


def test_each_rank_ctx_launch_starts_sees_only_its_slots_gpu(gpu_slurm: LoopbackSlurm, tmp_path: Path) -> None:
    """Found here: the team (world ranks 1 and 2, slots 1 and 2) launched a 2-rank program with
    ``srun --overlap ... --gpus-per-task=1 --gpu-bind=closest`` and both of its ranks saw
    CUDA_VISIBLE_DEVICES=0,1,2,3 (while team rank 0 itself kept GPU 1)."""
    for seen in run_team_task(gpu_slurm, tmp_path, SITE):
        assert seen["leader"] == "1", seen  # team rank 0 is world rank 1: slot 1's GPU
        assert [line.rsplit(" ", 1)[0] for line in seen["lines"]] == ["0 1", "1 2"], seen  # member i's GPU


@pytest.mark.parametrize("site", [PERLMUTTER_STYLE, FRONTIER_STYLE], ids=["perlmutter-style", "frontier-style"])
def test_each_rank_ctx_launch_starts_runs_on_its_members_cores(
    gpu_slurm: LoopbackSlurm, tmp_path: Path, site: dict
) -> None:
    """Found here: srun bound the team's members (world ranks 1 and 2) to cores 1 and 0, and the
    ranks their ctx.launch started took their members' GPUs but kept the cores of their own index in
    the step (0 and 1): launched rank 0 ran beside member 1's GPU on member 0's core. Each launched
    rank now runs on the cores of the member whose GPUs it takes (the team's affinities, gathered)."""
    gpus = site["node"].get("gpu_ids", ["0", "1", "2", "3"])
    for seen in run_team_task(gpu_slurm, tmp_path, site):
        assert (seen["leader"], seen["leader_cores"]) == (gpus[1], [1]), seen  # slot 1's GPU, rank 1's core
        assert seen["lines"] == [f"0 {gpus[1]} 1", f"1 {gpus[2]} 0"], seen  # member i's GPU and core


def test_a_stale_hydra_local_rank_in_the_submitting_environment_binds_nothing(
    gpu_slurm: LoopbackSlurm, tmp_path: Path
) -> None:
    """Found here: ``emews launch`` run where MPICH's mpiexec had set MPI_LOCALRANKID (a shell or a
    task started by it) submitted a job whose srun ranks all inherited it (sbatch exports the
    submitting environment); the ranks read it before srun's own SLURM_LOCALID, so every worker
    bound the GPU of slot 3 and the ranks ctx.launch started all took member 1's. The workers now
    take their node-local rank from MPI itself, and ctx.launch leaves every launcher's local-rank
    variable out of the program's environment, so each launched rank reads its launcher's own."""
    gpus = FRONTIER_STYLE["node"]["gpu_ids"]
    for seen in run_team_task(gpu_slurm, tmp_path, FRONTIER_STYLE, {"MPI_LOCALRANKID": "3", "MPI_LOCALNRANKS": "4"}):
        assert seen["leader"] == gpus[1], seen  # world rank 1: slot 1's GPU, not slot 3's
        assert seen["lines"] == [f"0 {gpus[1]} 1", f"1 {gpus[2]} 0"], seen
