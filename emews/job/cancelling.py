"""``emews cancel EXP --queued``: the queued tasks of a pooled experiment, cancelled (docs/postgres.md)."""

from __future__ import annotations

from pathlib import Path

from emews.core.errors import ConfigError
from emews.store.pool_queue import OptimizerRunning, PoolQueue, queue_for_an_optimizer


def cancel_queued(exp_dir: Path) -> list[int]:
    """Cancel every task of ``exp_dir``'s shared queue that no pool claimed; their ids. Refused
    while an optimizer serves the experiment: it waits for those tasks' results, so cancel them
    from it (``evaluator.cancel``) or stop it first."""
    queue: PoolQueue | None = None
    try:
        try:
            queue = queue_for_an_optimizer(exp_dir)  # refused before the store is written while one runs
            queue.lock_optimizer()  # held while cancelling: no optimizer starts meanwhile
        except OptimizerRunning:
            raise ConfigError(
                "the experiment's optimizer is running and waits for its queued tasks",
                file=str(exp_dir),
                key="--queued",
                allowed="evaluator.cancel(ids) from the optimizer, or emews cancel EXP --queued once it stopped",
            ) from None
        return queue.cancel()
    finally:
        if queue is not None:
            queue.store.close()  # ends the session, and the lock with it
