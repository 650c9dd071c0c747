"""The MPI side of multi-rank tasks: where each rank runs (host and cores), and a team's own communicator.

Made once by every rank of the job (``comm.Dup`` and ``allgather`` are collective over all of
them) when the workflow's tasks may be larger than one rank. A team's communicator is then made
with ``MPI_Comm_create_group``, collective over the team's ranks only (``MPI_Comm_split`` would
need every rank of the job, and the others are busy with their own tasks).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Sequence
from typing import Any

from emews.core.errors import EmewsError
from emews.objective.team import Team


class TeamThreadLevel(EmewsError, RuntimeError):
    """The objective would call MPI from a thread the MPI library was not initialised for."""


class TeamWorld:
    """Every rank's host (``nodes``: rank -> host), the cores the launcher bound it to, and the
    communicator teams are made from."""

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        self._mpi = MPI
        self._comm = comm.Dup()  # teams' creation messages never meet the task traffic
        gathered = comm.allgather((socket.gethostname(), cpu_mask(os.sched_getaffinity(0))))
        self.nodes: dict[int, str] = {rank: host for rank, (host, _) in enumerate(gathered)}
        #: rank -> its cores, for the ranks the launcher bound to fewer cores than its host's ranks have
        self.cores: dict[int, tuple[int, ...]] = bound_cores(gathered)
        self._tags = max(1, int(self._comm.Get_attr(MPI.TAG_UB) or 32767))

    def team_cores(self, ranks: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """The cores of each of ``ranks`` (``()`` for a rank the launcher did not bind)."""
        return tuple(self.cores.get(rank, ()) for rank in ranks)

    def communicator(self, team: Team | None) -> Any:
        """A new communicator of ``team``'s ranks (team rank order), made by those ranks only;
        the caller frees it when the task ends. A single-rank task (``None``) gets ``COMM_SELF``."""
        mpi = self._mpi
        if team is None:
            return mpi.COMM_SELF
        if mpi.Query_thread() < mpi.THREAD_SERIALIZED and not mpi.Is_thread_main():
            raise TeamThreadLevel(
                f"ctx.comm needs MPI_THREAD_SERIALIZED or better to be used off the main thread; MPI was "
                f"initialised with level {mpi.Query_thread()} (leave mpi4py.rc.thread_level at its default)"
            )
        group = self._comm.Get_group()
        members = group.Incl(list(team.ranks))
        try:
            return self._comm.Create_group(members, tag=team.task_id % self._tags)
        finally:
            members.Free()
            group.Free()


def cpu_mask(cores: Iterable[int]) -> int:
    """``cores`` as one integer, bit ``c`` set for core ``c`` (what every rank sends: a few bytes)."""
    mask = 0
    for core in cores:
        mask |= 1 << core
    return mask


def bound_cores(gathered: Sequence[tuple[str, int]]) -> dict[int, tuple[int, ...]]:
    """From each rank's (host, :func:`cpu_mask` of its affinity): rank -> its cores, for the ranks
    bound to fewer cores than its host's ranks have together (a rank that may run on all of them,
    as under a launcher that binds nothing, is left out). Ranks with the same cores share one tuple."""
    union: dict[str, int] = {}
    for host, mask in gathered:
        union[host] = union.get(host, 0) | mask
    shared: dict[int, tuple[int, ...]] = {}
    found = {}
    for rank, (host, mask) in enumerate(gathered):
        if mask and mask != union[host]:
            found[rank] = shared.setdefault(mask, tuple(c for c in range(mask.bit_length()) if mask >> c & 1))
    return found
