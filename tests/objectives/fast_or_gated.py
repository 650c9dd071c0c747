"""A test objective whose tasks are instant or held at a gate, by ``params["kind"]``: ``fail`` raises
at once, ``fast`` returns at once, ``gated`` appends its rank to the file ``MARK_DIR/<task id>`` when it
starts (a second start would show as a second line), then waits until ``GATE_FILE`` exists (120 s at
most) and returns ``i``. Tests use it to make the run-time estimate tiny with the first tasks, then
hold the next ones in flight for as long as they need."""

from __future__ import annotations

import os
import time
from pathlib import Path

import emews


def run(params: dict) -> float:
    kind = params["kind"]
    if kind == "fail":
        raise RuntimeError("instant failure")
    if kind == "gated":
        ctx = emews.current_task()
        assert ctx is not None
        with open(Path(os.environ["MARK_DIR"]) / str(ctx.task_id), "a") as fh:
            fh.write(f"{ctx.rank}\n")
        gate = Path(os.environ["GATE_FILE"])
        deadline = time.monotonic() + 120.0
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return float(params["i"])
