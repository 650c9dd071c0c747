"""The model process: hosts a bayes :class:`~._engine.Engine` for the optimizer rank.

Started by :class:`~._remote.ModelProcess` as
``python -m emews.optimizers._bayes._server PARENT_PID READ_FD WRITE_FD``. It imports the
engine (the slow part), says ``ready``, then serves requests until its command pipe closes:

* ``("adopt", engine)``: the engine to carry on with (pickled, with all its state);
* ``("propose", xs, ys, n, pending)``: tell the observations, propose ``n`` points.

Every reply is ``("ok", payload)`` or ``("error", traceback text)``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any


def _die_with(parent_pid: int) -> None:
    """Be killed when the optimizer rank dies, even in the middle of a fit."""
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:   # it died before the signal was armed
        os._exit(1)


def _propose(engine: Any, xs: list, ys: list, n: int, pending: list) -> dict[str, Any]:
    engine.tell(xs, ys)
    points = engine.propose(n, pending)
    return {"points": points, "reserve": engine.reserve, "fits": engine.fits,
            "hyperfits": engine.hyperfits, "estimator": engine.estimator_name(),
            "n_proposed": engine.n_proposed}


def serve(inbox: Connection, outbox: Connection) -> int:
    try:
        from emews.optimizers._bayes._engine import Engine  # noqa: F401  (the slow import)
    except BaseException:
        outbox.send(("failed", traceback.format_exc(limit=3)))
        return 1
    outbox.send(("ready", os.getpid()))
    engine: Any = None
    while True:
        try:
            kind, *args = inbox.recv()
        except (EOFError, OSError):   # the optimizer is done (or gone)
            outbox.close()
            os._exit(0)   # nothing to clean up; finalizing scipy and friends takes 0.2 s
        try:
            if kind == "adopt":
                engine = args[0]
                reply: Any = None
            elif kind == "propose":
                reply = _propose(engine, *args)
            else:
                raise ValueError(f"unknown request {kind!r}")
        except Exception:
            outbox.send(("error", traceback.format_exc()))
            continue
        outbox.send(("ok", reply))


def main(argv: list[str]) -> int:
    parent_pid, read_fd, write_fd = (int(a) for a in argv)
    _die_with(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the optimizer's to handle
    return serve(Connection(read_fd, writable=False), Connection(write_fd, readable=False))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
