"""Checkpoint files deleted after the run (to free space on a full disk, or moved away) while the
store still records them.

``emews checkpoints`` listed them as if they were there (with their recorded size), ``--best`` named
a deleted file as the best checkpoint, and ``load_best`` failed on it with a bare
``FileNotFoundError``. Now only checkpoints whose files are there are listed and loaded (the best
of what is left), and one note says how many the store records that are gone.
"""

from __future__ import annotations

from pathlib import Path

from emews.output.catalog import load_best
from testutil import trainer_workflow


def test_checkpoints_whose_files_are_gone_are_not_listed_or_loaded(emews_cmd, tmp_path: Path) -> None:
    wf = trainer_workflow(tmp_path, [0.1, 0.5], epochs=3, task={"isolation": "inline"})
    emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240, check=True)
    exp = tmp_path / "exp"
    before = emews_cmd("checkpoints", str(exp), "--best", "1", check=True)
    best = Path(before.stdout.splitlines()[1].split()[-1])      # trial 0's last step: rate 0.1 + 1/3
    assert best.parent.name == "000000" and best.is_file()
    best.unlink()

    after = emews_cmd("checkpoints", str(exp), "--best", "1", check=True)
    (row,) = after.stdout.splitlines()[1:]
    assert str(best) not in row and "000000" in row, after.stdout      # the best of what is left
    assert Path(row.split()[-1]).is_file()
    assert "emews: note: 1 checkpoint the store records is not listed: its file is gone" in after.stderr, after.stderr
    listed = emews_cmd("checkpoints", str(exp), check=True).stdout
    assert str(best) not in listed and len(listed.splitlines()) - 1 == 5  # 2 trials x 3 steps, one gone

    ((loaded_row, state),) = load_best(exp, k=1)
    assert loaded_row.path != str(best) and state["trial"] == 0 and state["step"] == 2
