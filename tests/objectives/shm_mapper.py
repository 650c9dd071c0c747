"""A test objective (run inline: in the worker rank) that writes the MPICH shared-memory segments its
rank maps to ``params["out"]``, then does ``params["then"]``: ``return``, ``kill`` (SIGKILL its rank),
or ``wait`` (until the file ``params["gate"]`` exists)."""

from __future__ import annotations

import os
import signal
import time

from emews.processes.mpich_shm import mapped_here


def run(params: dict) -> float:
    with open(params["out"] + ".tmp", "w") as out:
        out.write("\n".join(mapped_here()))
    os.rename(params["out"] + ".tmp", params["out"])
    if params["then"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while params["then"] == "wait" and not os.path.exists(params["gate"]):
        time.sleep(0.1)
    return 1.0
