"""The Optuna adapter under a trial scheduler: a trial ASHA stops early is Optuna's PRUNED trial
(its reports as intermediate values, the last as its value), one that trains to ``max_t`` COMPLETE,
as Optuna's own ``study.optimize`` records a trial that raised ``TrialPruned``; after ``emews resume``
the earlier run's trials are added with the same states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import testutil
from testutil import query

pytest.importorskip("optuna")

RECORDING = '''
import json
from emews.contrib.optuna import OptunaSampler

class Recording(OptunaSampler):
    """OptunaSampler that writes its study's trials to optuna_trials.json when its run ends."""
    def run(self, evaluator):
        try:
            super().run(evaluator)
        finally:
            trials = [{"state": t.state.name, "value": t.value, "steps": {str(k): v for k, v in t.intermediate_values.items()},
                       "rate": t.params.get("rate")} for t in self.study.trials]
            (evaluator.exp_dir / "optuna_trials.json").write_text(json.dumps(trials))
'''


def _workflow(tmp_path: Path, evaluations: int, **asha: str) -> Path:
    (tmp_path / "recording.py").write_text(RECORDING)
    return testutil.write_workflow(
        tmp_path, objective={"module": str(testutil.TRAINER), "metric": "loss"},
        space={"rate": {"type": "float", "lower": 0.0, "upper": 1.0}, "epochs": {"type": "constant", "value": 9}},
        optimizer={"name": f"{tmp_path / 'recording.py'}:Recording", "options": {"seed": 3, "n_startup_trials": 3}},
        budget={"evaluations": evaluations}, task={"isolation": "inline", "timeout": 120},
        trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 1, "reduction_factor": 3, **asha}})


def _expected(exp: Path) -> list[tuple[str, dict[str, float]]]:
    """Per task, in id order: the Optuna state the store's decisions call for, and the reports."""
    ends = dict(query(exp, "SELECT trial, action FROM decisions WHERE action IN ('stop', 'complete') "
                           "GROUP BY trial HAVING rowid = MIN(rowid)"))
    out = []
    for (task,) in query(exp, "SELECT id FROM results ORDER BY id"):
        steps = {str(s): json.loads(m)["loss"]
                 for s, m in query(exp, f"SELECT step, metrics FROM reports WHERE trial = {task} ORDER BY seq")}
        out.append(("PRUNED" if ends.get(task) == "stop" else "COMPLETE", steps))
    return out


def test_a_trial_stopped_early_is_pruned_in_optuna(emews_cmd, tmp_path: Path) -> None:
    wf = _workflow(tmp_path, 8)
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = emews_cmd.cwd / "exp"
    expected = _expected(exp)
    assert {state for state, _ in expected} == {"PRUNED", "COMPLETE"}  # ASHA stopped some, not all
    told = json.loads((exp / "optuna_trials.json").read_text())
    assert [t["state"] for t in told] == [state for state, _ in expected]
    for trial, (state, steps) in zip(told, expected):
        if state == "PRUNED":
            assert trial["steps"] == steps                  # every report an intermediate value
            assert trial["value"] == steps[max(steps, key=int)]  # its value the last one, as Optuna's tell
        else:
            assert trial["steps"] == {}

    # a resumed run adds the first run's trials to its study with the same states and values
    (exp / "optuna_trials.json").unlink()
    proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=9", timeout=300)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((exp / "optuna_trials.json").read_text())
    assert [(t["state"], t["value"]) for t in again[:8]] == [(t["state"], t["value"]) for t in told]


def test_reports_a_deaf_objective_made_after_its_stop_are_not_intermediate_values(emews_cmd, tmp_path: Path) -> None:
    """An objective that trains on after ``stop`` (deaf) goes on reporting; Optuna, whose objective
    raised TrialPruned at the prune, has no value past that step: the adapter passes on only the
    reports up to the one the scheduler answered stop, live and when a resumed run adds the trial."""
    wf = _workflow(tmp_path, 6)
    emews_cmd.env["TRAINER_DEAF"] = "1"
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = emews_cmd.cwd / "exp"
    stops = dict(query(exp, "SELECT trial, step FROM decisions WHERE action = 'stop' "
                            "GROUP BY trial HAVING rowid = MIN(rowid)"))
    assert stops, "ASHA stopped no trial"
    told = json.loads((exp / "optuna_trials.json").read_text())
    for trial, stop in stops.items():
        assert told[trial]["state"] == "PRUNED"
        reported = {str(s): json.loads(m)["loss"]
                    for s, m in query(exp, f"SELECT step, metrics FROM reports WHERE trial = {trial} ORDER BY seq")}
        assert max(map(int, reported)) == 9  # deaf: it trained every epoch
        before = {s: v for s, v in reported.items() if int(s) <= stop}
        assert told[trial]["steps"] == before, trial
        assert told[trial]["value"] == before[str(stop)]

    (exp / "optuna_trials.json").unlink()
    proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=7", timeout=300)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((exp / "optuna_trials.json").read_text())
    assert [(t["state"], t["value"], t["steps"]) for t in again[:6]] == [
        (t["state"], t["value"], t["steps"]) for t in told]


DIVERGING = '''
import math

