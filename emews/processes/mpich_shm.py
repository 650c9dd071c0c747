"""MPICH's shared-memory segments: which a process maps, and removing those no live process maps.

MPICH (pip's ``mpich`` wheel, under Hydra's ``mpiexec`` and ``srun --mpi=pmi2``) makes one segment per
node per job in ``/dev/shm``, ``mpich_shm_<hash of the job's PMI name>_<node>``, a few MB, and removes
it in ``MPI_Finalize``; a job whose ranks are killed (kill -9, the OOM killer, a batch system's kill
past its grace) leaves it, and a later job whose PMI name is the same (``srun``'s ``JOBID.STEP``, a
job id used again) attaches to it and hangs in ``MPI_Init``. Linux only (``/proc``); elsewhere, and
with MPI libraries that name their segments otherwise (Open MPI, Cray MPICH), nothing is found.

A segment is removed only when it is this user's (a segment is made mode 0600: only its owner's
processes can map it) and no live process maps it (every ``/proc/PID/maps`` this user can read).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: where MPICH makes its segments
SHM_DIR = Path("/dev/shm")
#: how MPICH names them
PREFIX = "mpich_shm_"
_MAPPED = re.compile(r"/dev/shm/(" + PREFIX + r"[0-9A-Za-z_]+)")


@dataclass(frozen=True)
class Segment:
    """One segment removed (or, on a dry run, to be): its name and size (bytes)."""

    name: str
    size: int


def mapped_by(maps_text: str) -> set[str]:
    """The MPICH segments named in a ``/proc/PID/maps`` text (removed ones too: their name is taken)."""
    return set(_MAPPED.findall(maps_text))


def mapped_here() -> list[str]:
    """The MPICH segments this process maps, sorted (``[]`` without ``/proc``)."""
    try:
        return sorted(mapped_by(Path("/proc/self/maps").read_text(encoding="ascii", errors="replace")))
    except OSError:
        return []


def mapped_by_live() -> set[str]:
    """The MPICH segments any live process maps, of those whose maps this user can read."""
    try:
        return mapped_by_pids(int(name) for name in os.listdir("/proc") if name.isdigit())
    except OSError:
        return set()


def mapped_by_pids(pids: Iterable[int]) -> set[str]:
    """The MPICH segments the processes ``pids`` map (those gone, or another user's, map none)."""
    found: set[str] = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps", encoding="ascii", errors="replace") as maps:
                text = maps.read()
        except OSError:
            continue
        if PREFIX in text:
            found |= mapped_by(text)
    return found


def remove_unmapped(
    names: Iterable[str], *, shm_dir: Path = SHM_DIR, older_than: float = 0.0, dry_run: bool = False
) -> list[Segment]:
    """Remove those of the segments ``names`` (in ``shm_dir``) that are this user's and that no live
    process maps (``older_than``: and last changed at least so many seconds ago: one being made maps
    it a moment later); the removed ones (``dry_run``: those that would be), by name."""
    wanted = sorted({name for name in names if name.startswith(PREFIX) and "/" not in name})
    wanted = [name for name in wanted if (shm_dir / name).exists()]  # a job that ended well removed its own
    if not wanted:
        return []  # no look at every process's maps (seconds on a busy node) for nothing
    live = mapped_by_live()
    now = time.time()
    removed = []
    for name in wanted:
        path = shm_dir / name
        try:
            info = path.lstat()
        except OSError:  # removed by its job's MPI_Finalize
            continue
        if name in live or info.st_uid != os.getuid() or now - info.st_mtime < older_than:
            continue
        try:
            if not dry_run:
                path.unlink()
        except OSError:
            continue
        removed.append(Segment(name, info.st_size))
    return removed


def present(shm_dir: Path = SHM_DIR) -> list[str]:
    """The MPICH segments in ``shm_dir`` (``[]`` where there is none)."""
    try:
        return sorted(name for name in os.listdir(shm_dir) if name.startswith(PREFIX))
    except OSError:
        return []


def megabytes(segments: Iterable[Segment]) -> str:
    """The total size of ``segments`` in words (``"4.2 MB"``)."""
    return f"{sum(segment.size for segment in segments) / 1e6:.1f} MB"
