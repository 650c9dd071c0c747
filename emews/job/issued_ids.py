"""Task ids an experiment's files hold that its store may not: ids are never issued twice.

Rank 0 records a task in the store only after it has run half a second (``GroupCommit.record_after``),
but the task's run folder (``runs/SHARD/ID``), its spool's ``task`` file and its checkpoint folder
(``checkpoints/ID``) exist from its start. After a ``kill -9`` such a task has files and no row;
were its id given to a new point on ``emews resume``, the new point's run folder would hold the
killed attempt's output and files (``stdout.killed.txt``, a CANDLE model's checkpoints).
"""

from __future__ import annotations

from pathlib import Path

from emews.runtime.spool import marked_task
from emews.training.checkpoints import CHECKPOINTS_DIR


def _numbered(folder: Path) -> list[int]:
    """The numbers of the entries of ``folder`` named by digits only, largest first."""
    try:
        names = [entry.name for entry in folder.iterdir()]
    except OSError:
        return []
    return sorted((int(name) for name in names if name.isdigit()), reverse=True)


def _highest_run_folder(runs: Path) -> int:
    """The largest id with a run folder ``runs/SHARD/ID`` (two listings: the highest shard with one)."""
    for shard in _numbered(runs):
        ids = _numbered(runs / f"{shard:03d}")
        if ids:
            return ids[0]
    return -1


def highest_id_on_disk(exp_dir: Path) -> int:
    """The largest task id that left a run folder, a spool's ``task`` file or a checkpoint folder
    in ``exp_dir`` (-1: none)."""
    runs = exp_dir / "runs"
    spooled = [marked_task(spool) for spool in (runs / ".spool").glob("*")]
    checkpointed = _numbered(exp_dir / CHECKPOINTS_DIR)
    return max(
        [_highest_run_folder(runs), *(task for task in spooled if task is not None), *checkpointed[:1]],
    )
