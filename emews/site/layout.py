"""Where ranks go: the numbers every launcher and scheduler template needs.

Rank layout (one rule for every launcher): the job runs ``workers + 1`` ranks;
rank 0 is the optimizer.  Each node offers ``workers_per_node + 1`` rank slots
filled in order (block placement), so node 0 holds the optimizer and
``workers_per_node`` workers and the optimizer never displaces a worker.  A
rank's node-local slot is its node-local rank, and with ``gpus_per_worker = g``
slot ``s`` owns GPUs ``s*g .. s*g+g-1``: a GPU node needs
``(workers_per_node + 1) * g <= gpus``.  On a local (single-node, no scheduler)
site, rank ``r > 0`` owns slot ``r - 1``, so ``workers * g <= gpus``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """Ranks of one job and how they sit on nodes (``ranks_per_node`` None: not placed)."""

    nodes: int
    ranks: int
    ranks_per_node: int | None
    cores_per_node: int | None
    gpus_per_node: int
    gpus_per_rank: int
    gpu_binding: str

    @property
    def cores_per_rank(self) -> int | None:
        if self.cores_per_node is None or not self.ranks_per_node:
            return None
        return max(1, self.cores_per_node // self.ranks_per_node)
