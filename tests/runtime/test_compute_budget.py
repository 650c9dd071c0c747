"""Budgets in compute (issue 24): ``budget: {steps: N}`` (reported training steps summed over trials)
and ``budget: {time: HH:MM:SS}`` beside ``evaluations``, whichever comes first; a sweep over a points
file needs no budget; bad values are one line (exit 2). Runs are real ``emews launch`` jobs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from emews.core.results import Outcome, Result, Status, Task
from emews.runtime.compute_budget import ComputeBudget
from emews.store.results_store import ResultsStore
from emews.store.trial_store import TrialStore
from emews.training.messages import Report
from testutil import TESTS, stored_rows, write_workflow

STRIDED = TESTS / "objectives" / "strided.py"
SLOW = TESTS / "objectives" / "slow.py"
STRIDE = 2  # steps per report


def steps_spent(exp: Path) -> int:
    """Reported steps summed over trials: each trial's highest step."""
    db = sqlite3.connect(exp / "results.db")
    try:
        return db.execute("SELECT COALESCE(SUM(top), 0) FROM (SELECT MAX(step) AS top FROM reports "
                          "GROUP BY trial)").fetchone()[0]
    finally:
        db.close()


def training_workflow(folder: Path, **budget) -> Path:
    return write_workflow(
        folder, optimizer={"name": "random", "options": {"seed": 3}},
        objective={"module": str(STRIDED), "metric": "loss"},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
               "stride": {"type": "constant", "value": STRIDE}, "reports": {"type": "constant", "value": 4}},
        budget=budget, task={"timeout": 60, "isolation": "process"})


def summary(exp: Path) -> dict:
    return json.loads((exp / "summary.json").read_text())


