"""A new user's mistakes on the command line: each one line naming what was wrong and what is
allowed, exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from emews.cli import main


def test_an_exp_dir_that_is_a_file_is_said_to_be_one(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``emews launch random --exp-dir notes.txt`` (a file) said '... already exists and is not
    empty', a folder's wording for what is no folder."""
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    assert main(["launch", "random", "--site", "local", "--exp-dir", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"emews: error: --exp-dir: {target} is a file (allowed: a new or empty directory)"], err
    assert target.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_exp_dir_that_is_an_experiment_names_resume(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``emews launch WF --exp-dir EXP`` again on a stopped experiment (the usual slip after an
    upgrade or a stop) said only '... already exists and is not empty'; the command that
    continues it is named now, and the experiment is left as it was."""
    exp = tmp_path / "exp"
    exp.mkdir()
    for name in ("workflow.yaml", "site.yaml"):
        (exp / name).write_text("recorded: 1\n")
    assert main(["launch", "random", "--site", "local", "--exp-dir", str(exp)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"emews: error: --exp-dir: {exp} is an experiment already: emews resume {exp} continues it "
        "(allowed: a new or empty directory)"
    ], err
    assert sorted(p.name for p in exp.iterdir()) == ["site.yaml", "workflow.yaml"]
