"""An EMEWS UPF sweep (Swift/T's ``foreach line in file_lines(upf)``: each line passed whole to the
model script) as emews' sweep with ``lines: text``, under real mpiexec."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from testutil import TESTS, EmewsCommand, stored_rows

PROJECT = TESTS / "data" / "emews"
MODEL = 'bash scripts/run_model.sh {params} {run_dir}/output.txt 1 "$EMEWS_PROJECT_ROOT" {run_dir}'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root)
    return root


def sweep(project: Path, upf: str, command: str = MODEL, **options: str) -> EmewsCommand:
    (project / "sweep.yaml").write_text(yaml.safe_dump({
        "optimizer": {"name": "sweep", "options": {"file": upf, **options}},
        "objective": {"command": ["bash", "-c", command], "metric": "f", "result": "file",
                      "result_file": "output.txt"},
    }))
    emews = EmewsCommand(project)
    emews.env["EMEWS_PROJECT_ROOT"] = str(project)
    return emews


def test_each_line_of_a_text_upf_is_passed_whole_to_the_model_script(project: Path) -> None:
    emews = sweep(project, "data/xy-upf.txt", lines="text")
    proc = emews("launch", "sweep.yaml", "--site", "local", "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = stored_rows(project / "exp")
    assert [yaml.safe_load(r["params"])["params"] for r in rows] == ["0.5,0.5", "1.0,-1.0", "-0.25,1.5"]
    assert [r["status"] for r in rows] == ["ok"] * 3
    assert rows[1]["objective"] == pytest.approx(2.0)  # ga0's f(1, -1), computed by the bash model


def test_the_tutorials_upf_is_read_whole_by_check(project: Path) -> None:
    proc = sweep(project, "data/uc1-upf.txt", lines="text")("check", "sweep.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "budget 50" in proc.stdout  # one task per line, the budget by default


def test_a_text_upf_read_as_json_says_how_to_run_it(project: Path) -> None:
    proc = sweep(project, "data/uc1-upf.txt")("check", "sweep.yaml")
    assert proc.returncode == 2
    assert "uc1-upf.txt:1: not a JSON object" in proc.stderr
    assert 'with lines: text the point {"params": LINE}' in proc.stderr


def test_check_refuses_a_placeholder_a_text_upf_point_has_not(project: Path) -> None:
    proc = sweep(project, "data/xy-upf.txt", MODEL.replace("{params}", "{param}"), lines="text")("check", "sweep.yaml")
    assert proc.returncode == 2
    assert "objective.command: {param} names no parameter (allowed: {params}, {run_dir}" in proc.stderr
