"""A CANDLE-style job on the real loopback Slurm (issue 12): a Supervisor UPF with no space, a command
model named by a relative path, its NT3 defaults: the batch job (``cd EXP`` first) finds them all."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from emews.objective.context import task_run_dir
from emews.site.jobs import job_status
from site_helpers import LOOPBACK_SITE
from slurm_loopback import LoopbackSlurm
from test_slurm_loopback import wait_for

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _jobs_import_this_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = str(TESTS.parent)
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", repo + (os.pathsep + old if old else ""))


def test_a_upf_of_a_command_model_runs_as_a_slurm_job(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    folder = tmp_path / "study"
    folder.mkdir()
    shutil.copy(TESTS / "models" / "candle_model.py", folder / "model.py")
    shutil.copy(TESTS / "data" / "supervisor" / "upf" / "templates-upf3.txt", folder / "upf3.txt")
    shutil.copy(TESTS / "data" / "supervisor" / "nt3_default_model.txt", folder / "nt3_default_model.txt")
    (folder / "wf.yaml").write_text(yaml.safe_dump({
        "optimizer": {"name": "sweep", "options": {"file": "upf3.txt"}},
        "objective": {"command": [sys.executable, "model.py", "--mode", "json"], "metric": "loss",
                      "defaults": "nt3_default_model.txt"},
        "budget": {"evaluations": 7}, "task": {"timeout": 120}}))
    exp = tmp_path / "exp"
    proc = subprocess.run([sys.executable, "-m", "emews", "launch", "study/wf.yaml", "--site", str(LOOPBACK_SITE),
                           "--exp-dir", str(exp)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    with sqlite3.connect(exp / "results.db") as db:
        rows = db.execute("SELECT id, status, objective, params, metrics FROM results ORDER BY id").fetchall()
    lines = [json.loads(line) for line in (folder / "upf3.txt").read_text().splitlines() if line.strip()]
    assert sorted(json.loads(r[3])["id"] for r in rows) == sorted(line["id"] for line in lines)
    assert {r[1] for r in rows} == {"ok"}, [r[4] for r in rows]
    for id_, _, objective, params, metrics in rows:
        point, seen = json.loads(params), json.loads(metrics)["seen"]
        assert seen["epochs"] == point["epochs"] and seen["dense"] == [200, 20]  # NT3's default dense
        assert seen["activation"] == point.get("activation", "relu")  # missing: the model default
        assert objective == pytest.approx(point["epochs"] / 100)  # x defaults to 0.0 in the model
        recorded = json.loads((task_run_dir(exp / "runs", id_) / "params.json").read_text())
        assert recorded["learning_rate"] == 0.001 and recorded["id"] == point["id"]
