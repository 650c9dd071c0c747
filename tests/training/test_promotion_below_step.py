"""ASHA's promotion variant with an objective that reports every second step: a trial pauses at rung 1
by its report of step 2, and its promotion is stored with that step. ``emews resume`` must take the
promotion back in (before: the rebuild compared the step with the rung, 2 with 1, kept the promoted
trial waiting and promoted it again, or, once others outranked it, held it until the end)."""

from __future__ import annotations

from pathlib import Path

from emews.core.results import Outcome, Status, Task
from emews.runtime.trial_reports import TrialService
from emews.store.results_store import ResultsStore
from emews.training.messages import Report
from emews.training.schedulers.asha import ASHA
from testutil import EmewsCommand, query, wait_until, write_workflow

EVERY_SECOND_STEP = '''
import os, time
from pathlib import Path

def run(params, ctx):
    """Reports steps 2, 4, 6, 8 with a checkpoint each; with HOLD, task 0 run again (promoted) holds
    before its next report until the file GO exists."""
    state, start = ctx.restore(default=(0, 0))
    loss = None
    for step in range(start + 2, 9, 2):
        if os.environ.get("HOLD") and ctx.task_id == 0 and start:
            Path(os.environ["HOLD"]).touch()
            deadline = time.monotonic() + 120
            while not Path(os.environ["GO"]).exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        loss = params["rate"] + 1.0 / step
        if ctx.report(step=step, metrics={"loss": loss}, checkpoint=step).stop:
            break
    return {"loss": loss}
'''
#: t0 pauses at rung 1 (alone), t1 too; with t2 there t0 is the best of 3: promoted
RATES = [0.1, 0.5, 0.6]


def asha() -> ASHA:
    return ASHA(max_t=9, grace_period=1, reduction_factor=3, variant="promotion").bind(  # type: ignore[return-value]
        metric="loss", direction="minimize")


def test_a_rebuilt_asha_takes_in_a_promotion_stored_with_the_step_the_trial_paused_at(tmp_path: Path) -> None:
    """The trial service with a real store: t0 is promoted from rung 1 (its report of step 2), then two
    better trials reach rung 1. The rebuilt scheduler has the live one's waiting trials: t0 runs on,
    not held again (before: held, and no longer promotable)."""
    rates = [0.5, 0.9, 0.1, 0.95, 0.96, 0.97, 0.05, 0.06]
    tasks = {t: Task(t, {"rate": r}, t, 0.0) for t, r in enumerate(rates)}
    with ResultsStore(tmp_path / "results.db") as store:
        live = TrialService(store, asha(), metric="loss")

        def report(t: int) -> str:
            loss = tasks[t].params["rate"] + 0.5
            action = live.handle(Report(t, 0, 2, {"loss": loss}, 0.0), tasks[t]).decision.action.value  # type: ignore[union-attr]
            if action == "pause":
                live.intercept(tasks[t], Outcome(t, Status.OK, loss, {"loss": loss}))
            return action

        assert [report(t) for t in range(6)] == ["pause", "pause", "continue", "pause", "pause", "pause"]
        assert live.promotable() == [0]
        live.promote(tasks[0])
        assert store.promotions() == [(0, 2)]
        assert [report(t) for t in (6, 7)] == ["continue", "continue"]   # t0 is no longer among the best
        rebuilt = TrialService(store, asha(), metric="loss")
        rebuilt.rebuild()
        assert rebuilt.scheduler.waiting() == live.scheduler.waiting() == [1, 3, 4, 5]  # type: ignore[union-attr]
        assert rebuilt.resumed_wait(tasks[0]) is None  # it runs again, from its checkpoint


def _run(tmp_path: Path, hold: bool) -> tuple[EmewsCommand, Path]:
    (tmp_path / "strided.py").write_text(EVERY_SECOND_STEP)
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"}, objective={"module": str(tmp_path / "strided.py"), "metric": "loss"},
        space={"rate": {"type": "ordered", "values": RATES}}, budget={"evaluations": len(RATES)},
        task={"isolation": "process", "timeout": 300},
        trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 1, "reduction_factor": 3,
                                                     "variant": "promotion"}})
    cmd = EmewsCommand(tmp_path)
    held, go = tmp_path / "held", tmp_path / "go"
    exp = tmp_path / "exp"
    if not hold:
        proc = cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=300)
        assert proc.returncode == 0, proc.stderr
        return cmd, exp
    cmd.env.update(HOLD=str(held), GO=str(go))
    job = cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "exp")
    assert wait_until(lambda: held.exists() or job.poll() is not None, timeout=240)
    assert job.poll() is None, job.communicate()
    cmd.kill_all()  # kill -9 of the whole job while the promoted t0 trains towards its next report
    job.wait()
    assert cmd.leftovers_after_exit() == []
    return cmd, exp


def test_a_trial_promoted_below_its_step_and_killed_is_interrupted_and_promoted_once(tmp_path: Path) -> None:
    """Real mpiexec, one worker: t0 (rate .1) is promoted from rung 1, which it reached at step 2, and
    the job is killed (kill -9) before it reports again. ``emews status`` says it was interrupted (it
    ran), not paused; ``emews resume`` runs it on without a second promotion, and the experiment ends
    with the promotions, decisions and results of the uninterrupted run (tmp_path/plain)."""
    (tmp_path / "plain").mkdir()
    _, plain = _run(tmp_path / "plain", hold=False)
    cmd, exp = _run(tmp_path, hold=True)
    assert query(exp, "SELECT trial, step FROM promotions") == [(0, 2)]
    status = cmd("status", "exp", timeout=120)
    assert status.returncode == 0, status.stderr
    assert "  trial 0: step 2, loss 0.6, interrupted" in status.stdout.splitlines(), status.stdout
    (tmp_path / "go").touch()
    proc = cmd("resume", "exp", "--workers", "1", timeout=300)
    assert proc.returncode == 0, proc.stderr
    for sql in ("SELECT trial, step, resource FROM promotions ORDER BY seq",
                "SELECT trial, step, action FROM decisions ORDER BY rowid",
                "SELECT id, status, objective FROM results ORDER BY id"):
        assert query(exp, sql) == query(plain, sql), sql
