"""The run's exit status where a full disk cannot lose it: ``EXP/exit-status.json``.

Every rank exits 0 to MPI (a rank that exits non-zero makes mpiexec kill the others while they
finish), so the launcher and ``job.sh`` learn the run's outcome from files. ``summary.json`` is
written whole under a new name, which needs room on the disk; on a full disk it is not written.
This record takes its room when the run starts (a fixed-size file) and is overwritten in place
at the end, which takes no new room: the run's status reaches the launcher either way.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

#: the record's name in the experiment directory
EXIT_RECORD = "exit-status.json"
#: the record's size in bytes: room for ``{"exit_status": S, "finished": T}``, blank-padded
_SIZE = 96


def _padded(data: dict[str, object]) -> bytes:
    text = json.dumps(data).encode()
    return text.ljust(_SIZE - 1) + b"\n"


def reserve_exit_record(exp_dir: Path) -> None:
    """Take the record's room at the run's start (an ``OSError`` when there is none)."""
    fd = os.open(exp_dir / EXIT_RECORD, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, _padded({}))
        os.fsync(fd)
    finally:
        os.close(fd)


def record_exit(exp_dir: Path, status: int) -> None:
    """Overwrite the reserved record with the run's ``status``, in place (an ``OSError`` when the
    record was not reserved or cannot be written)."""
    fd = os.open(exp_dir / EXIT_RECORD, os.O_WRONLY)  # no O_CREAT, no O_TRUNC: the reserved blocks
    try:
        os.pwrite(fd, _padded({"exit_status": status, "finished": time.time()}), 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_exit_record(exp_dir: Path) -> dict[str, Any] | None:
    """The record as it is: ``{}`` while reserved and not written (the run has not ended itself);
    ``None`` when there is none or it cannot be read."""
    try:
        data = json.loads((exp_dir / EXIT_RECORD).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def recorded_exit(exp_dir: Path, since: float) -> int | None:
    """The status the run that finished after ``since`` recorded here (``None``: no such run)."""
    data = read_exit_record(exp_dir)
    if data is None:
        return None
    finished, status = data.get("finished"), data.get("exit_status")
    if not isinstance(finished, (int, float)) or finished < since or not isinstance(status, int):
        return None
    return status
