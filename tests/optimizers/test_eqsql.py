"""An EQ-SQL ME run unchanged as the ``eqsql`` optimizer: the EMEWS tutorial's uc4 ME (a GP that
reprioritizes the queued tasks) and its bash model script and Ackley model, under real mpiexec
(``tests/data/emews/README.md`` says where each file comes from)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from testutil import TESTS, EmewsCommand
from testutil import stored_rows as stored

pytest.importorskip("sklearn")

PROJECT = TESTS / "data" / "emews"
#: the worker pool's app call ``"bash" shfile task_payload output_file trial emews_root instance_dir``
MODEL = ('bash scripts/run_ackley.sh {payload} {run_dir}/output.txt 1 "$EMEWS_PROJECT_ROOT" {run_dir}')


def ackley(x: list[float], a: float = 20, b: float = 0.2, c: float = 2 * math.pi) -> float:
    d = len(x)
    return (-a * math.exp(-b * math.sqrt(sum(v * v for v in x) / d))
            - math.exp(sum(math.cos(c * v) for v in x) / d) + a + math.e)


def test_the_tutorial_uc4_me_runs_unchanged_its_payloads_as_tasks(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    (project / "uc4.yaml").write_text(yaml.safe_dump({
        "optimizer": {"name": "eqsql", "options": {"me": "python/me.py", "config": "python/me_cfg.yaml"}},
        "objective": {"command": ["bash", "-c", MODEL], "metric": "f", "result": "file",
                      "result_file": "output.txt"},
        "budget": {"evaluations": 8},  # me_cfg.yaml: 8 samples submitted, 6 completions wanted
    }))
    emews = EmewsCommand(project)
    emews.env["EMEWS_PROJECT_ROOT"] = str(project)
    proc = emews("launch", "uc4.yaml", "--site", "local", "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("Reprioritizing ...") == 2  # after each 3 completions, as me_cfg.yaml says
    rows = [r for r in stored(project / "exp") if r["status"] == "ok"]
    payloads = [json.loads(json.loads(r["params"])["payload"]) for r in rows]
    assert len(rows) >= 6 and len({json.dumps(p) for p in payloads}) == len(rows)  # none ran twice
    for row, payload in zip(rows, payloads):
        assert len(payload["x"]) == 2 and all(-32.768 <= v <= 32.768 for v in payload["x"])
        assert row["objective"] == pytest.approx(ackley(payload["x"]))  # the model ran on the payload


@pytest.mark.parametrize("config, model, says", [
    ("list.yaml", MODEL, "optimizer.options.config: PROJECT/list.yaml holds no mapping"),
    ("python/me_cfg.yaml", MODEL.replace("{payload}", "{params}"),
     "objective.command: {params} names no parameter (allowed: {payload}, {run_dir}"),
], ids=["config", "placeholder"])
def test_check_refuses_what_would_not_run(tmp_path: Path, config: str, model: str, says: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    (project / "list.yaml").write_text("- 1\n- 2\n")
    (project / "uc4.yaml").write_text(yaml.safe_dump({
        "optimizer": {"name": "eqsql", "options": {"me": "python/me.py", "config": config}},
        "objective": {"command": ["bash", "-c", model], "metric": "f"},
        "budget": {"evaluations": 8},
    }))
    proc = EmewsCommand(project)("check", "uc4.yaml")
    assert proc.returncode == 2
    assert says.replace("PROJECT", str(project)) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