def run(params, ctx):
    """Trial 0 diverges at step 3 (a NaN loss); the others train 4 steps."""
    loss = None
    for step in range(1, 5):
        loss = math.nan if ctx.task_id == 0 and step == 3 else params["rate"] + 1.0 / step
        if ctx.report(step=step, metrics={"loss": loss}).stop:
            break
    return {"loss": loss}
'''


def test_a_trial_pruned_at_a_nan_has_no_value_live_and_after_resume(emews_cmd, tmp_path: Path) -> None:
    """Optuna's ``tell`` gives a PRUNED trial its last step's value unless that is NaN (then none);
    a resumed run adds the earlier run's pruned trial with the same value, not an earlier step's."""
    (tmp_path / "recording.py").write_text(RECORDING)
    (tmp_path / "diverging.py").write_text(DIVERGING)
    wf = testutil.write_workflow(
        tmp_path, objective={"module": str(tmp_path / "diverging.py"), "metric": "loss"},
        space={"rate": {"type": "float", "lower": 0.0, "upper": 1.0}},
        optimizer={"name": f"{tmp_path / 'recording.py'}:Recording", "options": {"seed": 3}},
        budget={"evaluations": 2}, task={"isolation": "inline", "timeout": 120},
        trial_scheduler={"name": "median", "options": {"grace_period": 10}})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = emews_cmd.cwd / "exp"
    told = json.loads((exp / "optuna_trials.json").read_text())
    assert told[0]["state"] == "PRUNED" and set(told[0]["steps"]) == {"1", "2", "3"}
    assert told[0]["value"] is None  # NaN at its last step: Optuna's own tell

    (exp / "optuna_trials.json").unlink()
    proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=3", timeout=300)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((exp / "optuna_trials.json").read_text())
    assert (again[0]["state"], again[0]["value"]) == ("PRUNED", None)


def test_a_trial_paused_for_a_promotion_that_never_came_is_pruned(emews_cmd, tmp_path: Path) -> None:
    """ASHA's promotion variant: a trial paused at a rung and never promoted ended 'stopped early'
    (results.csv); Optuna, whose SuccessiveHalvingPruner prunes it there, is told PRUNED, its value its
    last report's, never COMPLETE as if it had trained its course."""
    wf = _workflow(tmp_path, 6, variant="promotion")
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = emews_cmd.cwd / "exp"
    import csv
    with open(exp / "results.csv") as fh:
        ended = [row["t:ended"] for row in csv.DictReader(fh)]
    assert "stopped early" in ended and "completed" in ended
    told = json.loads((exp / "optuna_trials.json").read_text())
    assert [t["state"] for t in told] == ["PRUNED" if e == "stopped early" else "COMPLETE" for e in ended]
