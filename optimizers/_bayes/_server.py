"""The model process: hosts a bayes :class:`~._engine.Engine` for the optimizer rank.

Started by :class:`~._remote.ModelProcess` through
:class:`emews.processes.channel.ChildProcess`, which calls :func:`serve`. It imports
the engine (the slow part), says it is ready, then serves requests until its connection closes
(:func:`emews.processes.channel.serve_requests`):

* ``("adopt", state)``: the engine to carry on with, pickled by the optimizer (all its state);
* ``("propose", xs, ys, n, pending)``: tell the observations, propose ``n`` points.

Every reply is ``("ok", payload)`` or ``("error", traceback text)``.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

from emews.processes.channel import serve_requests


def _propose(engine: Any, xs: list, ys: list, n: int, pending: list) -> dict[str, Any]:
    engine.tell(xs, ys)
    points = engine.propose(n, pending)
    return {
        "points": points,
        "reserve": engine.reserve,
        "fits": engine.fits,
        "hyperfits": engine.hyperfits,
        "estimator": engine.estimator_name(),
        "n_proposed": engine.n_proposed,
    }


def _handlers() -> Mapping[str, Callable[..., Any]]:
    from emews.optimizers._bayes._engine import Engine  # noqa: F401  (the slow import)

    held: dict[str, Any] = {}

    def adopt(state: bytes) -> None:
        held["engine"] = pickle.loads(state)

    def propose(xs: list, ys: list, n: int, pending: list) -> dict[str, Any]:
        return _propose(held["engine"], xs, ys, n, pending)

    return {"adopt": adopt, "propose": propose}


def serve(conn: Connection, config: None) -> int:
    """Serve engine requests until the optimizer closes the connection (or is gone)."""
    return serve_requests(conn, _handlers)
