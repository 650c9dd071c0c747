"""What an objective's return value (or its way of ending) becomes: a number, a NaN or an infinity
(failed: no optimizer can rank a diverged model's loss), numpy and torch values made plain; under
inline isolation ``sys.exit()`` and ``KeyboardInterrupt`` raised by the objective are failed results
of their task, not a dead worker and a dead job (real ``emews launch``, mpiexec)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from emews.core.failure_cause import cause
from emews.core.results import Status
from emews.objective.function import outcome_from_return
from testutil import stored_rows, write_workflow


@pytest.mark.parametrize(("returned", "error"), [
    (math.inf, "objective returned inf"),
    (-math.inf, "objective returned -inf"),
    (math.nan, "objective returned NaN"),
    (np.float64("inf"), "objective returned inf"),
    ({"loss": math.inf, "acc": 0.1}, "objective returned inf"),
    (np.arange(3), "objective returned list [0, 1, 2], not a number"),
])
def test_a_value_no_optimizer_can_rank_is_a_failure_naming_it(returned, error: str) -> None:
    outcome = outcome_from_return(0, returned, "loss")
    assert outcome.status is Status.FAILED and outcome.error == error


def test_numpy_and_torch_values_are_made_plain() -> None:
    torch = pytest.importorskip("torch")
    outcome = outcome_from_return(0, {"loss": np.array(0.5), "per_class": np.arange(3), "w": torch.ones(2, 2),
                                      "t": torch.tensor(1.5)}, "loss")
    assert outcome.status is Status.OK and outcome.value == 0.5
    assert outcome.metrics == {"per_class": [0, 1, 2], "w": [[1.0, 1.0], [1.0, 1.0]], "t": 1.5}
    json.dumps(outcome.metrics)  # what the store writes


OBJECTIVE = '''
import sys


def run(params):
    x = int(params["x"])
    if x == 1:
        sys.exit(3)  # as argparse does on arguments it rejects
    if x == 2:
        raise KeyboardInterrupt
    return float(x)
'''


def test_inline_sys_exit_and_keyboard_interrupt_fail_their_task_and_the_run_goes_on(emews_cmd, tmp_path) -> None:
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    wf = write_workflow(tmp_path, optimizer={"name": "sweep"}, objective={"module": "objective.py"},
                        space={"x": {"type": "ordered", "values": list(range(6))}},
                        budget={"evaluations": 6, "fail_fast": 0}, task={"timeout": 60, "isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = {json.loads(r["params"])["x"]: r for r in stored_rows(tmp_path / "exp")}
    assert sorted(rows) == list(range(6))
    assert {x: r["status"] for x, r in rows.items()} == {0: "ok", 1: "failed", 2: "failed", 3: "ok", 4: "ok", 5: "ok"}
    assert cause(rows[1]["error"]) == "SystemExit: 3" and cause(rows[2]["error"]) == "KeyboardInterrupt"
    assert emews_cmd.leftovers_after_exit() == []


EXITS = '''
import os


def run(params):
    if int(params["x"]) == 2:
        os._exit(0)  # inline: the worker's process itself ends, and the job with it
    return float(params["x"])
'''


def test_a_rank_that_ends_the_job_early_gets_one_line_and_exit_1(emews_cmd, tmp_path) -> None:
    """An inline objective calling os._exit ends its worker rank and the job before the run writes
    its summary: one line says so and how to go on (there was no message at all, or mpiexec's
    status, 9 after a kill -9 of a rank, outside the documented exit statuses)."""
    (tmp_path / "objective.py").write_text(EXITS)
    wf = write_workflow(tmp_path, optimizer={"name": "sweep"}, objective={"module": "objective.py"},
                        space={"x": {"type": "ordered", "values": list(range(6))}},
                        budget={"evaluations": 6, "fail_fast": 0}, task={"timeout": 60, "isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("emews: the job ended before its run did (mpiexec exited with status "), proc.stderr
    assert last.endswith(f"continue with: emews resume {tmp_path / 'exp'}"), last
    # the log the line points to says it too (2c of reliability-2026-11: emews.log had no line on why the run ended)
    logged = (tmp_path / "exp" / "emews.log").read_text().splitlines()[-1]
    assert " ERROR the job ended before its run did (mpiexec exited with status " in logged, logged
    assert emews_cmd.leftovers_after_exit() == []
