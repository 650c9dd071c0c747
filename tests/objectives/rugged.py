"""A test objective for the core's hard cases, chosen by ``params["mode"]``.

Directories named by environment variables let tests observe events instead of guessing times:
``RUGGED_EVENTS`` gets a file ``started-ID`` when a task starts; tasks in mode ``wait`` then
wait until the file ``RUGGED_GATE`` exists. ``RUGGED_TEARDOWN=raise`` makes teardown fail.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import emews
from gated import wait_for  # a sibling: emews puts an objective file's folder on sys.path


def teardown() -> None:
    if os.environ.get("RUGGED_TEARDOWN") == "raise":
        raise RuntimeError("teardown exploded on purpose")


def _started() -> None:
    events, ctx = os.environ.get("RUGGED_EVENTS"), emews.current_task()
    if events and ctx is not None:
        Path(events, f"started-{ctx.task_id}").touch()


def run(params: dict) -> object:
    mode = params["mode"]
    x = float(params.get("x", 1.0))
    _started()
    if mode == "big":  # a long parameter in, a long learning curve out
        return {"value": x + len(params["blob"]), "curve": [x / (i + 1) for i in range(4000)]}
    if mode == "wait":
        wait_for(os.environ["RUGGED_GATE"])
        return x * x
    if mode == "fork_sleep":  # leaves a grandchild behind
        if os.fork() == 0:
            while True:
                time.sleep(1000)
        return x
    if mode == "fork_then_crash":  # a grandchild holds the socket while the child dies
        if os.fork() == 0:
            while True:
                time.sleep(1000)
        ctypes.string_at(0)
    if mode == "fork_return":  # the forked copy returns from run (no exec)
        os.fork()
        return x
    if mode == "env":
        return {"value": x, **{k: os.environ.get(k, "") for k in ("SITE_VAR", "SETUP_VAR", "OMP_NUM_THREADS")}}
    if mode == "print":
        print(f"hello from task {emews.current_task().task_id}")
        return x
    return x
