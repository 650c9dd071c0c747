"""A test training objective with a known learning curve: ``loss(step) = rate + 1 / step``.

The start event carries ``time`` (UNIX), when the trial started. It reports every step with a checkpoint ``{"step", "rate", "trail", "trial"}`` (``trail`` lists the
steps this lineage trained, ``trial`` the task that wrote it, so a test sees what was restored) and
stops when told. Knobs
(environment, so they work in worker threads and isolated children alike):

``TRAINER_LOG``      append one JSON line per event (start, restored, report) to this file
``TRAINER_KILL_AT``  SIGKILL this process after reporting that step, on a trial's first attempt
``TRAINER_CORRUPT``  with ``TRAINER_KILL_AT``: truncate that step's checkpoint before the kill
``TRAINER_WAIT``     report without waiting for the decision (``wait=False``)
``TRAINER_HOLD_AT``  after reporting that step, on the first attempt of task 0, wait (up to 120 s)
                     until the file ``TRAINER_GATE`` exists: holds a trial mid-training (it
                     touches ``TRAINER_GATE.held`` first)
``TRAINER_WAIT_HELD`` every task but 0 waits (up to 120 s) until task 0 holds, before it trains
``TRAINER_GATE_AT``  before reporting that step or a later one, every trial waits until the file
                     ``TRAINER_GATE`` exists (up to 120 s)
``TRAINER_IN_TURN``  with ``TRAINER_GATE_AT``: at that step, task N > 0 also waits (up to 120 s) until
                     task N - 1's report of it was answered (in the log): the reports come in task order
``TRAINER_IN_TURN_STORE`` with ``TRAINER_IN_TURN``: the experiment's results.db; the wait also lasts until
                     the optimizer rank stored task N - 1's report (with ``wait=False`` it is logged first)
``TRAINER_GO_AT``    ``TASK:STEP``: that task, on its first run, waits before reporting that step until
                     the file ``TRAINER_GATE.go`` exists (up to 120 s)
``TRAINER_STEP_SLEEP`` sleep this many seconds before each report (trials on several workers then
                     interleave their reports as real training does)
``TRAINER_PACE_UNTIL`` with ``TRAINER_STEP_SLEEP``: sleep only until this file exists (a test that
                     needs trials paced until it has stopped the job lets the rest run at full speed)
``TRAINER_NOISE``    add up to this much to each reported loss, a fixed pseudo-random amount per
                     (task, step), so that losses cross as in real training
``TRAINER_HOLD_CLONES`` a run that restored another trial's checkpoint (a PBT clone) waits after its
                     first report until ``TRAINER_GATE`` exists (up to 120 s)
``TRAINER_DEAF``     never break on a stop: train every epoch whatever the decision (an objective
                     that ignores ``decision.stop``)
``TRAINER_BLOB``     add this many bytes to each checkpoint (a large model's)
``TRAINER_GROUP``    call ``ctx.process_group()`` first: the members of a multi-rank task under process
                     isolation then share team rank 0's decisions (inline members share them over ``ctx.comm``)
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import emews


def _log(**event) -> None:
    path = os.environ.get("TRAINER_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(event) + "\n")


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 120
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def _stored(store: str, trial: int, step: int) -> bool:
    """Whether the optimizer rank stored ``trial``'s report of ``step`` in the results database ``store``."""
    try:
        with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT 1 FROM reports WHERE trial = ? AND step = ?", (trial, step)).fetchone()
    except sqlite3.Error:  # not created yet
        return False
    return row is not None


def _wait_for_turn(task: int, step: int) -> None:
    """Until task ``task - 1``'s report of ``step`` is in the log (it was answered); with
    ``TRAINER_IN_TURN_STORE`` (the experiment's results.db) also until the optimizer rank stored it:
    a report sent with ``wait=False`` is in the log before the optimizer rank has it."""
    log = Path(os.environ.get("TRAINER_LOG", "/nonexistent"))
    store = os.environ.get("TRAINER_IN_TURN_STORE")
    deadline = time.monotonic() + 120
    while task > 0 and time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        reported = [json.loads(line) for line in lines if line.endswith("}")]  # not a line still being written
        if any(e["event"] == "report" and e["task"] == task - 1 and e["step"] == step for e in reported):
            if store is None or _stored(store, task - 1, step):
                return
        time.sleep(0.02)


