"""The MPICH shared-memory segments a job made, recorded by its ranks and removed at the job's end.

A job whose ranks are killed leaves its node's segment in ``/dev/shm`` (:mod:`emews.processes.mpich_shm`:
MBs each, and a later job of the same PMI name hangs on it). Right after ``MPI_Init`` the first rank of
each node writes the names its process maps to a file of the node's (``os.uname().nodename``) in the
job's records folder; where the job ended (the launching process, ``emews launch``/``attach`` on
local; ``job.sh``'s end step in a batch job), :func:`sweep` removes the recorded segments of that node
that no live process maps (a job that ended normally removed its own: nothing is left to do), then the
folder. What a job killed whole recorded (no end step ran) is removed by the experiment's next job on its
node (:func:`sweep_earlier`: before a local job starts, in a batch job's end step), what an attached pool
killed whole recorded by the experiment's job (:func:`sweep_pools`: also where a local one ends). A batch
job's other nodes are the site's to clean (docs/sites.md: an epilog line).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from emews.processes.mpich_shm import SHM_DIR, Segment, mapped_here, remove_unmapped

#: an attached pool's records folder, in the pool's
POOL_RECORDS = ".shm"


def records_folder(exp_dir: Path, lease_token: str | None, pool_dir: Path | None = None) -> Path | None:
    """Where the ranks of the job of ``exp_dir`` started with ``lease_token`` (of its pool at
    ``pool_dir``) record their node's segments; ``None``: a job started by hand, not swept."""
    if pool_dir is not None:
        return Path(pool_dir) / POOL_RECORDS
    return Path(exp_dir) / f".shm-{lease_token}" if lease_token else None


def record(folder: Path, names: Iterable[str] | None = None) -> None:
    """Write the MPICH segments this rank maps (``names``: those given) to its node's file in
    ``folder`` (one per node: its first rank calls this). Best effort: a record that cannot be
    written leaves the segment to ``emews clean-shm``."""
    names = mapped_here() if names is None else sorted(names)
    if not names:  # not Linux, not MPICH, or an MPI library that names its shared memory otherwise
        return
    try:
        folder.mkdir(exist_ok=True)
        with open(folder / os.uname().nodename, "a", encoding="ascii") as out:
            out.write("".join(f"{name}\n" for name in names))
    except OSError:
        pass


def sweep(folder: Path | None) -> list[Segment]:
    """The job of ``folder`` (:func:`records_folder`) ended: remove the segments its ranks on this node
    recorded that no live process maps, then the folder; the removed ones."""
    if folder is None:
        return []
    removed = _sweep_node(folder)
    shutil.rmtree(folder, ignore_errors=True)
    return removed


def sweep_earlier(exp_dir: Path, lease_token: str) -> list[Segment]:
    """Before the job of ``lease_token`` starts: what earlier jobs of ``exp_dir`` recorded and nobody
    swept (their launcher killed with them: ``kill -9`` of the whole job, a node lost; a copy or a
    moved folder keeps the records): this node's segments that no live process maps, and this node's
    record; a records folder left empty goes too (another node's record is that node's to sweep); and
    what its pools killed whole left (:func:`sweep_pools`)."""
    removed: list[Segment] = []
    for folder in sorted(Path(exp_dir).glob(".shm-*")):
        if folder.name == f".shm-{lease_token}":
            continue
        removed += _sweep_node(folder)
        (folder / os.uname().nodename).unlink(missing_ok=True)
        try:
            folder.rmdir()
        except OSError:  # another node's record is in it
            pass
    return removed + sweep_pools(exp_dir)


def sweep_pools(exp_dir: Path) -> list[Segment]:
    """What the attached pools of ``exp_dir`` recorded on this node that no live process maps (a pool
    killed whole ran no end step: ``kill -9`` of its ``emews attach``, its batch job SIGKILLed): removed.
    A live pool's segments are mapped, and kept; a node's record goes once none of the segments it
    names is left, its folder once empty (a record not written yet is not looked at)."""
    removed: list[Segment] = []
    for folder in sorted(Path(exp_dir).glob(f"pools/*/{POOL_RECORDS}")):
        record = folder / os.uname().nodename
        if not record.exists():
            continue
        removed += _sweep_node(folder)
        if not any((SHM_DIR / name).exists() for name in _names(record)):
            record.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another node's record is in it
                folder.rmdir()
    return removed


def _sweep_node(folder: Path) -> list[Segment]:
    """The segments this node's record in ``folder`` names that no live process maps, removed."""
    return remove_unmapped(_names(folder / os.uname().nodename))


def _names(record: Path) -> list[str]:
    """The segments a node's record names (``[]`` when there is none)."""
    try:
        return record.read_text(encoding="ascii", errors="replace").split()
    except OSError:
        return []
