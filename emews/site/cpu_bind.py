"""``{cpu_bind_list}`` in ``launcher.args``: one core list per node-local rank, each on the socket(s)
of its GPUs, as ALCF's ``get_cpu_bind_aurora`` writes them for PALS ``mpiexec --cpu-bind=list:``.

A node of ``node.cores`` physical cores in ``node.sockets`` equal sockets (numbered in order),
less ``node.reserved_cores`` (the system's: Aurora's 0 and 52). A rank with GPUs sits on the
sockets of its GPUs (GPU ``g`` of ``G`` on socket ``g * sockets // G``); a rank without on an even
share of the sockets in rank order. The ranks on a socket split its usable cores evenly, in rank
order, from its first usable core (the remainder stays idle, as get_cpu_bind_aurora leaves it).

``{cpu_bind}``, an argument of its own, is the whole PALS option for those lists: the guide's
``--depth=D --cpu-bind depth`` where that binds the same cores (local rank ``r`` on cores
``rD..rD+D-1``, as on polaris with a rank per NUMA domain), else ``--cpu-bind=list:...``.
"""

from __future__ import annotations

from emews.core.errors import ConfigError

PLACEHOLDER = "{cpu_bind_list}"
OPTION = "{cpu_bind}"


def cpu_bind_list(
    ranks_per_node: int, cores: int, sockets: int, reserved: list[int], gpus: int, gpus_per_rank: int
) -> str:
    """The ``A-B:C-D:...`` list of ``ranks_per_node`` ranks (ConfigError where a socket has fewer
    usable cores than ranks on it)."""
    return cpu_bind_text(rank_cores(ranks_per_node, cores, sockets, reserved, gpus, gpus_per_rank))


def rank_cores(
    ranks_per_node: int, cores: int, sockets: int, reserved: list[int], gpus: int, gpus_per_rank: int
) -> list[list[int]]:
    """The cores of each node-local rank, as :func:`cpu_bind_list` lists them."""
    per_socket = cores // sockets
    usable = [[c for c in range(k * per_socket, (k + 1) * per_socket) if c not in reserved] for k in range(sockets)]
    homes = [_sockets_of(rank, ranks_per_node, sockets, gpus, gpus_per_rank) for rank in range(ranks_per_node)]
    bound: list[list[int]] = [[] for _ in range(ranks_per_node)]
    for socket in range(sockets):
        on_it = [rank for rank, home in enumerate(homes) if socket in home]
        if not on_it:
            continue
        share = len(usable[socket]) // len(on_it)
        if share < 1:
            raise ConfigError(
                f"{len(on_it)} ranks on socket {socket} of a node have {len(usable[socket])} usable cores "
                f"({PLACEHOLDER} binds each rank to cores of its own)",
                key="launcher.workers_per_node",
                allowed=f"1..{min(map(len, usable)) * sockets - 1}",
            )
        for place, rank in enumerate(on_it):
            bound[rank] += usable[socket][place * share : (place + 1) * share]
    return bound


def cpu_bind_text(bound: list[list[int]]) -> str:
    """``[[1, 2], [3]]`` -> ``1-2:3``."""
    return ":".join(_ranges(cores_of) for cores_of in bound)


def cpu_bind_args(bound: list[list[int]]) -> list[str]:
    """PALS mpiexec's arguments binding local rank ``r`` to ``bound[r]``: ``--depth=D --cpu-bind
    depth`` where that is what depth binding gives, else ``--cpu-bind=list:`` with the lists."""
    depth = len(bound[0]) if bound else 0
    if depth and all(cores == list(range(r * depth, (r + 1) * depth)) for r, cores in enumerate(bound)):
        return [f"--depth={depth}", "--cpu-bind", "depth"]
    return [f"--cpu-bind=list:{cpu_bind_text(bound)}"]


def _sockets_of(rank: int, ranks_per_node: int, sockets: int, gpus: int, gpus_per_rank: int) -> set[int]:
    if gpus and gpus_per_rank:
        return {g * sockets // gpus for g in range(rank * gpus_per_rank, (rank + 1) * gpus_per_rank)}
    first = rank * sockets // ranks_per_node
    return set(range(first, max(first + 1, (rank + 1) * sockets // ranks_per_node)))


def _ranges(cores: list[int]) -> str:
    """``[1, 2, 3, 53, 54]`` -> ``1-3,53-54``."""
    parts: list[str] = []
    start = prev = cores[0]
    for core in [*cores[1:], None]:
        if core is not None and core == prev + 1:
            prev = core
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if core is not None:
            start = prev = core
    return ",".join(parts)
