"""kill -9 after a trial's report was stored and before its scheduler's decision was: the resumed run
replays every stored report into the scheduler and dropped the decision the replay of that last one
made; the trial then ran again, reported the same step again and ASHA (the trial in that rung
already) let it continue. Trial 1, stopped at rung 1 by the killed run's rule, trained on to rung 3.
Now the replay's decision on that report is the trial's: it stays stopped (its decision stored)."""

from __future__ import annotations

import json
from pathlib import Path

from testutil import TESTS, events, query, said, wait_until, write_workflow

TRAINER = TESTS / "objectives" / "trainer.py"

HELD_ASHA = '''
import os, pathlib, time
from emews.training.schedulers.asha import ASHA


class HeldASHA(ASHA):
    """ASHA that, while the file HOLD_DECISION exists, hangs on trial 1's report of step 1: the report
    is stored, the decision is not (the test kills the job there)."""

    def on_report(self, trial, step, metrics, params):
        hold = pathlib.Path(os.environ["HOLD_DECISION"])
        if hold.exists() and (trial, step) == (1, 1):
            hold.with_name("deciding").touch()
            while True:
                time.sleep(0.01)
        return super().on_report(trial, step, metrics, params)
'''


def test_a_kill_between_a_report_and_its_decision_keeps_the_decision_on_resume(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "held_asha.py").write_text(HELD_ASHA)
    points = tmp_path / "points.jsonl"
    points.write_text("".join(json.dumps({"rate": r}) + "\n" for r in (0.1, 0.9)))
    log, hold = tmp_path / "trainer.jsonl", tmp_path / "hold"
    hold.touch()
    wf = write_workflow(tmp_path, objective={"module": str(TRAINER), "metric": "loss"},
                        space={"rate": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "epochs": {"type": "constant", "value": 9}},
                        optimizer={"name": "sweep", "options": {"file": str(points)}},
                        trial_scheduler={"name": f"{tmp_path / 'held_asha.py'}:HeldASHA",
                                         "options": {"max_t": 9, "grace_period": 1, "reduction_factor": 3}},
                        budget={"evaluations": 2})
    emews_cmd.env.update(TRAINER_LOG=str(log), HOLD_DECISION=str(hold))
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", str(exp))
    assert wait_until((tmp_path / "deciding").exists, timeout=180), said(job)
    assert query(exp, "SELECT trial, step FROM reports WHERE trial = 1") == [(1, 1)]
    assert query(exp, "SELECT * FROM decisions WHERE trial = 1") == []
    emews_cmd.kill_all()                                 # the report stored, its decision not
    job.wait(timeout=60)
    assert emews_cmd.leftovers_after_exit() == []

    hold.unlink()
    resumed = emews_cmd("resume", str(exp), timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    # rung 1 held trial 0 (loss 1.1): trial 1's 1.9 is past the cutoff, as the killed run was deciding
    assert query(exp, "SELECT step, action FROM decisions WHERE trial = 1 ORDER BY rowid")[0] == (1, "stop")
    answered = [(e["step"], e["action"]) for e in events(log) if e["event"] == "report" and e["task"] == 1]
    assert answered and all(action == "stop" for _, action in answered), answered   # never told to go on
    assert max(step for _, step in query(exp, "SELECT trial, step FROM reports WHERE trial = 1")) == 2
    status = emews_cmd("status", str(exp))
    assert status.returncode == 0, status.stderr
    row = [line for line in (exp / "results.csv").read_text().splitlines()[1:] if line.startswith("1,")]
    assert row and "stopped" in row[0], (exp / "results.csv").read_text()
