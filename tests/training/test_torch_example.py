"""The PyTorch digits example (workflows/asha.yaml) for real: ASHA's decisions obeyed, the best
model loadable by a later job. torch comes with the ``test`` extra (``pip install -e .[test]``)."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path

import pytest

from emews.core.imports import import_user_module
from emews.output.catalog import load_best
from emews.training.schedulers.asha import ASHA
from testutil import REPO, query, stored_rows

# looked up, not imported: the objective module imports torch when the test runs (collecting this file
# need not: 3-4 s of CPU in every pytest process)
pytestmark = pytest.mark.skipif(find_spec("torch") is None, reason="the test extra installs torch")


def test_asha_on_the_torch_digits_model(emews_cmd, tmp_path: Path) -> None:
    proc = emews_cmd("launch", str(REPO / "workflows" / "asha.yaml"), "--workers", "2", "--exp-dir", "exp",
                     "--set", "budget.evaluations=5", "--set", "space.epochs.value=9",
                     "--set", "trial_scheduler.options.max_t=9", timeout=600)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    reports = query(exp, "SELECT trial, step, metrics FROM reports ORDER BY seq")
    replay = ASHA(max_t=9).bind(metric="val_loss", direction="minimize")
    told_to_stop = {}
    for trial, step, metrics in reports:      # the decisions, in the order the reports arrived
        if replay.on_report(trial, step, json.loads(metrics), {}).stop:
            told_to_stop.setdefault(trial, step)
    last = dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial"))
    assert last == told_to_stop and set(last) == set(range(5))  # every trial ended where ASHA said

    results = {r["id"]: r for r in stored_rows(exp)}
    (row, state), = load_best(exp, k=1)
    digits_torch = import_user_module(str(REPO / "objectives" / "digits_torch.py"), what="objective")
    digits_torch.setup()
    model = digits_torch.build(json.loads(results[row.trial]["params"]))
    model.load_state_dict(state["model"])
    model.eval()
    assert digits_torch.evaluate(model)["val_loss"] == pytest.approx(row.metric, rel=1e-5)
    best_reported = min(json.loads(m)["val_loss"] for _, _, m in reports)
    assert row.metric == pytest.approx(best_reported)
