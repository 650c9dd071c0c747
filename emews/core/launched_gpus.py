"""A rank that ``ctx.launch`` started takes one team member's GPUs (and cores), then runs the program.

``python -m emews.core.launched_gpus BINDING MEMBERS PROGRAM [ARG ...]``: ``BINDING`` is the site's
:class:`~emews.core.gpu_binding.GpuBinding` as JSON, ``MEMBERS`` JSON of host -> the team's members
on that host, in team order, each ``{"gpus": [names], "cores": [ids]}`` (cores: where the site
binds ranks to cores, ``{cpu_bind_list}``; else ``[]``). The launched rank with node-local rank
``i`` on a host takes that host's ``i``-th member's (in turn where more ranks than members were
launched there), so that the ranks of a team's program use the GPUs of the team's slots, one
member's share each, instead of every GPU the launcher left visible (``srun --overlap`` steps see
all the job's GPUs) or team rank 0's own share (inherited), and run on the cores next to them
instead of those of the launched rank's own index on the node (the launcher's list).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any, NamedTuple

from emews.core.gpu_binding import GpuBinding, local_rank

MODULE = "emews.core.launched_gpus"


class Member(NamedTuple):
    """One team member's GPUs (names as ``node.gpu_ids`` spells them) and cores."""

    gpus: list[str]
    cores: list[int]


def wrapped(binding: GpuBinding, members: Mapping[str, Sequence[Member]], python: str) -> list[str]:
    """The command line prefix that runs a launched program through this module."""
    fields = {**asdict(binding), "names": list(binding.names)}
    hosts = {host: [m._asdict() for m in found] for host, found in members.items()}
    return [python, "-m", MODULE, json.dumps(fields), json.dumps(hosts)]


def member_of(members: Mapping[str, Sequence[Mapping[str, Any]]], host: str, rank_on_host: int) -> Member | None:
    """The member whose GPUs and cores the launched rank ``rank_on_host`` on ``host`` takes
    (``None``: the team has none there, so the rank keeps what the launcher gave it)."""
    found = members.get(host)
    if not found:
        return None
    member = found[rank_on_host % len(found)]
    return Member(list(member.get("gpus", [])), [int(c) for c in member.get("cores", [])])


def main(argv: Sequence[str]) -> None:
    """Take this rank's member's GPUs and cores, and replace this process with the program."""
    if len(argv) < 3:
        sys.exit(f"usage: python -m {MODULE} BINDING MEMBERS PROGRAM [ARG ...]")
    fields, members, program = json.loads(argv[0]), json.loads(argv[1]), list(argv[2:])
    binding = GpuBinding(**{**fields, "names": tuple(fields.get("names", ()))})
    member = member_of(members, socket.gethostname(), local_rank())
    if member is not None and member.gpus:
        os.environ[binding.env_var] = binding.spell(member.gpus, os.environ)
    if member is not None and member.cores:
        with contextlib.suppress(OSError, AttributeError):  # cores outside its cpuset: the launcher's stand
            os.sched_setaffinity(0, member.cores)
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        sys.exit(f"ctx.launch: cannot start {program[0]}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
