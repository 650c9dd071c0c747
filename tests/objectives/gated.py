"""The tests' gated objective: a task marks its start, waits at a gate, then returns ``x`` squared.

Tests use it to hold evaluations in flight for as long as they need, instead of guessing how long
a run takes. Each part is set by the environment of the command that runs it (so that two pools of
one experiment may differ) and is off when unset; it works in worker threads and in isolated
children alike:

- ``MARK_DIR``: the task appends the line ``RANK PID PPID`` to ``MARK_DIR/<task id>`` as it starts
  (its process and that process's parent: the worker rank's when tasks run in a process of their
  own); a task started again adds a line. A reader takes the lines that end with a newline.
- ``GATE_FILE``: the task then waits until that file exists, ``GATE_TIMEOUT`` seconds at most (120
  by default; ``inf``: no bound). A task that starts with the gate already open waits instead for
  the file ``GATE_END``, ``GATE_PACE`` seconds at most (0 by default: the run goes on at its own
  pace once the gate is open).
- ``GATE_FROM``: only the tasks from that id on mark and wait (0 by default); each takes 20 ms more.
- ``GATE_SAYS``: the task prints ``task ID says`` and that many x's once past the gate.

``params["kind"]`` (optional) picks a point's part: ``gated`` (the default) as above, ``fast``
returns at once, ``fail`` raises at once."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import emews


def wait_for(path: str | None, seconds: float = math.inf) -> None:
    """Until ``path`` exists (none: not at all), ``seconds`` at most (the other test objectives' gates too)."""
    deadline = time.monotonic() + seconds
    while path and not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)


def hold() -> None:
    """The current task's part: mark its start, wait at the gate, say so (the module's docstring)."""
    ctx = emews.current_task()
    if ctx is not None and ctx.task_id >= int(os.environ.get("GATE_FROM", "0")):
        _mark_and_wait(ctx)
    time.sleep(0.02)


def _mark_and_wait(ctx: emews.TaskContext) -> None:
    if marks := os.environ.get("MARK_DIR"):
        with open(Path(marks) / str(ctx.task_id), "a") as mark:  # one write: a line whole or none
            mark.write(f"{ctx.rank} {os.getpid()} {os.getppid()}\n")
    gate = os.environ.get("GATE_FILE")
    if gate and os.path.exists(gate):
        wait_for(os.environ.get("GATE_END"), float(os.environ.get("GATE_PACE", "0")))
    else:
        wait_for(gate, float(os.environ.get("GATE_TIMEOUT", "120")))
    if says := os.environ.get("GATE_SAYS"):
        print(f"task {ctx.task_id} says", "x" * int(says))


def run(params: dict) -> float:
    kind = params.get("kind", "gated")
    if kind == "fail":
        raise RuntimeError("instant failure")
    if kind == "gated":
        hold()
    return float(params["x"]) ** 2
