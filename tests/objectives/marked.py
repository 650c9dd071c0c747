"""A test objective that marks its start and waits at a gate: each task writes the empty file
``MARK_DIR/<task id>`` when it starts, then waits until ``GATE_FILE`` exists (120 s at most), then
returns x squared. Tests use the marks to know which tasks run (on which pool: the store says who
leased them) and the gate to hold them there for as long as they need."""

from __future__ import annotations

import os
import time
from pathlib import Path

import emews


def run(params: dict) -> float:
    ctx = emews.current_task()
    marks = os.environ.get("MARK_DIR")
    if marks and ctx is not None:
        (Path(marks) / str(ctx.task_id)).touch()
    gate = os.environ.get("GATE_FILE")
    deadline = time.monotonic() + 120.0
    while gate and not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return float(params["x"]) ** 2
