"""A pool's training store (reports, checkpoints, attempts: :mod:`emews.store.trial_store`) whose
every call runs again on a new connection when the connection to PostgreSQL is lost (a server
restart, a failover), for ``store.retry`` seconds with back-off, as the pool's queue does
(:func:`emews.store.pool_queue.retried`); past that :class:`~emews.store.pool_queue.StoreLost`.

Each store method is one transaction (or one statement): a lost connection rolled it back, so it
runs again whole."""

from __future__ import annotations

import functools
from typing import Any

from emews.store.pool_queue import retried

#: attributes handed out as they are (closing, reconnecting, plain values)
AS_IS = frozenset({"close", "reconnect"})


def _call(wrapper: ReconnectingStore, name: str, /, *args: Any, **kwargs: Any) -> Any:
    return getattr(wrapper.store, name)(*args, **kwargs)


_retried_call = retried(_call)


class ReconnectingStore:
    """``store`` (a :class:`~emews.store.postgres.PostgresStore`) with its methods retried on a new
    connection for ``retry_s`` seconds."""

    def __init__(self, store: Any, retry_s: float) -> None:
        self.store = store
        self.retry_s = retry_s

    def reconnect(self) -> None:
        self.store.reconnect()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if name in AS_IS or name.startswith("_") or not callable(attr):
            return attr
        return functools.partial(_retried_call, self, name)
