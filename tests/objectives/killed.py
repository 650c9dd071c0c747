"""A training objective whose first run is killed before its checkpoint of step 2 is written
(tests/training/test_unwritten_checkpoints.py, tests/store/test_pool_killed_checkpoints.py):
``params["how"]``: ``before`` the writer starts the file, ``mid`` once its temporary file is
begun (then the process kills itself), ``stuck`` the same, then it waits until it is killed (the
task timeout, or the whole job); anything else runs through. It logs each start to
``params["log"]`` with the step it restored and the temporary files in its trial's folder."""

import json
import os
import signal
import threading
import time

from emews.training import checkpoints, session


def _log(params, **event):
    with open(params["log"], "a") as fh:
        fh.write(json.dumps(event) + "\n")


def _hold_writes(how):
    """The process's background writer never finishes a checkpoint from now on: ``before`` it
    starts the file, else (``mid``, ``stuck``) once it made the file's temporary name."""
    for writer in list(session._WRITERS.values()):
        writer.flush()  # step 1's file is written: only what follows is held
    if how == "before":
        for writer in session._WRITERS.values():
            writer._write = lambda *job: threading.Event().wait()
        return
    frame = checkpoints.frame

    def held(*args):
        pieces = frame(*args)
        yield pieces[0]
        threading.Event().wait()

    checkpoints.frame = held


def run(params, ctx):
    state, start = ctx.restore(default=({"step": 0}, 0))
    folder = ctx.checkpoints_root / f"{ctx.task_id:06d}"
    _log(params, event="start", restored=start, temps=sorted(p.name for p in folder.glob(".*.tmp")))
    killed = params["how"] in ("before", "mid", "stuck") and start == 0
    for step in range(start + 1, 4):
        if step == 2 and killed:
            _hold_writes(params["how"])
        ctx.report(step=step, metrics={"loss": 1.0 / step}, checkpoint={"step": step})
        if step == 2 and killed:
            deadline = time.monotonic() + 120
            while params["how"] != "before" and not list(folder.glob(".*.tmp")) and time.monotonic() < deadline:
                time.sleep(0.01)
            if params["how"] == "stuck":  # killed by the task timeout (or with its whole job)
                threading.Event().wait()
            os.kill(os.getpid(), signal.SIGKILL)  # before the writer wrote step 2
    return 1.0 / 3
