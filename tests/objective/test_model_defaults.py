"""CANDLE model defaults (``objective.defaults``, issue 12) with the real NT3 default model file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from emews.objective.model_defaults import ModelDefaultsError, read_model_defaults
from emews.objective.context import task_run_dir
from testutil import TESTS, stored_rows, write_workflow

NT3 = TESTS / "data" / "supervisor" / "nt3_default_model.txt"
MODEL = TESTS / "models" / "candle_model.py"


def test_the_nt3_defaults_read_as_python_values_never_run_as_code(tmp_path: Path) -> None:
    defaults = read_model_defaults(NT3)
    assert len(defaults) == 28 and list(defaults)[:2] == ["data_url", "train_data"]
    assert defaults["dense"] == [200, 20] and defaults["conv"] == [128, 20, 1, 128, 10, 1]
    assert defaults["learning_rate"] == 0.001 and type(defaults["epochs"]) is int
    assert defaults["restart"] is True and defaults["add_noise"] is False
    assert defaults["activation"] == "relu"
    odd = tmp_path / "odd.txt"
    odd.write_text("[Monitor_Params]\ntimeout=10\n[Global_Params]\nact = 'relu'\nbatch = 2**10\n")
    assert read_model_defaults(odd) == {"act": "relu", "batch": 1024, "timeout": 10}
    odd.write_text("[Global_Params]\nf = __import__('os').getcwd()\n")  # code: never run, refused
    with pytest.raises(ModelDefaultsError, match=r"f = __import__\('os'\).getcwd\(\): __import__\('os'\).getcwd\(\): not a value"):
        read_model_defaults(odd)


def test_a_file_without_sections_is_refused_with_its_name(tmp_path: Path) -> None:
    bad = tmp_path / "bad_default_model.txt"
    bad.write_text("epochs = 3\n")
    with pytest.raises(ModelDefaultsError, match="bad_default_model.txt: not an INI file"):
        read_model_defaults(bad)


@pytest.mark.parametrize("kind", ["command", "module"])
def test_defaults_are_merged_under_each_point_and_recorded(emews_cmd, tmp_path: Path, kind: str) -> None:
    """A sweep over two parameters runs a complete NT3-shaped model: the rest come from the defaults."""
    (tmp_path / "obj.py").write_text(
        "def run(p):\n    return {'loss': p['x'] ** 2 + p['epochs'] / 100 + len(p['dense']), 'keys': len(p)}\n")
    # (the command gets them in a file: as flags, NT3's restart = True would be a bare --restart,
    # which check refuses for a CANDLE default model: test_candle_params)
    objective = ({"command": ["python3", str(MODEL), "--use_bn", "--params", "{params_file}"], "metric": "loss",
                  "params": "file"} if kind == "command"
                 else {"module": "obj.py", "metric": "loss"})
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep", "options": {"levels": 2}},
        objective={**objective, "defaults": str(NT3.relative_to(TESTS.parent))},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}, "epochs": {"type": "int", "lower": 2, "upper": 4}},
        budget={"evaluations": 4}, task={"timeout": 60, "isolation": "process"})
    emews_cmd.cwd = TESTS.parent  # the defaults path is relative to the current folder
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", str(tmp_path / "exp"), timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    nt3 = read_model_defaults(NT3)
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    for r in rows:
        point = json.loads(r["params"])
        assert set(point) == {"x", "epochs"}  # the store keeps the optimizer's point
        assert r["objective"] == pytest.approx(point["x"] ** 2 + point["epochs"] / 100 + 2)
        recorded = json.loads((task_run_dir(tmp_path / "exp" / "runs", r["id"]) / "params.json").read_text())
        assert recorded == {**nt3, **point}
    assert emews_cmd.leftovers_after_exit() == []


def _checked(emews_cmd, folder: Path, defaults: Path) -> tuple:
    """``emews check`` of a workflow in ``folder`` whose objective (returning ``epochs``) reads its
    model's defaults from ``defaults``: (the workflow, the check's process)."""
    (folder / "obj.py").write_text("def run(p):\n    return float(p['epochs'])\n")
    wf = write_workflow(
        folder,
        objective={"module": "obj.py", "defaults": str(defaults)},
        space={"a": {"type": "float", "lower": 0.0, "upper": 1.0}},
        budget={"evaluations": 2},
    )
    return wf, emews_cmd("check", str(wf), timeout=120)


def test_a_value_that_is_no_python_is_refused_by_check_naming_file_and_key(emews_cmd, tmp_path: Path) -> None:
    """CANDLE's parser ``eval``s every value of the file and stops with a SyntaxError at ``x = [1,``;
    emews passed the text on as a string and ``emews check`` said ok. Quoted words stay strings."""
    defaults = tmp_path / "my_default_model.txt"
    defaults.write_text("[Global_Params]\nepochs = 3\nact = 'relu'\nx = [1,\n")
    _, proc = _checked(emews_cmd, tmp_path, defaults)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") <= 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{defaults}: [Global_Params] x = [1,: not a Python value" in proc.stderr, proc.stderr
    with pytest.raises(ModelDefaultsError, match=r"\[Global_Params\] x = \[1,"):
        read_model_defaults(defaults)



def test_a_bare_word_is_refused_by_check_as_candle_stops_at_it(emews_cmd, tmp_path: Path) -> None:
    """CANDLE's parser (the real ``default_utils.read_config_file``) ``eval``s ``activation = relu``
    and stops with a NameError; emews passed the word on as the string 'relu' and ``emews check``
    said ok. The real file, which quotes its strings, still passes."""
    defaults = tmp_path / "nt3_default_model.txt"
    defaults.write_text(NT3.read_text().replace("activation = 'relu'", "activation = relu"))
    candle = subprocess.run(
        [sys.executable, str(TESTS / "data" / "candle" / "nt3_parse_only.py"), "--config_file", str(defaults)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert candle.returncode != 0 and "NameError: name 'relu' is not defined" in candle.stderr, candle.stderr
    wf, proc = _checked(emews_cmd, tmp_path, defaults)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") <= 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{defaults}: [Global_Params] activation = relu: " in proc.stderr, proc.stderr
    assert "NameError" in proc.stderr and "quote" in proc.stderr, proc.stderr
    defaults.write_text(NT3.read_text())
    assert emews_cmd("check", str(wf), timeout=120).returncode == 0
