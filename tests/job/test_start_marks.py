"""The ranks' start marks (emews/job/start_marks.py): each rank appends its number to its node's file
before MPI_Init; the start's watch names the ranks that never came."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from emews.job.start_marks import RANK_VARIABLES, mark_start, marks_folder, missing


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


#: each launcher's rank variable, as it sets it (the batch script's SLURM_PROCID, 0, passed on beside it)
LAUNCHERS = {
    "PMI_RANK": "MPICH Hydra's mpiexec, srun --mpi=pmi2",
    "PALS_RANKID": "Cray PALS mpiexec (Aurora, Polaris)",
    "PMIX_RANK": "PMIx: Open MPI 5's mpirun, srun --mpi=pmix",
    "OMPI_COMM_WORLD_RANK": "Open MPI's mpirun",
    "JSM_NAMESPACE_RANK": "jsrun (Summit)",
    "SLURM_PROCID": "srun",
}


@pytest.mark.parametrize("variable", RANK_VARIABLES)
def test_each_launchers_rank_variable_names_the_rank(tmp_path: Path, variable: str) -> None:
    """The rank's number is read from each launcher's variable, set alone, and over the SLURM_PROCID of
    the batch script that started the launcher (0 in every rank)."""
    assert set(LAUNCHERS) == set(RANK_VARIABLES)
    inherited = {} if variable == "SLURM_PROCID" else {"SLURM_PROCID": "0"}
    mark_start(tmp_path / "alone", {variable: "5"})
    mark_start(tmp_path / "batch", {**inherited, variable: "7"})
    mark_start(tmp_path / "batch", {**inherited, variable: " 8\n"})  # blanks around it
    assert (tmp_path / "alone" / os.uname().nodename).read_text() == "5\n"
    assert (tmp_path / "batch" / os.uname().nodename).read_text() == "7\n8\n"
    assert missing(tmp_path / "batch", 9) == "ranks 0, 1, 2, 3, 4, 5, 6 of 9 never reached MPI_Init"


@pytest.mark.parametrize("variable", RANK_VARIABLES)
def test_a_rank_process_marks_its_number_from_each_launchers_variable(tmp_path: Path, variable: str) -> None:
    """A real rank (``python -m emews run EXP --lease T`` with no launcher: MPI_Init makes it a world of
    one, or fails on a ``PMI_RANK`` without a PMI server; it exits either way) marks its number from the
    launcher's variable before MPI_Init, in the experiment's ``.start-T``."""
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARIABLES}
    env.update({variable: "3", **({} if variable == "SLURM_PROCID" else {"SLURM_PROCID": "0"})})
    ran = subprocess.run([sys.executable, "-m", "emews", "run", str(tmp_path), "--lease", "T"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode != 0, ran.stderr
    assert (tmp_path / ".start-T" / os.uname().nodename).read_text() == "3\n", ran.stderr
