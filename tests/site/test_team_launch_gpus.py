"""``ctx.launch`` on the real loopback Slurm with 4 fake GPUs (gres), on a site whose launcher binds
them (perlmutter's ``srun --gpus-per-task=1 --gpu-bind=closest``): each rank of the program a
multi-rank task launches sees the GPUs of one of its task's slots, not every GPU of the node."""

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
import os, sys
PROGRAM = ("import os; os.write(1, (os.environ['SLURM_LOCALID'] + ' '"
           " + os.environ.get('CUDA_VISIBLE_DEVICES', '-') + chr(10)).encode())")

def run(params, ctx):
    done = ctx.launch([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120)
    if done is None:
        return {"value": -1.0}
    return {"value": float(done.returncode), "lines": sorted(done.stdout.splitlines()), "stderr": done.stderr[-500:],
            "leader": os.environ.get("CUDA_VISIBLE_DEVICES")}
"""


@pytest.fixture(scope="module")
def gpu_slurm() -> Iterator[LoopbackSlurm]:
    if missing_tools():
        if os.environ.get("EMEWS_SKIP_SLURM") == "1":
            pytest.skip("Slurm is not installed (skipped: EMEWS_SKIP_SLURM=1)")
        pytest.fail(f"the Slurm test cluster needs {', '.join(missing_tools())}")
    with LoopbackSlurm(gpus=4) as cluster:
        yield cluster


def test_each_rank_ctx_launch_starts_sees_only_its_slots_gpu(gpu_slurm: LoopbackSlurm, tmp_path: Path) -> None:
    """Found here: the team (world ranks 1 and 2, slots 1 and 2) launched a 2-rank program with
    ``srun --overlap ... --gpus-per-task=1 --gpu-bind=closest`` and both of its ranks saw
    CUDA_VISIBLE_DEVICES=0,1,2,3 (while team rank 0 itself kept GPU 1)."""
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(SITE))
    (tmp_path / "obj.py").write_text(OBJECTIVE)
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
    env = {**gpu_slurm.env, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
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
    os.environ["SLURM_CONF"] = str(gpu_slurm.conf)
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
    for _, _, metrics in rows:
        seen = json.loads(metrics)
        assert seen["leader"] == "1", seen  # team rank 0 is world rank 1: slot 1's GPU
        assert seen["lines"] == ["0 1", "1 2"], seen  # launched rank i: team member i's slot's GPU
