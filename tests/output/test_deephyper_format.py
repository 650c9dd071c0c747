"""``emews results EXP --format deephyper`` read by DeepHyper's own analysis tools (issue 12)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from testutil import stored_rows, write_workflow

hpo = pytest.importorskip("deephyper.analysis.hpo")


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_deephyper_tools_find_the_real_best_and_the_failures(emews_cmd, tmp_path: Path, direction: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    wf = write_workflow(tmp_path, optimizer={"name": "random", "options": {"seed": 9}},
                        objective={"module": str(Path(__file__).parents[1] / "objectives" / "faulty.py"),
                                   "direction": direction},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0},
                               "mode": {"type": "categorical", "values": ["ok", "raise"]},
                               "tag": {"type": "constant", "value": "c"}},
                        budget={"evaluations": 16}, task={"timeout": 60, "isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and len(ok) < len(rows)  # both kinds present
    best = (min if direction == "minimize" else max)(ok, key=lambda r: r["objective"])
    proc = emews_cmd("results", "exp", "--format", "deephyper", check=True)
    df = hpo.read_results_from_csv(str(tmp_path / "exp" / "results_deephyper.csv"))
    assert [c for c in df.columns if c.startswith("p:")] == ["p:mode", "p:x"]  # sorted, constants left out
    without, with_failures = hpo.filter_failed_objectives(df)
    assert (len(without), len(with_failures)) == (len(ok), len(rows) - len(ok))
    assert set(with_failures["objective"]) == {"F_failed"}
    params, value = hpo.parameters_at_max(df)
    assert params["x"] == pytest.approx(json.loads(best["params"])["x"])
    assert value == pytest.approx(best["objective"] if direction == "maximize" else -best["objective"])
    stamps = df[["m:timestamp_submit", "m:timestamp_start", "m:timestamp_end", "m:timestamp_gather"]]
    assert (stamps.min().min() >= 0) and list(df["m:timestamp_gather"]) == sorted(df["m:timestamp_gather"])
    assert all(math.isclose(a, b) or a <= b for a, b in zip(df["m:timestamp_submit"], df["m:timestamp_end"]))
    hpo.plot_search_trajectory_single_objective_hpo(df)  # raised KeyError on the plain emews CSV
    hpo.plot_worker_utilization(df)


def test_a_training_runs_export_carries_each_trials_budget_and_whether_it_was_stopped(emews_cmd, tmp_path: Path) -> None:
    """§5 of real-world-2026-11-26: the export carried no ``t:step``, so the fidelity each trial
    reached was lost for DeepHyper. Its stoppers' examples record it as the ``budget`` and
    ``stopped`` metadata: ``m:budget`` (the trial's last reported step) and ``m:stopped``."""
    import csv

    from testutil import trainer_workflow

    wf = trainer_workflow(tmp_path, rates=[0.5, 0.9, 0.3, 0.1, 0.2], task={"isolation": "inline"},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9}})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "exp" / "results.csv", newline="") as fh:
        plain = {int(r["id"]): r for r in csv.DictReader(fh)}
    assert {r["t:ended"] for r in plain.values()} == {"stopped early", "completed"}  # both kinds present
    emews_cmd("results", "exp", "--format", "deephyper", check=True)
    df = hpo.read_results_from_csv(str(tmp_path / "exp" / "results_deephyper.csv"))
    got = {int(j): (int(b), bool(s)) for j, b, s in zip(df["job_id"], df["m:budget"], df["m:stopped"])}
    assert got == {i: (int(r["t:step"]), r["t:ended"] == "stopped early") for i, r in plain.items()}
