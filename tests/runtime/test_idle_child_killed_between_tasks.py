"""A worker's objective process (``task.isolation: process``) killed from outside while idle between
two tasks lost no work: the next task runs in a new process, ``ok``, and one warning line names the
rank. It was handed to the dead process and ended ``crashed`` (an attempt spent, the task failed
without retries).

Real ``mpiexec``, 1 worker; an optimizer of the test's own puts one point, waits for its result,
then for the file ``gate``, then puts the second point: the test kills the idle child (SIGKILL) in
between, waits until it is dead, then opens the gate.
"""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

from test_idle_child_killed import dead

from testutil import GATED, EmewsCommand, read_only, said, stored_rows, wait_until, write_workflow

OPTIMIZER = '''
import os
import random
import time

from emews.core.optimizer import Optimizer


class TwoApart(Optimizer):
    """One point, its result, then the file ``gate``, then another point."""

    def __init__(self, gate: str) -> None:
        self.gate = gate

    def run(self, evaluator) -> None:
        rng = random.Random(0)
        evaluator.put([evaluator.space.sample(rng)])
        evaluator.get(1)
        while not os.path.exists(self.gate):
            time.sleep(0.01)
        evaluator.put([evaluator.space.sample(rng)])
        evaluator.get(1)
'''


def test_an_objective_process_killed_between_tasks_costs_the_next_task_nothing(
    emews_cmd: EmewsCommand, tmp_path: Path
) -> None:
    (tmp_path / "two_apart.py").write_text(textwrap.dedent(OPTIMIZER))
    marks, gate = tmp_path / "marks", tmp_path / "gate"
    marks.mkdir()
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "two_apart:TwoApart", "options": {"gate": str(gate)}},
        objective={"module": str(GATED), "function": "run"},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
        budget={"evaluations": 2},
        task={"isolation": "process", "timeout": 300},
    )
    emews_cmd.env.update(
        MARK_DIR=str(marks), PYTHONPATH=os.pathsep.join([str(tmp_path), emews_cmd.env.get("PYTHONPATH", "")])
    )
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", str(exp))
    try:
        assert wait_until(lambda: read_only(exp, "SELECT status FROM results") == [("ok",)], timeout=180), said(job)
        child = int((marks / "0").read_text().split()[1])  # RANK PID PPID: the task's process
        os.kill(child, signal.SIGKILL)
        assert wait_until(lambda: dead(child), timeout=60)
        gate.touch()
        status = job.wait(timeout=240)
        out, err = job.stdout.read(), job.stderr.read()
    finally:
        emews_cmd.kill_all()
    assert [(r["id"], r["status"]) for r in stored_rows(exp)] == [(0, "ok"), (1, "ok")], out + err
    assert int((marks / "1").read_text().split()[1]) != child
    warnings = [line for line in err.splitlines() if line.startswith("emews: warning: rank 1 ")]
    assert len(warnings) == 1 and "signal SIGKILL" in warnings[0] and "between tasks" in warnings[0], err
    assert status == 0, out + err
    assert emews_cmd.leftovers_after_exit(timeout=60) == []
