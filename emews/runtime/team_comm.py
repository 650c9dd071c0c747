"""The MPI side of multi-rank tasks: where each rank runs, and a team's own communicator.

Made once by every rank of the job (``comm.Dup`` and ``allgather`` are collective over all of
them) when the workflow's tasks may be larger than one rank. A team's communicator is then made
with ``MPI_Comm_create_group``, collective over the team's ranks only (``MPI_Comm_split`` would
need every rank of the job, and the others are busy with their own tasks).
"""

from __future__ import annotations

import socket
from typing import Any

from emews.core.errors import EmewsError
from emews.objective.team import Team


class TeamThreadLevel(EmewsError, RuntimeError):
    """The objective would call MPI from a thread the MPI library was not initialised for."""


class TeamWorld:
    """Every rank's host (``nodes``: rank -> host) and the communicator teams are made from."""

    def __init__(self, comm: Any) -> None:
        from mpi4py import MPI

        self._mpi = MPI
        self._comm = comm.Dup()  # teams' creation messages never meet the task traffic
        self.nodes: dict[int, str] = dict(enumerate(comm.allgather(socket.gethostname())))
        self._tags = max(1, int(self._comm.Get_attr(MPI.TAG_UB) or 32767))

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
