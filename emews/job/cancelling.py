"""``emews cancel EXP --queued``: the queued tasks of a pooled experiment, cancelled (docs/postgres.md)."""

from __future__ import annotations

from pathlib import Path

from emews.core.errors import ConfigError
from emews.store import open_store
from emews.store.pool_queue import OptimizerRunning, pool_queue_of


def cancel_queued(exp_dir: Path) -> list[int]:
    """Cancel every task of ``exp_dir``'s shared queue that no pool claimed; their ids. Refused
    while an optimizer serves the experiment: it waits for those tasks' results, so cancel them
    from it (``evaluator.cancel``) or stop it first."""
    queue = pool_queue_of(open_store(exp_dir), exp_dir)
    try:
        try:
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
        queue.store.close()  # ends the session, and the lock with it
