"""A task that failed because the disk was full is the disk's failure, not the objective's.

An objective that cannot write its model, checkpoint or output file on a full disk (or past its
quota) fails, and so would every evaluation after it: recorded as failed, each spent the budget and
taught the optimizer that its point is bad. :class:`FullDisk` tells such a failure from the
objective's own: its error names the cause (``No space left on device``, ``Disk quota exceeded``:
Python's ``OSError``, a command's ``write error: ...``), or the experiment's file system had
(almost) no room left when the failure arrived (``torch.save`` then says only ``basic_ios::clear:
iostream error``, ``numpy.save`` ``1000000 requested and 135664 written``). The distributor then
stops the run with that cause (:class:`~emews.core.errors.TaskOutOfSpace`) and leaves the task to
``emews resume``, which runs it again once there is room.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path

from emews.core.disk_room import FULL_BELOW, free_bytes
from emews.core.failure_cause import cause
from emews.core.results import Outcome, Status
from emews.objective.context import task_run_dir

#: how a full disk or quota reads in an error: the system's words (``[Errno 28] No space left on
#: device``, h5py's ``error message = 'No space left on device'``, ``cp: error writing ...: Disk quota
#: exceeded``), and Python's errno tag, which a traceback made under another locale keeps
NO_ROOM = (
    os.strerror(errno.ENOSPC),
    os.strerror(errno.EDQUOT),
    f"[Errno {errno.ENOSPC}] ",
    f"[Errno {errno.EDQUOT}] ",
)
#: seconds a look at the file system's free space is reused (failures can come by the thousand)
LOOK_EVERY = 1.0


def said_no_room(error: str | None) -> str | None:
    """The line of ``error`` that says the disk or quota is full; ``None`` if none does."""
    for line in (error or "").splitlines():
        if any(words in line for words in NO_ROOM):
            return line.strip()
    return None


class FullDisk:
    """Says why a failed task failed for want of disk space (:meth:`why`), looking at ``folder``'s
    file system (the experiment directory) at most every :data:`LOOK_EVERY` seconds."""

    def __init__(self, folder: Path, *, below: int = FULL_BELOW, clock: Callable[[], float] = time.monotonic) -> None:
        self.folder, self.below, self._clock = folder, below, clock
        self._looked: tuple[float, int | None] | None = None  # (when, free bytes)

    def why(self, outcome: Outcome) -> str | None:
        """The cause, in one line, when ``outcome`` (failed or crashed) is the disk's, with the task's
        run dir where it made one (its error may not name the file); else ``None``."""
        if outcome.status not in (Status.FAILED, Status.CRASHED):
            return None
        said = said_no_room(outcome.error)
        if said is None:
            free = self._free()
            if free is None or free >= self.below:
                return None
            said = f"{cause(outcome.error)}, with {free} bytes left on the disk of {self.folder}"
        run_dir = task_run_dir(self.folder / "runs", outcome.task_id)
        return f"{said} (its run dir: {run_dir})" if run_dir.is_dir() else said

    def _free(self) -> int | None:
        now = self._clock()
        if self._looked is None or now - self._looked[0] >= LOOK_EVERY:
            self._looked = (now, free_bytes(self.folder))
        return self._looked[1]