def run(params: dict, ctx) -> dict:
    rate, epochs = float(params["rate"]), int(params.get("epochs", 9))
    if os.environ.get("TRAINER_GROUP"):
        ctx.process_group()
    state, start = ctx.restore(default=({"step": 0, "rate": rate, "trail": [], "trial": ctx.task_id}, 0))
    _log(event="start", task=ctx.task_id, pid=os.getpid(), restored=start, trail=state["trail"],
         rate=rate, from_rate=state["rate"], from_trial=state.get("trial"), time=time.time())
    gate = Path(os.environ.get("TRAINER_GATE", "/nonexistent"))
    if os.environ.get("TRAINER_WAIT_HELD") and ctx.task_id != 0:
        _wait_for(gate.with_name(gate.name + ".held"))
    gate_at = int(os.environ.get("TRAINER_GATE_AT", "0"))
    clone = os.environ.get("TRAINER_HOLD_CLONES") and state.get("trial", ctx.task_id) != ctx.task_id
    go_task, _, go_step = os.environ.get("TRAINER_GO_AT", "-1:0").partition(":")
    kill_at = int(os.environ.get("TRAINER_KILL_AT", "0"))
    wait = not os.environ.get("TRAINER_WAIT")
    loss = rate + 1.0 / max(start, 1)
    pace = float(os.environ.get("TRAINER_STEP_SLEEP", "0"))
    paced_until = Path(os.environ["TRAINER_PACE_UNTIL"]) if os.environ.get("TRAINER_PACE_UNTIL") else None
    noise = float(os.environ.get("TRAINER_NOISE", "0"))
    for step in range(start + 1, epochs + 1):
        loss = rate + 1.0 / step
        if noise:
            loss += noise * random.Random(f"{ctx.task_id}:{step}").random()
        if pace and not (paced_until and paced_until.exists()):
            time.sleep(pace)
        if gate_at and step >= gate_at:
            _wait_for(gate)
            if os.environ.get("TRAINER_IN_TURN") and step == gate_at:
                _wait_for_turn(ctx.task_id, step)
        if ctx.task_id == int(go_task) and step == int(go_step) and start == 0:
            _wait_for(gate.with_name(gate.name + ".go"))
        state = {"step": step, "rate": rate, "trail": [*state["trail"], step], "trial": ctx.task_id}
        if os.environ.get("TRAINER_BLOB"):
            state["blob"] = bytes(int(os.environ["TRAINER_BLOB"]))
        decision = ctx.report(step=step, metrics={"loss": loss, "step": step}, checkpoint=state, wait=wait)
        _log(event="report", task=ctx.task_id, pid=os.getpid(), step=step, loss=loss, action=decision.action.value)
        if kill_at and step == kill_at and start == 0:
            ctx.end_attempt()  # the checkpoint is on disk and rank 0 knows it
            if os.environ.get("TRAINER_CORRUPT"):
                for path in (ctx.checkpoints_root / f"{ctx.task_id:06d}").glob(f"step-{step:08d}-*.ckpt"):
                    data = path.read_bytes()
                    path.write_bytes(data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        if step == int(os.environ.get("TRAINER_HOLD_AT", "0")) and start == 0 and ctx.task_id == 0:
            gate.with_name(gate.name + ".held").touch()
            _wait_for(gate)
        if clone and step == start + 1:
            _wait_for(gate)
        if decision.stop and not os.environ.get("TRAINER_DEAF"):
            break
    return {"loss": loss, "steps": state["step"]}


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()] if Path(path).exists() else []
