"""A pool's feeder: the optimizer side of an attached pool's distributor (docs/postgres.md, "Pools").

An attached pool's rank 0 runs today's :class:`~emews.runtime.distributor.Distributor` over a
:class:`~emews.core.queues.QueuePair` whose other end is not an optimizer but this feeder: it
claims batches from the experiment's shared queue (:class:`~emews.store.pool_queue.PoolQueue`)
into the pair, writes the outcomes the distributor delivers back to the store (one result per
task id), and renews the pool's leases by heartbeat while it works.
"""

from __future__ import annotations

import threading
import time

from emews.core.queues import QueuePair
from emews.store.pool_queue import PoolQueue


class PoolFeeder:
    """Keeps up to ``hold`` claimed tasks in the distributor's queue or running, stores their
    results, and heartbeats every third of ``lease_s``.

    While nothing is claimable the store is asked again every ``idle_s`` seconds (the feeder waits
    on the distributor's results in between, so a result wakes it at once)."""

    def __init__(
        self, queue: PoolQueue, queues: QueuePair, pool: int, *, hold: int, lease_s: float, idle_s: float = 0.5
    ) -> None:
        if hold < 1 or lease_s <= 0:
            raise ValueError(f"a pool holds at least one task under a positive lease (hold={hold}, lease_s={lease_s})")
        self._queue = queue
        self._queues = queues
        self.pool = pool
        self._hold = hold
        self._lease = lease_s
        self._idle = idle_s
        self._held: set[int] = set()  # claimed, result not yet stored
        self._renewed = time.monotonic()
        #: task ids whose result this pool stored / sent too late (another pool's stood)
        self.stored: list[int] = []
        self.late: list[int] = []

    @property
    def held(self) -> int:
        """Tasks claimed by this pool whose result it has not stored yet."""
        return len(self._held)

    def step(self) -> int:
        """One round: heartbeat if due, claim what fits, wait briefly for results and store them;
        how many tasks were claimed."""
        if time.monotonic() - self._renewed >= self._lease / 3:
            self._queue.renew(self.pool, self._lease)
            self._renewed = time.monotonic()
        claimed = (
            self._queue.claim(self.pool, self._hold - len(self._held), self._lease) if self.held < self._hold else []
        )
        if claimed:
            self._held.update(c.task.id for c in claimed)
            self._queues.submit([c.task for c in claimed])
        wait = min(self._idle, self._lease / 3)
        results = self._queues.collect(timeout=0 if claimed else wait)
        if results:
            stored = set(self._queue.complete(self.pool, results))
            for result in results:
                self._held.discard(result.id)
                (self.stored if result.id in stored else self.late).append(result.id)
        return len(claimed)

    def run(self, stop: threading.Event) -> None:
        """Feed until ``stop`` is set, then record that the pool ended (tasks it still held come
        back to the queue when their leases end)."""
        try:
            while not stop.is_set():
                self.step()
        finally:
            self._queue.stop(self.pool)
