"""A test training objective with a known learning curve: ``loss(step) = rate + 1 / step``.

It reports every step with a checkpoint ``{"step", "rate", "trail"}`` (``trail`` lists the
steps this lineage trained, so a test sees what was restored) and stops when told. Knobs
(environment, so they work in worker threads and isolated children alike):

``TRAINER_LOG``      append one JSON line per event (start, restored, report) to this file
``TRAINER_KILL_AT``  SIGKILL this process after reporting that step, on a trial's first attempt
``TRAINER_CORRUPT``  with ``TRAINER_KILL_AT``: truncate that step's checkpoint before the kill
``TRAINER_WAIT``     report without waiting for the decision (``wait=False``)
``TRAINER_HOLD_AT``  after reporting that step, on the first attempt of task 0, wait (up to 120 s)
                     until the file ``TRAINER_GATE`` exists: holds a trial mid-training
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import emews


def _log(**event) -> None:
    path = os.environ.get("TRAINER_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(event) + "\n")


def run(params: dict, ctx) -> dict:
    rate, epochs = float(params["rate"]), int(params.get("epochs", 9))
    state, start = ctx.restore(default=({"step": 0, "rate": rate, "trail": []}, 0))
    _log(event="start", task=ctx.task_id, pid=os.getpid(), restored=start, trail=state["trail"],
         rate=rate, from_rate=state["rate"])
    kill_at = int(os.environ.get("TRAINER_KILL_AT", "0"))
    wait = not os.environ.get("TRAINER_WAIT")
    loss = rate + 1.0 / max(start, 1)
    for step in range(start + 1, epochs + 1):
        loss = rate + 1.0 / step
        state = {"step": step, "rate": rate, "trail": [*state["trail"], step]}
        decision = ctx.report(step=step, metrics={"loss": loss, "step": step}, checkpoint=state, wait=wait)
        _log(event="report", task=ctx.task_id, step=step, loss=loss, action=decision.action.value)
        if kill_at and step == kill_at and start == 0:
            ctx.end_attempt()  # the checkpoint is on disk and rank 0 knows it
            if os.environ.get("TRAINER_CORRUPT"):
                for path in (ctx.checkpoints_root / f"{ctx.task_id:06d}").glob(f"step-{step:08d}-*.ckpt"):
                    data = path.read_bytes()
                    path.write_bytes(data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        if step == int(os.environ.get("TRAINER_HOLD_AT", "0")) and start == 0 and ctx.task_id == 0:
            deadline = time.monotonic() + 120
            while not Path(os.environ["TRAINER_GATE"]).exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        if decision.stop:
            break
    return {"loss": loss, "steps": state["step"]}


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()] if Path(path).exists() else []