@pytest.mark.parametrize("workers", [1, 2])
def test_a_step_budget_ends_the_run_once_the_trials_reported_that_many_steps(emews_cmd, tmp_path: Path,
                                                                          workers: int) -> None:
    """Each trial would train 8 steps, 2 a report; 100 evaluations would be 800 steps. At 20 the run
    dispatches nothing more and each running trial stops at its next report: at most one more
    report per worker."""
    wf = training_workflow(tmp_path, evaluations=100, steps=20)
    proc = emews_cmd("launch", str(wf), "--workers", str(workers), "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    spent = steps_spent(exp)
    assert 20 <= spent < 20 + workers * STRIDE, spent
    said = f"step budget reached: {spent} steps reported of 20"   # before: "20 of 20" when 22 were
    assert said in proc.stderr and summary(exp)["budget_reached"].startswith(said)
    assert summary(exp)["exit_status"] == 0
    rows = stored_rows(exp)
    assert len(rows) < 100 and {r["status"] for r in rows} == {"ok"}
    assert sum(json.loads(r["metrics"])["steps"] for r in rows) == spent  # every trial's steps are a result's
    assert emews_cmd.leftovers_after_exit() == []


def test_a_step_budget_ends_trials_waiting_at_an_asha_rung_with_their_results(emews_cmd, tmp_path: Path) -> None:
    """ASHA's promotion rule holds trials at rungs: once the budget is spent none is promoted, each
    ends with its result so far, and no trial is left unfinished for ``emews resume``."""
    wf = training_workflow(tmp_path, evaluations=60, steps=24)
    data = yaml.safe_load(wf.read_text())
    data["trial_scheduler"] = {"name": "asha", "options": {"max_t": 8, "grace_period": 2, "reduction_factor": 2,
                                                      "variant": "promotion"}}
    wf.write_text(yaml.safe_dump(data))
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    assert 24 <= steps_spent(exp) < 24 + 2 * STRIDE, steps_spent(exp)
    assert "step budget reached" in proc.stderr
    db = sqlite3.connect(exp / "results.db")
    try:
        unfinished = db.execute("SELECT DISTINCT trial FROM reports WHERE trial NOT IN "
                                "(SELECT id FROM results)").fetchall()
        waited = db.execute("SELECT COUNT(*) FROM waits").fetchone()[0]
    finally:
        db.close()
    assert unfinished == [] and waited > 0  # some trials waited at a rung, and every one ended


def test_a_resumed_run_counts_the_steps_earlier_runs_reported(emews_cmd, tmp_path: Path) -> None:
    wf = training_workflow(tmp_path, evaluations=100, steps=12)
    first = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert first.returncode == 0, first.stderr
    exp = tmp_path / "exp"
    before = steps_spent(exp)
    assert 12 <= before < 12 + 2 * STRIDE
    again = emews_cmd("resume", "exp", timeout=240)  # the budget is spent: nothing new runs
    assert again.returncode == 0, again.stderr
    assert "step budget reached" in again.stderr and steps_spent(exp) == before
    more = emews_cmd("resume", "exp", "--set", "budget.steps=30", timeout=240)
    assert more.returncode == 0, more.stderr
    assert 30 <= steps_spent(exp) < 30 + 2 * STRIDE, steps_spent(exp)
    assert "step budget reached" in more.stderr


def test_a_time_budget_ends_the_run_without_an_evaluation_budget(emews_cmd, tmp_path: Path) -> None:
    """``time`` alone: the run ends because its wall time is spent, not because the optimizer stopped."""
    wf = write_workflow(tmp_path, objective={"module": str(SLOW)}, budget={"time": "0:00:02"},
                        task={"timeout": 60, "isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    assert "time budget reached" in proc.stderr and "time budget reached" in summary(exp)["budget_reached"]
    assert {r["status"] for r in stored_rows(exp)} <= {"ok"}
    check = emews_cmd("check", str(wf))
    assert check.returncode == 0 and "budget 00:00:02" in check.stdout, check.stdout + check.stderr


def test_a_points_file_sweep_without_a_budget_runs_every_point(emews_cmd, tmp_path: Path) -> None:
    points = tmp_path / "upf.txt"
    points.write_text("".join(json.dumps({"id": f"run{i}", "x": i / 10}) + "\n" for i in range(7)))
    wf = write_workflow(tmp_path, optimizer={"name": "sweep", "options": {"file": str(points)}},
                        objective={"module": str(SLOW)}, space={}, task={"timeout": 60, "isolation": "inline"})
    data = wf.read_text().replace("budget:\n  evaluations: 10\n", "")
    assert "budget" not in data
    wf.write_text(data)
    check = emews_cmd("check", str(wf))
    assert check.returncode == 0 and "budget 7" in check.stdout, check.stdout + check.stderr
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert sorted(json.loads(r["params"])["id"] for r in rows) == [f"run{i}" for i in range(7)]
    assert "7/7 evaluations" in proc.stderr


@pytest.mark.parametrize("budget, key, says", [
    ({"steps": -5}, "budget.steps", "must be > 0, not -5"),
    ({"evaluations": 0}, "budget.evaluations", "must be > 0, not 0"),
    ({"time": "banana"}, "budget.time", "HH:MM:SS"),
    ({"time": 7200}, "budget.time", "quoted string"),
    ({"time": "0:00"}, "budget.time", "HH:MM:SS"),
    ({"time": "0h"}, "budget.time", "2h"),
    ({"time": "2 hours"}, "budget.time", "2h"),
    ({}, "budget", "steps"),
    ({"fail_fast": 3}, "budget", "evaluations"),
])
def test_bad_budgets_are_one_line(emews_cmd, tmp_path: Path, budget: dict, key: str, says: str) -> None:
    wf = write_workflow(tmp_path, budget=budget)
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{wf}: {key}:" in lines[0] and says in lines[0], lines[0]


def test_the_budget_counts_what_earlier_runs_spent_from_the_store(tmp_path: Path) -> None:
    """Steps: each trial's highest reported step (a trial continued from a checkpoint counts once);
    time: the wall time during which earlier runs' evaluations ran (a gap between runs is not counted)."""
    with ResultsStore(tmp_path / "results.db") as store:
        trials = TrialStore(store.connection)
        for trial, step in [(0, 2), (0, 4), (1, 2), (0, 2), (0, 6)]:  # trial 0 retried from step 2
            trials.add_report(Report(trial, 0, step, {"loss": 1.0}, time=1.0), 1.0, 1.0)
        # run 1: evaluations in [100, 110] and [105, 120]; run 2 (after a queue wait): [500, 530]
        for id_, (start, end) in enumerate([(100.0, 110.0), (105.0, 120.0), (500.0, 530.0)], 2):
            store.add([Result.from_outcome(Task(id_, {"x": 1.0}, 0, start), Outcome(
                id_, Status.OK, 1.0, started=start, finished=end), 1.0)])
        budget = ComputeBudget(steps=10, seconds=3600, clock=lambda: 0.0)
        budget.resume(store)
    assert budget.steps_spent == 8 and budget.seconds_spent == 20.0 + 30.0
    assert budget.reached() is None
    budget.count(1, 4)
    assert budget.steps_spent == 10 and "step budget reached" in budget.reached()


def test_the_step_budget_line_counts_the_steps_reported_after_it_was_reached() -> None:
    """20 steps reach a budget of 20; two trials still running report steps 8 and 7 as they stop: the
    line says 23 were reported, 3 of them after it was reached (before: "20 steps reported of 20")."""
    budget = ComputeBudget(steps=20)
    for trial, step in [(0, 6), (1, 6), (2, 6), (0, 7)]:
        budget.count(trial, step)
    budget.count(1, 7)
    assert budget.reached() == "step budget reached: 20 steps reported of 20"
    budget.count(2, 8)
    budget.count(0, 8)
    assert budget.reached() == ("step budget reached: 23 steps reported of 20 (3 of them by trials still running "
                                "when it was reached, before they stopped)")


@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("45s", 45), ("1d", 86400),
                                           ("02:00:00", 7200), ("01:30", 5400), ("1H", 3600)])
def test_a_time_budget_takes_walltime_forms_and_units(tmp_path: Path, text: str, seconds: int) -> None:
    """``budget: {time: 2h}`` as the issue writes it, beside the walltime forms."""
    from emews.config.workflow import load_workflow

    wf = write_workflow(tmp_path, budget={"time": text})
    assert load_workflow(str(wf)).model.budget.seconds == seconds


@pytest.mark.parametrize("budget, ends", [({"evaluations": 100000, "time": "0:00:02"}, "time"),
                                          ({"evaluations": 5, "time": "2h"}, "evaluations"),
                                          ({"evaluations": 4, "steps": 10000}, "evaluations")])
def test_a_compute_budget_beside_evaluations_ends_the_run_at_whichever_comes_first(
        emews_cmd, tmp_path: Path, budget: dict, ends: str) -> None:
    """``time`` or ``steps`` beside ``evaluations``: the run ends at the first of them reached."""
    objective = {"module": str(SLOW)} if "time" in budget else {"module": str(STRIDED), "metric": "loss"}
    space = {"x": {"type": "float", "lower": 0.0, "upper": 1.0}}
    if "steps" in budget:
        space.update(stride={"type": "constant", "value": STRIDE}, reports={"type": "constant", "value": 2})
    wf = write_workflow(tmp_path, objective=objective, space=space, budget=budget,
                        task={"timeout": 60, "isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    rows = stored_rows(exp)
    assert rows and {r["status"] for r in rows} == {"ok"}
    if ends == "time":
        assert "time budget reached" in proc.stderr and "time budget reached" in summary(exp)["budget_reached"]
        assert len(rows) < budget["evaluations"]
    else:
        assert len(rows) == budget["evaluations"] and f"{len(rows)}/{len(rows)} evaluations" in proc.stderr
        assert "budget reached" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("item, says", [
    ("budget.evaluation=50", "--set: budget.evaluation: unknown key 'evaluation'; did you mean 'evaluations'?"),
    ("budget.time=banana", "--set: budget.time: malformed duration 'banana'"),
])
def test_a_bad_budget_given_to_resume_is_named_as_set(emews_cmd, tmp_path: Path, item: str, says: str) -> None:
    """``emews resume EXP --set budget.evaluation=50`` named a temporary file,
    ``EXP/.workflow.yaml.PID.tmp: budget.evaluation: ...``, the new workflow it checked: one line
    naming ``--set`` now, exit 2, the experiment's workflow.yaml as it was."""
    wf = write_workflow(tmp_path, budget={"evaluations": 2})
    assert emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240).returncode == 0
    before = (tmp_path / "exp" / "workflow.yaml").read_text()
    proc = emews_cmd("resume", "exp", "--set", item, timeout=240)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"emews: error: {says}") and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert (tmp_path / "exp" / "workflow.yaml").read_text() == before
    assert sorted(p.name for p in (tmp_path / "exp").iterdir() if p.name.startswith(".")) == []
