"""Thread counts of a worker: one worker's math libraries use the cores it owns, no more.

Several worker ranks share a node; each OpenMP/BLAS/torch pool sized to the
whole node oversubscribes it (two threads per worker on two cores made training
9-12x slower here). Variables the site or the user already set are left alone.
"""

from __future__ import annotations

import os

from emews.core.cores import usable_cores, whole_cores

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


def cores_per_worker(ranks_on_node: int, node_cores: int | None = None) -> int:
    """The cores one rank may use: the node's cores (the site's ``node.cores``, else the
    cores this process may run on, capped by its cgroup's CPU quota) shared among the ranks on
    the node, at least 1."""
    cores = node_cores or whole_cores(usable_cores())
    return max(1, cores // max(1, ranks_on_node))


def limit_threads(threads: int, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Set each thread-count variable that is not set yet (here and for children); return those set."""
    env = os.environ if environ is None else environ
    chosen = {var: str(threads) for var in THREAD_VARIABLES if var not in env}
    env.update(chosen)
    if chosen and environ is None:
        try:  # pools of libraries imported already (numpy's BLAS) read the variables only at load
            from threadpoolctl import threadpool_limits

            threadpool_limits(threads)
        except ImportError:
            pass
    return chosen
