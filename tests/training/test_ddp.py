"""Data-parallel training as one task (``task.ranks``) under a real ``mpiexec``: the digits model
(objectives/digits_ddp.py) trained with DistributedDataParallel over ``ctx.process_group()`` (gloo)."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import pytest

from testutil import REPO, stored_rows, write_workflow

# looked up, not imported: the test needs torch only in its tasks (collecting need not import it)
pytestmark = pytest.mark.skipif(find_spec("torch") is None, reason="the test extra installs torch")


def test_two_rank_ddp_follows_the_one_rank_run_with_the_same_seed_and_global_batch(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"},
        objective={"module": str(REPO / "objectives" / "digits_ddp.py"), "metric": "val_loss"},
        space={"ranks": {"type": "ordered", "values": [1, 2]}, "seed": {"type": "constant", "value": 7},
               "batch": {"type": "constant", "value": 32}, "lr": {"type": "constant", "value": 0.05},
               "units": {"type": "constant", "value": 32}, "epochs": {"type": "constant", "value": 3}},
        budget={"evaluations": 2}, task={"timeout": 300, "isolation": "process", "ranks": "ranks"})
    proc = emews_cmd("launch", str(wf), "--workers", "4", "--exp-dir", "exp", timeout=600)
    assert proc.returncode == 0, proc.stderr
    by_size = {json.loads(r["params"])["ranks"]: r for r in stored_rows(tmp_path / "exp")}
    assert {k: r["status"] for k, r in by_size.items()} == {1: "ok", 2: "ok"}, by_size
    one, two = by_size[1], by_size[2]
    assert two["objective"] == pytest.approx(one["objective"], rel=1e-4)
    assert json.loads(two["metrics"])["accuracy"] == pytest.approx(json.loads(one["metrics"])["accuracy"], abs=1e-3)
    assert one["objective"] < 0.5  # it trained
    assert emews_cmd.leftovers_after_exit() == []
