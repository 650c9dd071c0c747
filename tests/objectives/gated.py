"""A test objective that waits at a gate: tasks from id ``GATE_FROM`` on wait until the file
``GATE_FILE`` exists (or ``GATE_TIMEOUT`` seconds, 120 by default), then take 20 ms.

Tests use it to hold evaluations in flight for as long as they need, instead of guessing how long
a run takes. Works in worker threads and in isolated children alike (environment and a file).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import emews


def run(params: dict) -> float:
    gate = os.environ.get("GATE_FILE")
    ctx = emews.current_task()
    if gate and ctx is not None and ctx.task_id >= int(os.environ.get("GATE_FROM", "0")):
        deadline = time.monotonic() + float(os.environ.get("GATE_TIMEOUT", "120"))
        while not Path(gate).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    time.sleep(0.02)
    return float(params["x"]) ** 2
