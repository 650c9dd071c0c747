"""Bad training settings: one line naming the file and the key, exit 2, nothing created."""

from __future__ import annotations

from pathlib import Path

import pytest

from emews.cli import main
from testutil import TESTS, write_workflow

TRAINER = TESTS / "objectives" / "trainer.py"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def refused(capsys: pytest.CaptureFixture, workflow: Path) -> str:
    """``check`` and ``launch`` both exit 2 with the same single line and leave no experiment dir."""
    exp = workflow.parent / "exp-should-not-exist"
    lines = []
    for command in (["check", str(workflow)], ["launch", str(workflow), "--workers", "1", "--exp-dir", str(exp)]):
        code = main(command)
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
        lines.append(err.strip())
    assert not exp.exists() and lines[0] == lines[1]
    return lines[0]


def workflow(folder: Path, **sections) -> Path:
    return write_workflow(folder, objective={"module": str(TRAINER), "metric": "loss"},
                          space={"rate": {"type": "float", "lower": 0.0, "upper": 1.0}}, **sections)


CASES = {
    "unknown scheduler": ({"trial_scheduler": {"name": "ashaa"}}, "trial_scheduler.name",
                          "asha, hyperband, median, pbt"),
    "unknown option": ({"trial_scheduler": {"name": "asha", "options": {"max_tt": 9}}},
                       "trial_scheduler.options.max_tt", "max_t, grace_period"),
    "option type": ({"trial_scheduler": {"name": "asha", "options": {"max_t": "9"}}},
                    "trial_scheduler.options.max_t", None),
    "option choice": ({"trial_scheduler": {"name": "asha", "options": {"variant": "halving"}}},
                      "trial_scheduler.options.variant", "stopping"),
    "options together": ({"trial_scheduler": {"name": "asha", "options": {"max_t": 3, "grace_period": 9}}},
                         "trial_scheduler.options", "grace_period"),
    "pbt mutation": ({"trial_scheduler": {"name": "pbt", "options": {"mutations": ["lr"]}}},
                     "trial_scheduler.options", "lr"),
    "missing name": ({"trial_scheduler": {"options": {}}}, "trial_scheduler.name", None),
    "negative retries": ({"task": {"retries": -1}}, "task.retries", None),
    "checkpoint mode": ({"checkpoints": {"background": "yes"}}, "checkpoints.background", None),
    "keep last zero": ({"checkpoints": {"keep_last": 0}}, "checkpoints.keep_last", None),
    "walltime form": ({"walltime": {"limit": "1:75:00"}}, "walltime.limit", "HH:MM:SS"),
    "walltime number": ({"walltime": {"limit": 90}}, "walltime.limit", "HH:MM:SS"),
    "negative margin": ({"walltime": {"margin": -5}}, "walltime.margin", None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_training_settings_are_refused(capsys, tmp_path: Path, case: str) -> None:
    sections, key, mentioned = CASES[case]
    line = refused(capsys, workflow(tmp_path, **sections))
    assert f"wf.yaml: {key}" in line, line
    if mentioned:
        assert mentioned in line, line


def test_good_training_settings_pass(capsys, tmp_path: Path) -> None:
    wf = workflow(tmp_path, trial_scheduler={"name": "hyperband", "options": {"max_t": 27, "reduction_factor": 3}},
                  task={"retries": 2}, checkpoints={"background": False})
    assert main(["check", str(wf)]) == 0, capsys.readouterr().err
