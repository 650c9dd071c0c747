"""The worker ranks a pool went on without are told to the store with their times on the store's
clock (``PoolQueue.say_lost``): ``emews status`` shows those lost since the running pools started
(their start is the server's clock, ``now()``), and the launch's summary those lost since it
started. They were stored as the pool's host clock said: a pool on a host whose clock is behind
the server's had its lost ranks left out of both."""

from __future__ import annotations

import time

from emews.core.lost_ranks import LostRank
from emews.store.pool_queue import PoolQueue
from emews.store.postgres import PostgresStore

#: how far behind the server's clock the pool's host clock is (a host without NTP)
BEHIND = 3600.0


def test_a_pool_whose_clock_is_behind_the_stores_says_its_lost_ranks_in_the_stores_clock(
    stores: list[PostgresStore],
) -> None:
    optimizer = PoolQueue(stores[0])
    optimizer.enable()
    host_clock = lambda: time.time() - BEHIND  # noqa: E731
    pool_queue = PoolQueue(stores[1], host_clock=host_clock)
    pool = pool_queue.register("local", workers=2)
    (started,) = [row.started for row in optimizer.pools() if row.id == pool]
    lost = LostRank(1, host_clock(), "has not answered for 7 s", "rank 1 has not answered for 7 s", task=3)
    pool_queue.say_lost(pool, [lost])
    seen = optimizer.lost_ranks(since=started)  # what emews status shows of the running pool
    assert [(r.rank, r.task, r.pool) for r in seen] == [(1, 3, pool)]
    assert started <= seen[0].at <= optimizer.server_time()
