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
from site_helpers import LOOPBACK_SITE
from slurm_loopback import LoopbackSlurm
from test_slurm_loopback import wait_for

from emews.objective.context import task_run_dir
from emews.site.jobs import job_status

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _jobs_import_this_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = str(TESTS.parent)
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", repo + (os.pathsep + old if old else ""))


def launched_and_done(workflow: str, *, cwd: Path, exp: Path) -> Path:
    """``emews launch WORKFLOW`` on the loopback Slurm site from ``cwd``, waited for until its job is done."""
    proc = subprocess.run(
        [sys.executable, "-m", "emews", "launch", workflow, "--site", str(LOOPBACK_SITE), "--exp-dir", str(exp)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    return exp


def test_a_upf_of_a_command_model_runs_as_a_slurm_job(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    folder = tmp_path / "study"
    folder.mkdir()
    shutil.copy(TESTS / "models" / "candle_model.py", folder / "model.py")
    shutil.copy(TESTS / "data" / "supervisor" / "upf" / "templates-upf3.txt", folder / "upf3.txt")
    shutil.copy(TESTS / "data" / "supervisor" / "nt3_default_model.txt", folder / "nt3_default_model.txt")
    (folder / "wf.yaml").write_text(
        yaml.safe_dump(
            {
                "optimizer": {"name": "sweep", "options": {"file": "upf3.txt"}},
                "objective": {
                    # the point and its defaults in a file: as flags, NT3's restart = True would be a
                    # bare --restart, which check refuses for a CANDLE default model
                    "command": [sys.executable, "model.py", "--mode", "json", "--params", "{params_file}"],
                    "metric": "loss",
                    "params": "file",
                    "defaults": "nt3_default_model.txt",
                },
                "budget": {"evaluations": 7},
                "task": {"timeout": 120},
            }
        )
    )
    exp = launched_and_done("study/wf.yaml", cwd=tmp_path, exp=tmp_path / "exp")
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


def test_the_docs_model_runner_route_runs_as_a_slurm_job(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """docs/coming-from-candle.md's ``nt3_runner.py``, as the page shows it, next to a Benchmarks
    checkout, launched from that folder on a batch site: its ``sys.path`` entries were made absolute
    from the working directory, which in the job is the experiment directory (``cd EXP``), so every
    task failed (``No module named 'nt3_baseline_keras2'``) after ``emews launch`` had imported it
    fine from the launch folder. The page's runner finds them from its own folder."""
    sys.path.insert(0, str(TESTS))
    from test_readme import python_block

    folder = tmp_path / "study"
    nt3 = folder / "Benchmarks" / "Pilot1" / "NT3"
    nt3.mkdir(parents=True)
    (folder / "Benchmarks" / "common").mkdir()
    (nt3 / "nt3_baseline_keras2.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(TESTS / 'data' / 'candle')!r})\n"
        "from nt3_parse_only import initialize_parameters\n\n"
        "class History:\n"
        "    def __init__(self, history):\n"
        "        self.history = history\n\n"
        "def run(gParameters):\n"
        "    return History({'val_loss': [gParameters['learning_rate'] * gParameters['epochs']]})\n"
    )
    docs = (TESTS.parent / "docs" / "coming-from-candle.md").read_text()
    (folder / "nt3_runner.py").write_text(python_block("candle_point", docs))
    (folder / "wf.yaml").write_text(
        yaml.safe_dump(
            {
                "objective": {"module": "nt3_runner.py", "metric": "val_loss"},
                "optimizer": {"name": "random", "options": {"seed": 1}},
                "space": {
                    "learning_rate": {"type": "float", "lower": 0.1, "upper": 0.2},
                    "dense": {"type": "categorical", "values": ["500 100 50", "64"]},
                },
                "budget": {"evaluations": 3},
            }
        )
    )
    exp = launched_and_done("wf.yaml", cwd=folder, exp=tmp_path / "exp")
    with sqlite3.connect(exp / "results.db") as db:
        rows = db.execute("SELECT status, objective, params, error FROM results").fetchall()
    assert len(rows) == 3 and {r[0] for r in rows} == {"ok"}, [r[3] for r in rows]
    for _, objective, params, _ in rows:
        assert objective == pytest.approx(json.loads(params)["learning_rate"] * 400)  # NT3's default epochs
