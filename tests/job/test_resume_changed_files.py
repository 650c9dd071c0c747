"""``emews resume`` after the files a workflow names changed since the launch: the objective's module
edited (a syntax error, its function renamed) or deleted, a sweep's points file deleted.

``emews launch`` refuses each of these in one line (exit 2) before anything runs; ``resume`` started
the job anyway: a broken module failed every task ("objective setup failed"), spending the budget on
failures (the next resume: "nothing to resume"), and a missing points file was the optimizer's
ValueError traceback, exit 1. Now resume checks the objective and the optimizer as launch does.
"""

from __future__ import annotations

import yaml
from pathlib import Path

import pytest

from testutil import stored_rows, write_workflow

MODULE = "def run(params):\n    return params['x'] ** 2\n"


def _refused(emews_cmd, exp: Path, key: str, words: str) -> None:
    rows = len(stored_rows(exp))
    proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=8", timeout=240)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert line.startswith(f"emews: error: {exp / 'workflow.yaml'}: {key}: ") and words in line, line
    assert len(stored_rows(exp)) == rows                              # no task ran
    assert yaml.safe_load((exp / "workflow.yaml").read_text())["budget"]["evaluations"] == 4  # nothing written
    assert not (exp / "lease.json").exists()


@pytest.mark.parametrize("change, key, words", [
    ("syntax", "objective.module", "SyntaxError"),
    ("renamed", "objective.function", "has no function 'run'"),
    ("deleted", "objective.module", "does not exist"),
])
def test_resume_refuses_an_objective_changed_since_the_launch(emews_cmd, tmp_path: Path, change: str, key: str,
                                                               words: str) -> None:
    module = tmp_path / "model.py"
    module.write_text(MODULE)
    wf = write_workflow(tmp_path, objective={"module": str(module), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
                        budget={"evaluations": 4}, task={"isolation": "inline"})
    emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240, check=True)
    exp = tmp_path / "exp"
    if change == "deleted":
        module.unlink()
    else:
        module.write_text("def run(params:\n" if change == "syntax" else "def train(params):\n    return 1.0\n")
    _refused(emews_cmd, exp, key, words)
    module.write_text(MODULE)                                         # put back: the resume goes on
    emews_cmd("resume", str(exp), "--set", "budget.evaluations=8", timeout=240, check=True)
    assert [r["status"] for r in stored_rows(exp)] == ["ok"] * 8


def test_resume_refuses_a_sweep_whose_points_file_was_deleted(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODULE)
    points = tmp_path / "points.txt"
    points.write_text("".join(f'{{"x": {i / 10}}}\n' for i in range(8)))
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
                        optimizer={"name": "sweep", "options": {"file": str(points)}},
                        budget={"evaluations": 4}, task={"isolation": "inline"})
    emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240, check=True)
    points.unlink()
    _refused(emews_cmd, tmp_path / "exp", "optimizer.options.file", "does not exist")
