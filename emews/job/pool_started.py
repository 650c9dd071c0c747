"""Whether an attached pool's job started: its rank 0 registered the pool in the experiment's store
(a row of ``pools``), which it does once every rank passed ``MPI_Init``. The ``rank_zero`` of the
watch of a pool's start (:class:`~emews.job.job_start.JobStart`): ``emews attach``'s on a local site,
``job.sh``'s beside the launcher of a batch pool."""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path

from emews.config.lease import Owner
from emews.processes.tree import age, descendants
from emews.store.pool_queue import PoolQueue, queue_for_a_pool

#: seconds a look at the store is tried again before it fails (then the next look asks again)
LOOK_RETRY_SECONDS = 0.0
#: how much earlier than its launcher's start (on the store's clock) a batch pool may have registered
#: and still be this start's: the two clocks are read one query apart; an earlier start of the job (a
#: requeued one) registered its pool before that start ended, and the job was then queued again
REGISTERED_SLACK_SECONDS = 1.0


class PoolLead:
    """Where the rank 0 of the pool of ``exp_dir`` that this watch looks for is, once it has
    registered (``None`` before). ``job_id``: the batch job the pool runs in (its watch runs beside its
    launcher, maybe not on rank 0's node): the pool that registered with that job id since ``below`` (its
    launcher) started: a requeued job's earlier start registered one too, under the same id; without one, the
    registered pool process below ``below`` (default: this one; ``emews attach`` on a local site, where
    it hands a stop that Hydra's ``mpiexec`` dropped as the pool started to rank 0). A store that does not answer
    raises :class:`~emews.core.errors.EmewsError`: the watch cannot tell, and asks again (the pool's
    rank 0 may well have registered). The store is opened at the first look; :meth:`close` closes it."""

    def __init__(self, exp_dir: Path, job_id: str | None = None, *, below: int | None = None) -> None:
        self._exp_dir = exp_dir
        self._job_id = job_id
        self._below = os.getpid() if below is None else below
        self._queue: PoolQueue | None = None
        self._since: float | None = None  # the launcher's start on the store's clock (a batch pool's)

    def __call__(self) -> Owner | None:
        if self._queue is None:
            self._queue = queue_for_a_pool(self._exp_dir)
            self._queue.retry_s = LOOK_RETRY_SECONDS
        registered = self._queue.processes()
        if self._job_id is not None:
            since = self._launcher_started(self._queue)
            ours = [
                (row, registered.get(row.id))
                for row in self._queue.pools()
                if row.job_id == self._job_id and row.started is not None and row.started >= since
            ]
            return next((Owner(row.host or "", *process) for row, process in ours if process is not None), None)
        below = set(descendants(self._below))
        found = (Owner(socket.gethostname(), pid, started) for pid, started in registered.values() if pid in below)
        return next((owner for owner in found if owner.alive()), None)

    def _launcher_started(self, queue: PoolQueue) -> float:
        """When the launcher started, on the store's clock, less :data:`REGISTERED_SLACK_SECONDS` (read
        at the first look; a launcher already gone: any time)."""
        if self._since is None:
            running = age(self._below)
            self._since = -math.inf if running is None else queue.server_time() - running - REGISTERED_SLACK_SECONDS
        return self._since

    def close(self) -> None:
        if self._queue is not None:
            self._queue.store.close()
