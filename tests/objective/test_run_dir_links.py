"""Links a model wrote by absolute path in its run dir, after the experiment was copied or moved."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from emews.objective.context import TaskContext, task_run_dir
from emews.objective.run_dir_links import repoint_links


def _candle_run_dir(exp: Path, task_id: int) -> Path:
    """A run dir as CANDLE's CandleCkpt leaves it: ``ckpts/last`` linked by absolute path."""
    run_dir = task_run_dir(exp / "runs", task_id)
    epoch = run_dir / "ckpts" / "epochs" / "002"
    epoch.mkdir(parents=True)
    (epoch / "ckpt-info.json").write_text('{"epoch": 2}\n')
    (run_dir / "ckpts" / "last").symlink_to(epoch.resolve())
    return run_dir


def test_a_moved_experiments_links_point_into_it_and_other_links_stay(tmp_path: Path) -> None:
    """After ``mv`` the link names a folder that is gone: it is pointed at the same path in the
    moved run dir. A relative link, one to another task's run dir, one outside any experiment and
    one whose counterpart is not here are left as they are."""
    old, new = tmp_path / "exp", tmp_path / "moved"
    run_dir = _candle_run_dir(old, 3)
    other_task = _candle_run_dir(old, 4)
    (run_dir / "relative").symlink_to("ckpts/epochs/002")
    (run_dir / "other_task").symlink_to(other_task / "ckpts" / "epochs" / "002")
    (run_dir / "data").symlink_to(tmp_path)
    (run_dir / "gone").symlink_to(run_dir.resolve() / "ckpts" / "epochs" / "001")
    before = {name: os.readlink(run_dir / name) for name in ("relative", "other_task", "data", "gone")}
    shutil.move(old, new)
    moved = task_run_dir(new / "runs", 3)
    assert not (moved / "ckpts" / "last").exists()  # what CANDLE's restart would find: nothing

    context = TaskContext(3, 1, 7, [], "here", new / "runs")
    assert context.run_dir == moved
    assert os.readlink(moved / "ckpts" / "last") == str(moved.resolve() / "ckpts" / "epochs" / "002")
    assert (moved / "ckpts" / "last" / "ckpt-info.json").read_text() == '{"epoch": 2}\n'
    assert {name: os.readlink(moved / name) for name in before} == before
    assert repoint_links(moved) == 0  # done once
