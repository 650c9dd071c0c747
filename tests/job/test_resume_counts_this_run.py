"""A resumed run's progress and closing lines counted the earlier runs' evaluations as its own: an NT3
experiment of 4 trainings resumed to 6 said "4/6 evaluations, ..., 0.20/s" before it had finished
any (4 old ones over its first 20 s), and "6/6 evaluations: 6 ok in 86.2 s" at its end, as if this
run had trained all 6 in 86 s. The rate counts this run's evaluations, and the closing line says how
many of them it ran in its time."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from testutil import GATED, wait_until, write_workflow


def test_a_resumed_run_counts_only_its_own_evaluations_in_its_rate_and_time(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(tmp_path, optimizer={"name": "random", "options": {"seed": 1}},
                        objective={"module": str(GATED)}, space={"x": {"type": "float", "lower": 0, "upper": 1}},
                        budget={"evaluations": 4}, task={"isolation": "inline"})
    first = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert first.returncode == 0, first.stderr
    gate = tmp_path / "gate"
    emews_cmd.env.update(GATE_FILE=str(gate), GATE_FROM="4", EMEWS_PROGRESS="tty")  # a line each 0.5 s
    proc = emews_cmd.popen("resume", "exp", "--set", "budget.evaluations=6")
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.extend(proc.stderr), daemon=True)  # '\r' read as a line's end
    reader.start()
    try:
        # task 4 waits at the gate: the lines until then are of a run that has finished nothing yet
        held = wait_until(lambda: [ln for ln in said if ln.startswith("\x1b[K4/6 evaluations")], timeout=240)
        assert held, "".join(said)
    finally:
        gate.touch()
    assert proc.wait(timeout=240) == 0
    reader.join(timeout=60)
    text = "".join(said)
    assert float(re.search(r", ([\d.,]+)/s$", held[0].rstrip()).group(1)) == 0, held[0]
    assert re.search(r"^6/6 evaluations: 6 ok \(2 of them in this run, in \d+\.\d s\)$", text, re.M), text
