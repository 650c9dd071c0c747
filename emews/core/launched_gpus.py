"""A rank that ``ctx.launch`` started takes its share of its team's GPUs, then runs the program.

``python -m emews.core.launched_gpus BINDING SHARES PROGRAM [ARG ...]``: ``BINDING`` is the site's
:class:`~emews.core.gpu_binding.GpuBinding` as JSON, ``SHARES`` JSON of host -> the GPU names of
the team's members on that host, in team order. The
launched rank with node-local rank ``i`` on a host gets that host's ``i``-th list (reused in
turn where more ranks than members were launched there), so that the ranks of a team's program
use the GPUs of the team's slots, one member's share each, instead of every GPU the launcher left
visible (``srun --overlap`` steps see all the job's GPUs) or team rank 0's own share (inherited).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict

from emews.core.gpu_binding import GpuBinding, local_rank

MODULE = "emews.core.launched_gpus"


def wrapped(binding: GpuBinding, shares: Mapping[str, Sequence[Sequence[str]]], python: str) -> list[str]:
    """The command line prefix that runs a launched program through this module."""
    fields = {**asdict(binding), "names": list(binding.names)}
    hosts = {host: [list(share) for share in lists] for host, lists in shares.items()}
    return [python, "-m", MODULE, json.dumps(fields), json.dumps(hosts)]


def share_of(shares: Mapping[str, Sequence[Sequence[str]]], host: str, rank_on_host: int) -> list[str] | None:
    """The GPU names of the launched rank ``rank_on_host`` on ``host`` (``None``: the team has no
    member there, so the environment is left as the launcher set it)."""
    lists = shares.get(host)
    if not lists:
        return None
    return list(lists[rank_on_host % len(lists)])


def main(argv: Sequence[str]) -> None:
    """Set the binding's variable to this rank's share and replace this process with the program."""
    if len(argv) < 3:
        sys.exit(f"usage: python -m {MODULE} BINDING SHARES PROGRAM [ARG ...]")
    fields, shares, program = json.loads(argv[0]), json.loads(argv[1]), list(argv[2:])
    binding = GpuBinding(**{**fields, "names": tuple(fields.get("names", ()))})
    share = share_of(shares, socket.gethostname(), local_rank())
    if share is not None:
        os.environ[binding.env_var] = binding.spell(share, os.environ)
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        sys.exit(f"ctx.launch: cannot start {program[0]}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
