"""The ranks' start marks (emews/job/start_marks.py): each rank appends its number to its node's file
before MPI_Init; the start's watch names the ranks that never came."""

from __future__ import annotations

import os
from pathlib import Path

from emews.job.start_marks import mark_start, marks_folder, missing


def test_the_missing_ranks_are_named_and_counted(tmp_path: Path) -> None:
    folder = tmp_path / "marks"
    assert missing(folder, 3) == "none of the 3 ranks reached MPI_Init"
    for rank in (0, 1):
        mark_start(folder, {"PMI_RANK": str(rank), "SLURM_PROCID": "0"})  # Hydra's under a batch script
    assert (folder / os.uname().nodename).read_text() == "0\n1\n"  # one file per node
    assert missing(folder, 3) == "rank 2 of 3 never reached MPI_Init"
    assert missing(folder, 2) == "all 2 ranks reached MPI_Init, which did not end"
    for rank in range(3, 20):
        mark_start(folder, {"SLURM_PROCID": str(rank)})
    assert missing(folder, 40) == "ranks 2, 20, 21, 22, 23, 24, 25, 26 and 13 more of 40 never reached MPI_Init"
    mark_start(folder, {})  # a launcher that gives no rank number before MPI_Init: counted, not named
    assert missing(folder, 40) == "20 of 40 ranks never reached MPI_Init"


def test_a_mark_that_cannot_be_written_is_skipped(tmp_path: Path) -> None:
    mark_start(tmp_path / "gone" / "marks", {"PMI_RANK": "0"})  # its parent is gone: nothing, no error
    assert not (tmp_path / "gone").exists()
    assert marks_folder(tmp_path, None) is None  # a job started by hand: no marks
    assert marks_folder(tmp_path, "T") == tmp_path / ".start-T"
    assert marks_folder(tmp_path, None, tmp_path / "pool") == tmp_path / "pool" / ".start"
