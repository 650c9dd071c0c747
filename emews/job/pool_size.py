"""The workers a pooled experiment's optimizer is sized for (docs/postgres.md, "Pools").

The optimizers' defaults that depend on the workers (``ga``'s population and strategy, ``mbo``'s
batch, ``hyperspace``'s subspaces) are fixed when the optimizer starts. With pools its tasks run on
every pool of the experiment, not on the job's own workers alone: the launch's ``--pools K`` of
``--workers`` each, and the pools running then (those ``emews attach`` added later too).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from emews.config.experiment import read_info
from emews.core.wording import counted

if TYPE_CHECKING:
    from emews.store.pool_queue import PoolQueue


def launched_size(exp_dir: Path) -> tuple[int, str]:
    """The launch's pools times their workers (``--pools K --workers W``), and in words; 0 when the
    launch recorded no workers."""
    info = read_info(exp_dir)
    workers, pools = info.get("workers"), info.get("pools") or 1
    if not isinstance(workers, int) or not isinstance(pools, int) or workers < 1 or pools < 1:
        return 0, "the launch recorded no workers"
    return workers * pools, f"the launch's {counted(pools, 'pool')} of {counted(workers, 'worker')}"


def pooled_size(exp_dir: Path, queue: PoolQueue, lease_s: float, own: int = 0) -> tuple[int, str]:
    """The workers an optimizer starting now is sized for, and in words why: ``own`` (the workers
    of its job, not registered as a pool yet; ``emews serve``: none) and those of the pools running
    now (registered, not stopped, a heartbeat within ``lease_s``), at least the launch's pools
    (:func:`launched_size`: pools it started may not have joined yet); at least 1."""
    now = queue.server_time()
    running = [
        pool
        for pool in queue.pools()
        if pool.stopped is None and pool.heartbeat is not None and pool.heartbeat >= now - lease_s
    ]
    here = own + sum(pool.workers for pool in running)
    launched, why = launched_size(exp_dir)
    if here <= launched:
        return max(launched, 1), why
    parts = ([f"its own {own}"] if own else []) + [
        f"the {counted(len(running), 'pool')} running now" if running else "no pool running now"
    ]
    return here, " and ".join(parts)
