"""Where an experiment directory is now, for a run that used it while it was moved (``mv EXP EXP2``).

A run keeps the path it was started with; renamed while it ran, the directory is still its own
(the store it holds open lives on there), but every path under the old name fails at the end:
the run said "not an experiment directory" and wrote no summary. The run holds the directory open
from its start, and at its end asks the kernel where that directory is now (``/proc/self/fd``)."""

from __future__ import annotations

import shlex
from pathlib import Path

from emews.core.followed_dir import FollowedDir


class DirectoryWatch(FollowedDir):
    """An experiment directory held open, to tell where it is at the end of a run."""

    def moved_line(self, now: Path | None) -> str:
        """The one line that says where the directory went while the run used it."""
        if now is None:
            return (
                f"emews: the experiment directory {self.path} was deleted (or moved where this run cannot see "
                "it) while it ran: its summary and results.csv could not be written"
            )
        return (
            f"emews: the experiment directory {self.path} was moved to {now} while it ran: its summary and "
            f"results.csv are written there (follow it with: emews status {shlex.quote(str(now))})"
        )
