"""The GA's model process: hosts a :class:`~.breeding.Breeding` for a wide steady-state run.

Started by :class:`~.wide.WideBreeder` through :class:`emews.processes.channel.ChildProcess`
with ``(options, space, seed)`` as its config. It imports DEAP and the screen (the slow part,
scikit-learn at the first fit), says it is ready, then serves until its connection closes:

* ``("breed", rows, members, n, scale, factor)``: learn ``rows``, breed ``n`` children of
  ``members``, each the pick of ``factor`` bred; the reply is ``(children, counters)``.

Every reply is ``("ok", payload)`` or ``("error", traceback text)``.
"""

from __future__ import annotations

import os
import traceback
from multiprocessing.connection import Connection
from typing import Any

from emews.processes.channel import Ready


def serve(conn: Connection, config: Any) -> int:
    """Serve breeding requests until the optimizer closes the connection (or is gone)."""
    try:
        from emews.optimizers._ga.breeding import Breeding

        options, space, seed = config
        breeding = Breeding(options, space, seed)
    except BaseException:
        conn.send(Ready(traceback.format_exc(limit=3)))
        return 1
    conn.send(Ready())
    while True:
        try:
            kind, *args = conn.recv()
        except (EOFError, OSError):  # the optimizer is done (or gone)
            conn.close()
            os._exit(0)  # nothing to clean up; finalizing scipy and friends takes 0.2 s
        try:
            if kind != "breed":
                raise ValueError(f"unknown request {kind!r}")
            rows, members, n, scale, factor = args
            breeding.learn(rows)
            reply: Any = (breeding.breed(members, n, scale, factor), breeding.counters())
        except Exception:
            conn.send(("error", traceback.format_exc()))
            continue
        conn.send(("ok", reply))
