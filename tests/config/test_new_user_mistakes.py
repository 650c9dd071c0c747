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
    assert err.splitlines() == [
        f"emews: error: --exp-dir: {target} is a file (allowed: a new or empty directory)"
    ], err
    assert target.read_text() == "mine\n" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
