"""The GA's model process: hosts a :class:`~.breeding.Breeding` for a wide steady-state run.

Started by :class:`~.wide.WideBreeder` through :class:`emews.processes.channel.ChildProcess`
with ``(options, space, seed)`` as its config. It imports DEAP and the screen (the slow part,
scikit-learn at the first fit), says it is ready, then serves until its connection closes
(:func:`emews.processes.channel.serve_requests`):

* ``("breed", rows, members, n, scale, factor)``: learn ``rows``, breed ``n`` children of
  ``members``, each the pick of ``factor`` bred; the reply is ``(children, counters)``.

Every reply is ``("ok", payload)`` or ``("error", traceback text)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

from emews.processes.channel import serve_requests


def _handlers(config: Any) -> Mapping[str, Callable[..., Any]]:
    from emews.optimizers._ga.breeding import Breeding

    options, space, seed = config
    breeding = Breeding(options, space, seed)

    def breed(rows: Any, members: Any, n: int, scale: Any, factor: int) -> tuple[Any, Any]:
        breeding.learn(rows)
        return breeding.breed(members, n, scale, factor), breeding.counters()

    return {"breed": breed}


def serve(conn: Connection, config: Any) -> int:
    """Serve breeding requests until the optimizer closes the connection (or is gone)."""
    return serve_requests(conn, lambda: _handlers(config))
