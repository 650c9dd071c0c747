"""Which ranks of a job reached ``MPI_Init``: each rank's mark, written just before it, read by the
start's watch (:mod:`emews.job.job_start`) when the start is past its bound, to name the ranks that
never came (a rank stopped, a node that froze).

A job's marks are a folder of the experiment's (a pool's: of its folder), one file per node
(``os.uname().nodename``) to which each rank on it appends its rank number and a newline: at 100k
ranks, a file per node, not per rank, on the parallel file system; one ``open`` and one ``write`` per
rank. The folder is made by the first rank that finds it missing and removed by the watch once the
job started (or was stopped). The rank's number before ``MPI_Init`` is the launcher's variable
(:data:`RANK_VARIABLES`); a rank without one marks ``?``, and is then counted, not named.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

#: where launchers put a rank's number before ``MPI_Init``, in the order read: Hydra's and Cray PALS's
#: ``mpiexec``, PMIx, Open MPI, ``jsrun``, then ``srun`` (whose ``SLURM_PROCID`` a batch script's
#: ``mpiexec`` passes on unchanged: 0 in every rank)
RANK_VARIABLES = ("PMI_RANK", "PALS_RANKID", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "JSM_NAMESPACE_RANK", "SLURM_PROCID")
#: a pool's marks folder, in the pool's
POOL_MARKS = ".start"
#: how many missing ranks a line names; the rest are counted
NAMED = 8


def marks_folder(exp_dir: Path, lease_token: str | None, pool_dir: Path | None = None) -> Path | None:
    """Where the ranks of the job of ``exp_dir`` started with ``lease_token`` (of its pool at
    ``pool_dir``, which has no lease) mark their start; ``None``: a job started by hand, unwatched."""
    if pool_dir is not None:
        return Path(pool_dir) / POOL_MARKS
    return Path(exp_dir) / f".start-{lease_token}" if lease_token else None


def mark_start(folder: Path, environ: Mapping[str, str] = os.environ) -> None:
    """This rank reached ``MPI_Init``: append its number to its node's file in ``folder``. Best effort:
    a mark that cannot be written only leaves the rank unnamed, should the start be stuck."""
    rank = next((environ[name].strip() for name in RANK_VARIABLES if environ.get(name, "").strip().isdigit()), "?")
    path = os.path.join(folder, os.uname().nodename)
    for first in (True, False):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileNotFoundError:  # the job's first rank here: make the folder, once
            if not first:
                return
            try:
                os.mkdir(folder)
            except FileExistsError:
                pass
            except OSError:
                return
            continue
        except OSError:
            return
        try:
            os.write(fd, f"{rank}\n".encode())
        except OSError:
            pass
        finally:
            os.close(fd)
        return


def missing(folder: Path, ranks: int) -> str:
    """Which of the job's ``ranks`` ranks have not marked their start in ``folder``, in words."""
    seen: set[int] = set()
    unnamed = 0
    try:
        files = [entry for entry in os.scandir(folder) if entry.is_file()]
    except OSError:
        files = []
    for entry in files:
        try:
            text = Path(entry.path).read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        for line in text.split("\n"):
            if line.isdigit():
                seen.add(int(line))
            elif line:
                unnamed += 1
    came = len(seen) + unnamed
    if came >= ranks:
        return f"all {ranks} ranks reached MPI_Init, which did not end"
    if not came:
        return f"none of the {ranks} ranks reached MPI_Init"
    if unnamed:
        return f"{ranks - came} of {ranks} ranks never reached MPI_Init"
    gone = [rank for rank in range(ranks) if rank not in seen]
    named = ", ".join(str(rank) for rank in gone[:NAMED])
    more = f" and {len(gone) - NAMED} more" if len(gone) > NAMED else ""
    return f"rank{'s' if len(gone) > 1 else ''} {named}{more} of {ranks} never reached MPI_Init"


def stuck_file(folder: Path) -> Path:
    """Where a batch job's watch of its start leaves why it stopped the job (``folder``: the job's
    marks), for the job's exit command to say (:func:`~emews.job.job_start.batch_job_exit`)."""
    return folder.parent / f"{folder.name}.stuck"


def remove(folder: Path) -> None:
    """The job started or was stopped: its marks are done with."""
    shutil.rmtree(folder, ignore_errors=True)
