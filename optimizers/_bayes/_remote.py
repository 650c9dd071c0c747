"""The proposer (and its surrogate model) in a process of its own.

Model fits and predictions run long stretches of C code that hold the GIL (tens
of milliseconds measured here); on the optimizer rank that held up the
distributor thread, so workers sat idle with their next task already queued.
In a child process the model can only compete for a core, never for the GIL.
The child is started with the ``spawn`` method (no ``fork`` of an MPI rank) and
is killed by the kernel if the optimizer rank dies.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import signal
from multiprocessing.managers import BaseManager, BaseProxy
from typing import Any

from ._engine import Engine
from ._proposer import Proposer
from ._space import SpaceMap


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _make_proposer(space: Any, seed: Any, engine_options: dict, reserve_size: int,
                   proposer_options: dict) -> Proposer:
    engine = Engine(SpaceMap(space), seed=seed, **engine_options)
    engine.reserve_size = reserve_size
    return Proposer(engine, **proposer_options).start()


class ProposerProxy(BaseProxy):
    """The main thread's handle on a :class:`Proposer` in the model process (same methods)."""

    _exposed_ = ("take", "take_fallback", "submitted", "tell", "request", "wait_ready", "close",
                 "is_busy", "is_fitted", "summary")

    def take(self, n: int) -> list:
        return self._callmethod("take", (n,))

    def take_fallback(self, n: int) -> list:
        return self._callmethod("take_fallback", (n,))

    def submitted(self, ids: Any, xs: Any) -> None:
        self._callmethod("submitted", (list(ids), list(xs)))

    def tell(self, ids: Any, xs: Any, ys: Any) -> None:
        self._callmethod("tell", (list(ids), list(xs), list(ys)))

    def request(self, n: int, limit: int | None = None) -> None:
        self._callmethod("request", (n, limit))

    def wait_ready(self, n: int = 1, timeout: float | None = None) -> None:
        self._callmethod("wait_ready", (n, timeout))

    def close(self) -> None:
        self._callmethod("close")

    @property
    def busy(self) -> bool:
        return self._callmethod("is_busy")

    @property
    def fitted(self) -> bool:
        return self._callmethod("is_fitted")

    def summary(self) -> dict:
        return self._callmethod("summary")


class _ModelProcess(BaseManager):
    pass


_ModelProcess.register("Proposer", _make_proposer, proxytype=ProposerProxy)


class RemoteProposer:
    """Starts the model process and a proposer in it; ``close`` ends both."""

    def __init__(self, space: Any, seed: Any, engine_options: dict, reserve_size: int,
                 proposer_options: dict) -> None:
        self._process = _ModelProcess(ctx=multiprocessing.get_context("spawn"))
        self._process.start(initializer=_die_with_parent)
        self.proxy: ProposerProxy = self._process.Proposer(space, seed, engine_options, reserve_size,
                                                           proposer_options)

    def close(self) -> dict:
        try:
            self.proxy.close()
            return self.proxy.summary()
        finally:
            self._process.shutdown()
