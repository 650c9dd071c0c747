"""A multi-rank task as one of its members sees it, and the torch.distributed rendezvous.

A task of ``k`` ranks (``task.ranks``) runs on ``k`` worker ranks at once: its *team*. Every
member runs the objective; team rank 0's return value (and reports) are the task's result. In
process isolation each member's child joins the others through :meth:`Team.init_process_group`
(``ctx.process_group()``): team rank 0 picked a free port on its host and the team learnt it over
MPI before the children started the task.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

#: the place of the rank count in a launch line (``ctx.launch``)
RANKS = "{ranks}"

#: torch.distributed backends a site may name (``node.distributed_backend``): gloo on CPUs, NCCL on
#: NVIDIA GPUs and on AMD GPUs (RCCL ships under that name in ROCm builds), XCCL / oneCCL on Intel GPUs
BACKENDS = ("gloo", "nccl", "xccl", "ccl", "mpi")


@dataclass(frozen=True)
class Team:
    """The members of one multi-rank task, from one member's point of view."""

    task_id: int
    ranks: tuple[int, ...]  # world ranks of the members, in team-rank order (team rank 0 first)
    hosts: tuple[str, ...]  # host of each member
    rank: int  # this member's team rank
    port: int = 0  # rendezvous port on hosts[0] (0: not known yet)

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def master_addr(self) -> str:
        return self.hosts[0]

    @property
    def local_rank(self) -> int:
        """This member's index among the members on its host."""
        mine = self.hosts[self.rank]
        return sum(host == mine for host in self.hosts[: self.rank])

    @property
    def local_size(self) -> int:
        return self.hosts.count(self.hosts[self.rank])

    def environ(self) -> dict[str, str]:
        """The variables torch.distributed's ``env://`` rendezvous (and torchrun users) expect."""
        return {
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.port),
            "RANK": str(self.rank),
            "WORLD_SIZE": str(self.size),
            "LOCAL_RANK": str(self.local_rank),
            "LOCAL_WORLD_SIZE": str(self.local_size),
        }


def free_port(host: str = "") -> int:
    """A TCP port free on this host now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def solo_team(task_id: int) -> Team:
    """A one-member team (a size-1 task): ``ctx.process_group()`` still works, on its own."""
    return Team(task_id, (0,), ("127.0.0.1",), 0, free_port("127.0.0.1"))


def init_process_group(team: Team, backend: str = "gloo", timeout: float | None = None) -> Any:
    """Set MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK and initialise torch.distributed for
    ``team`` with ``backend``; return the default process group."""
    import torch.distributed as dist

    os.environ.update(team.environ())
    if dist.is_initialized():
        raise RuntimeError(
            "torch.distributed is already initialised in this process: call "
            "ctx.process_group() once per task (emews destroys it when the task ends)"
        )
    kwargs: dict[str, Any] = {}
    if timeout is not None:
        kwargs["timeout"] = timedelta(seconds=timeout)
    dist.init_process_group(
        backend, init_method=f"tcp://{team.master_addr}:{team.port}", rank=team.rank, world_size=team.size, **kwargs
    )
    return dist.group.WORLD


def destroy_process_group() -> None:
    """End torch.distributed in this process if a task started it."""
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_initialized():
        dist.destroy_process_group()
