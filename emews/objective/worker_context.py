"""What an objective's ``setup(ctx)`` knows: the worker it prepares (``ctx``, a :class:`WorkerContext`).

``setup`` runs once per worker process, before any task, so its context is the worker's, not a
task's (a task's is ``run``'s second argument). The site's GPU binding is applied before it runs:
``gpu_ids`` are the node's GPUs the worker was given, and its environment names them as the site
binds them (``CUDA_VISIBLE_DEVICES``, or the site's ``node.gpu_env``), so ``cuda:0`` in ``setup`` is
the worker's first GPU. A ``setup()`` without an argument is called as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class WorkerContext:
    """The worker ``setup(ctx)`` runs for: its rank in its job, host, rank among its node's ranks
    (``local_rank``, as MPI numbers them on the node) and GPU indices on the node (``[]``: none)."""

    rank: int
    host: str
    local_rank: int
    gpu_ids: list[int] = field(default_factory=list)
