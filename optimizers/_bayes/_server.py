"""The model process: hosts a bayes :class:`~._engine.Engine` for the optimizer rank.

Started by :class:`~._remote.ModelProcess` through
:class:`emews.processes.channel.ChildProcess`, which calls :func:`serve`. It imports
the engine (the slow part), says it is ready, then serves requests until its connection closes:

* ``("adopt", state)``: the engine to carry on with, pickled by the optimizer (all its state);
* ``("propose", xs, ys, n, pending)``: tell the observations, propose ``n`` points.

Every reply is ``("ok", payload)`` or ``("error", traceback text)``.
"""

from __future__ import annotations

import os
import pickle
import traceback
from multiprocessing.connection import Connection
from typing import Any

from emews.processes.channel import Ready


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


def serve(conn: Connection, config: None) -> int:
    """Serve engine requests until the optimizer closes the connection (or is gone)."""
    try:
        from emews.optimizers._bayes._engine import Engine  # noqa: F401  (the slow import)
    except BaseException:
        conn.send(Ready(traceback.format_exc(limit=3)))
        return 1
    conn.send(Ready())
    engine: Any = None
    while True:
        try:
            kind, *args = conn.recv()
        except (EOFError, OSError):  # the optimizer is done (or gone)
            conn.close()
            os._exit(0)  # nothing to clean up; finalizing scipy and friends takes 0.2 s
        try:
            if kind == "adopt":
                engine = pickle.loads(args[0])
                reply: Any = None
            elif kind == "propose":
                reply = _propose(engine, *args)
            else:
                raise ValueError(f"unknown request {kind!r}")
        except Exception:
            conn.send(("error", traceback.format_exc()))
            continue
        conn.send(("ok", reply))
