"""``setup(ctx)``: an objective's per-worker setup is told which worker it prepares (its rank, host,
node-local rank and GPU ids, the site's binding applied), so it can pin a device once per worker. It
was refused at load (it had got ``None``): users pinned the GPU again in every task. ``setup()``
with no argument is called as before."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from testutil import query, write_workflow

OBJECTIVE = '''\
import json, os

SEEN = {}


def setup(ctx):
    SEEN.update(rank=ctx.rank, local_rank=ctx.local_rank, host=ctx.host, gpu_ids=list(ctx.gpu_ids),
                visible=os.environ.get("CUDA_VISIBLE_DEVICES"), kind=type(ctx).__name__)
    with open(os.path.join(os.environ["SETUP_SEEN"], f"{os.getpid()}.json"), "w") as fh:
        json.dump(SEEN, fh)


def run(params, ctx):
    return {"value": float(params["x"]), "setup_rank": SEEN["rank"], "task_rank": ctx.rank}
'''


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_each_workers_setup_sees_its_own_rank_and_gpus(emews_cmd, tmp_path: Path, isolation: str) -> None:
    (tmp_path / "site-configs").mkdir()
    (tmp_path / "site-configs" / "gpubox.yaml").write_text(
        "extends: local\nnode: {gpus: 4, gpus_per_worker: 2, gpu_binding: env, gpu_env: CUDA_VISIBLE_DEVICES}\n")
    (tmp_path / "pinned.py").write_text(OBJECTIVE)
    seen = tmp_path / "seen"
    seen.mkdir()
    emews_cmd.env["SETUP_SEEN"] = str(seen)
    wf = write_workflow(tmp_path, optimizer={"name": "sweep"}, objective={"module": str(tmp_path / "pinned.py")},
                        space={"x": {"type": "ordered", "values": list(range(6))}},
                        budget={"evaluations": 6}, task={"isolation": isolation, "timeout": 60})
    proc = emews_cmd("launch", str(wf), "--site", "gpubox", "--workers", "2", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    setups = sorted((json.loads(p.read_text()) for p in seen.iterdir()), key=lambda s: s["rank"])
    host = socket.gethostname()
    assert setups == [  # one setup per worker (mpiexec on one node: rank 0, the optimizer, is node-local rank 0)
        {"rank": 1, "local_rank": 1, "host": host, "gpu_ids": [0, 1], "visible": "0,1", "kind": "WorkerContext"},
        {"rank": 2, "local_rank": 2, "host": host, "gpu_ids": [2, 3], "visible": "2,3", "kind": "WorkerContext"},
    ], setups
    ranks = [json.loads(m) for (m,) in query(tmp_path / "exp", "SELECT metrics FROM results")]
    assert len(ranks) == 6 and all(r["setup_rank"] == r["task_rank"] for r in ranks), ranks  # each task's own worker's
