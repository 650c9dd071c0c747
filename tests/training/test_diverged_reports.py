"""A diverged training (a report whose metric is NaN or infinite) is stopped at that report by any
trial scheduler, as Optuna's pruners prune a NaN intermediate value, and never ranks: results.csv,
summary.json and ``emews results`` name a finite best."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from testutil import query, write_workflow

DIVERGING = '''
import math

def run(params, ctx):
    """loss = rate + 1/step, but a rate above 0.8 diverges (NaN or inf, as the "how" parameter says) from step 2."""
    loss = None
    for step in range(1, params["epochs"] + 1):
        loss = params["rate"] + 1 / step
        if params["rate"] > 0.8 and step >= 2:
            loss = float(params["how"])
        if ctx.report(step=step, metrics={"loss": loss}).stop:
            break
    return {"loss": loss}
'''


@pytest.mark.parametrize("how,scheduler", [("nan", "asha"), ("inf", "median")])
def test_a_diverged_trial_is_stopped_and_never_the_best(emews_cmd, tmp_path: Path, how: str, scheduler: str) -> None:
    (tmp_path / "diverging.py").write_text(DIVERGING)
    options = ({"max_t": 9, "grace_period": 1, "reduction_factor": 3} if scheduler == "asha"
               else {"grace_period": 1, "min_samples": 1})
    wf = write_workflow(
        tmp_path, objective={"module": str(tmp_path / "diverging.py"), "function": "run", "metric": "loss"},
        optimizer={"name": "sweep"},
        space={"rate": {"type": "ordered", "values": [0.95, 0.1, 0.3]},  # the first trial diverges: no peers yet
               "epochs": {"type": "constant", "value": 9}, "how": {"type": "constant", "value": how}},
        budget={"evaluations": 3}, task={"isolation": "inline", "timeout": 120},
        trial_scheduler={"name": scheduler, "options": options})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = emews_cmd.cwd / "exp"
    assert query(exp, "SELECT step, action FROM decisions WHERE trial = 0 AND action != 'continue'") == [(2, "stop")]
    assert query(exp, "SELECT MAX(step) FROM reports WHERE trial = 0") == [(2,)]   # it trained no further
    rows = list(csv.DictReader((exp / "results.csv").open()))
    assert rows[0]["status"] == "failed" and "returned" in rows[0]["error"]      # a NaN/inf result is a failure
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["best"]["id"] == 1 and summary["best"]["objective"] == pytest.approx(0.1 + 1 / 9)
    out = emews_cmd("results", str(exp), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "task 1" in out.stdout + out.stderr
