"""A sweep runs its points: a larger ``budget.evaluations`` is cut to them, said once at check and
launch, and the progress line, the closing line and the stored workflow count what runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from testutil import write_workflow

OBJECTIVE = "def run(params):\n    return params['x'] ** 2\n"


def test_a_one_point_sweep_under_a_budget_of_30_says_1_of_1(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "obj.py").write_text(OBJECTIVE)
    (tmp_path / "pts.txt").write_text('{"x": 1.0}\n')
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "obj.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
                        optimizer={"name": "sweep", "options": {"file": str(tmp_path / "pts.txt")}},
                        budget={"evaluations": 30}, replicates=2)
    said = "budget.evaluations 30: the sweep optimizer runs 1 point, 2 replicates each, so 2 evaluations will run"
    check = emews_cmd("check", str(wf), timeout=120)
    assert check.returncode == 0, check.stderr
    assert "budget 2" in check.stdout and check.stderr.count(said) == 1, check.stderr
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(said) == 1
    assert "2/2 evaluations" in proc.stderr and "/30" not in proc.stderr
    stored = yaml.safe_load((emews_cmd.cwd / "exp" / "workflow.yaml").read_text())
    assert stored["budget"]["evaluations"] == 2     # emews resume and emews status count what runs
    status = emews_cmd("status", "exp", timeout=120)
    assert "/30" not in status.stdout and "2/2" in status.stdout, status.stdout


def test_a_smaller_budget_or_none_is_left_as_it_is(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "obj.py").write_text(OBJECTIVE)
    (tmp_path / "pts.txt").write_text('{"x": 1.0}\n{"x": 0.5}\n{"x": 0.0}\n')
    for budget, shown in (({"evaluations": 2}, "budget 2"), ({"time": "1h"}, "budget 3 evaluations or 01:00:00")):
        wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "obj.py"), "function": "run"},
                            space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
                            optimizer={"name": "sweep", "options": {"file": str(tmp_path / "pts.txt")}}, budget=budget)
        check = emews_cmd("check", str(wf), timeout=120)
        assert check.returncode == 0 and shown in check.stdout, (check.stdout, check.stderr)
        assert "will run" not in check.stderr


def test_an_empty_points_file_is_refused_naming_it(tmp_path: Path, capsys, monkeypatch) -> None:
    """``emews check`` said ``0 points from pts.txt, budget 10`` and the launch ran nothing: an empty
    (or blank) points file is one line naming the file and ``optimizer.options.file``, exit 2, no
    experiment made."""
    from testutil import refused_in_one_line

    monkeypatch.chdir(tmp_path)
    (tmp_path / "obj.py").write_text(OBJECTIVE)
    for text in ("", "\n  \n"):
        (tmp_path / "pts.txt").write_text(text)
        wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "obj.py"), "function": "run"},
                            space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
                            optimizer={"name": "sweep", "options": {"file": str(tmp_path / "pts.txt")}},
                            budget={"evaluations": 10})
        line = refused_in_one_line(capsys, wf)
        assert line.startswith(f"emews: error: {wf}: optimizer.options.file: points file {tmp_path / 'pts.txt'} "
                               "has no points"), line
