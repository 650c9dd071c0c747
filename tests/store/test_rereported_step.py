"""A trial that reports a step twice (a retry from a checkpoint older than its last report) and is
stopped at the second report, under a real ``mpiexec``, with each store: the decision names the
report it answered, so ``emews resume`` rebuilds the scheduler the run had (every report it took in,
the retried one too) and decides the next trial as the uninterrupted run would. A store written
before decisions named their report resumes as before, matching them by step.

The median rule (grace 3, one other trial to judge by), two workers, gated on files, never on time:
t0 (rate .5) reports 1, 2, 3 alone (checkpoints at even steps), and is killed after step 3; t1 (.1)
then trains its 9 steps; t0's retry restores step 2, reports 3 again (.01 worse: a retry does not
replay its training bit for bit) and is stopped there, t1's mean being lower. Resumed with one
evaluation more, t2 (.56) is stopped at step 3 by the scheduler that saw t0's four reports (the
median of t0's and t1's means up to step 3 is .878 against t2's .893); one rebuilt from t0's first
three (the step rule) puts the median at .911 and t2 would train on to step 9.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from emews.core.results import TrialEnd, reports_before_ends
from emews.runtime.trial_reports import TrialService
from emews.store import Store, open_store
from emews.store.postgres_queries import SCHEMA_VERSION as PG_VERSION
from emews.store.results_store import SCHEMA_VERSION as SQLITE_VERSION
from emews.store.results_store import ResultsStore
from emews.training.schedulers.median import MedianStopping
from testutil import EmewsCommand, query, wait_until, write_workflow

RATES = [0.5, 0.1, 0.56]

OBJECTIVE = '''
import os, signal, time
from pathlib import Path

def _wait_for(path):
    deadline = time.monotonic() + 120
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)

def run(params, ctx):
    """Checkpoints at even steps; t0's first attempt is killed after step 3, its retry waits for t1."""
    gates = Path(os.environ["GATES"])
    _, start = ctx.restore(default=(None, 0))
    if ctx.task_id == 1:
        _wait_for(gates / "t0-at-3")
    if ctx.task_id == 0 and start:
        _wait_for(gates / "t1-done")
    loss = None
    for step in range(start + 1, 10):
        loss = params["rate"] + 1.0 / step + (0.01 if start else 0.0)
        decision = ctx.report(step=step, metrics={"loss": loss}, checkpoint=step if step % 2 == 0 else None)
        if ctx.task_id == 0 and step == 3 and not start:
            ctx.end_attempt()  # the step-2 checkpoint is durable and rank 0 knows it
            (gates / "t0-at-3").touch()
            os.kill(os.getpid(), signal.SIGKILL)
        if decision.stop:
            break
    if ctx.task_id == 1:
        (gates / "t1-done").touch()
    return {"loss": loss}
'''


def median() -> MedianStopping:
    return MedianStopping(grace_period=3, min_samples=1).bind(metric="loss", direction="minimize")  # type: ignore[return-value]


def _launch(tmp_path: Path, store: dict) -> tuple[EmewsCommand, Path]:
    (tmp_path / "rereport.py").write_text(OBJECTIVE)
    (tmp_path / "gates").mkdir()
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"}, objective={"module": str(tmp_path / "rereport.py"), "metric": "loss"},
        space={"rate": {"type": "ordered", "values": RATES}}, budget={"evaluations": 2},
        task={"isolation": "process", "retries": 1, "timeout": 300},
        trial_scheduler={"name": "median", "options": {"grace_period": 3, "min_samples": 1}}, **store)
    cmd = EmewsCommand(tmp_path)
    cmd.env["GATES"] = str(tmp_path / "gates")
    proc = cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return cmd, tmp_path / "exp"


def _fed(store: Store) -> tuple[MedianStopping, list[str]]:
    """A median rule fed every stored report in order (what the live one took in: no report followed
    a stop) and its answers."""
    scheduler = median()
    answers = [scheduler.on_report(r.trial, r.step, r.metrics, {}).action.value for r in store.reports()]
    return scheduler, answers


def _steps(store: Store, trial: int) -> list[int]:
    return [r.step for r in store.reports(trial)]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_section(request: pytest.FixtureRequest) -> dict:
    if request.param == "sqlite":
        return {}
    return {"store": {"url": request.getfixturevalue("pg_server").url()}}


def test_a_resume_rebuilds_the_reports_of_a_retried_step_the_run_saw(tmp_path: Path, store_section: dict) -> None:
    cmd, exp = _launch(tmp_path, store_section)
    with open_store(exp, readonly=True) as store:
        assert [(r.trial, r.step) for r in store.reports()] == [(0, 1), (0, 2), (0, 3)] + [(1, s) for s in
                                                                                           range(1, 10)] + [(0, 3)]
        live, answers = _fed(store)
        assert answers == ["continue"] * 12 + ["stop"]
        last = store.reports(0)[-1]
        assert store.first_ends() == {0: TrialEnd(3, "stop", last.seq)}  # the second report of step 3
        assert reports_before_ends(store.reports(0), store.first_ends()) == store.reports(0)
        assert store.trial_states()[0].action == "stop" and store.stopped_early(0)
        rebuilt = TrialService(store, median(), metric="loss")
        assert rebuilt.rebuild() == 13
        assert rebuilt.scheduler.history == live.history  # type: ignore[union-attr]
    proc = cmd("resume", "exp", "--set", "budget.evaluations=3", "--workers", "2", timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open_store(exp, readonly=True) as store:
        t2 = store.reports(2)
        assert [live.on_report(2, r.step, r.metrics, {}).action.value for r in t2] == ["continue"] * 2 + ["stop"]
        assert _steps(store, 2) == [1, 2, 3] and store.first_end(2) == TrialEnd(3, "stop", t2[-1].seq)


def _as_before_decisions_named_reports(store: Store) -> None:
    """Make ``store`` one an older emews wrote: ``decisions`` without ``report`` (SQLite schema 3,
    PostgreSQL 6), its rows as that emews wrote them."""
    db = store.connection
    if type(store) is not ResultsStore:
        db.execute("ALTER TABLE decisions DROP COLUMN report")
        db.execute("UPDATE emews_meta SET value = '6' WHERE key = 'schema_version'")
    else:
        db.executescript("ALTER TABLE decisions DROP COLUMN report; PRAGMA user_version = 3")


def test_a_store_whose_decisions_name_no_report_resumes_by_step(tmp_path: Path, store_section: dict) -> None:
    """The same run, its store made as an older emews wrote it: ``emews resume`` migrates it, matches
    t0's stop to its first report of step 3 (the step rule, as that emews did: t2, judged by that
    scheduler, trains to step 9), and names the report of every decision it makes."""
    cmd, exp = _launch(tmp_path, store_section)
    with open_store(exp) as store:
        _as_before_decisions_named_reports(store)
    with open_store(exp, readonly=True) as store:
        assert store.first_ends() == {0: TrialEnd(3, "stop", None)}
        cut = reports_before_ends(store.reports(), store.first_ends())
        assert [(r.trial, r.step) for r in cut][-1] == (1, 9) and len(cut) == 12  # t0's second step 3 dropped
    proc = cmd("resume", "exp", "--set", "budget.evaluations=3", "--workers", "2", timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open_store(exp, readonly=True) as store:
        assert _schema_version(store) == (PG_VERSION if type(store) is not ResultsStore else SQLITE_VERSION)
        assert _steps(store, 2) == list(range(1, 10)) and 2 not in store.first_ends()
        assert store.first_ends()[0] == TrialEnd(3, "stop", None)  # the older run's row, as it was
        assert store.trial_states()[2].action == "" and not store.stopped_early(2)


def _schema_version(store: Store) -> int:
    if type(store) is not ResultsStore:
        return store.schema_version  # type: ignore[attr-defined,no-any-return]
    return store.connection.execute("PRAGMA user_version").fetchone()[0]  # type: ignore[attr-defined,no-any-return]


PAUSED_AT_AN_ODD_STEP = '''
import os, time
from pathlib import Path

def _wait_for(path):
    deadline = time.monotonic() + 120
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)

def run(params, ctx):
    """Checkpoints at even steps. The first run holds before step 3 (the test sends SIGTERM, then lets it
    report: it pauses there); the resumed one, from step 2, reports 3 again and holds before step 4."""
    gates = Path(os.environ["GATES"])
    _, start = ctx.restore(default=(None, 0))
    loss = None
    for step in range(start + 1, 10):
        hold = (not start and step == 3) or (start and step == 4)
        if hold:
            (gates / f"at-{step}").touch()
            _wait_for(gates / f"go-{step}")
        loss = params["rate"] + 1.0 / step
        if ctx.report(step=step, metrics={"loss": loss}, checkpoint=step if step % 2 == 0 else None).stop:
            break
    return {"loss": loss}
'''


def test_a_trial_killed_after_it_reported_again_the_step_it_paused_at_is_interrupted_not_paused(
    tmp_path: Path,
) -> None:
    """A SIGTERM pauses the trial at step 3 (its newest checkpoint: step 2); ``emews resume`` runs it
    from step 2, it reports step 3 again (answered continue) and the job is killed (kill -9) before step
    4. ``emews status`` says it was interrupted (its last report was answered continue), not paused
    (before: the pause of the first run's step 3 was read as the answer to the resumed run's)."""
    (tmp_path / "paused.py").write_text(PAUSED_AT_AN_ODD_STEP)
    gates = tmp_path / "gates"
    gates.mkdir()
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"}, objective={"module": str(tmp_path / "paused.py"), "metric": "loss"},
        space={"rate": {"type": "ordered", "values": [0.5]}}, budget={"evaluations": 1},
        task={"isolation": "process", "timeout": 300}, walltime={"grace": 60})
    cmd = EmewsCommand(tmp_path)
    cmd.env["GATES"] = str(gates)
    exp = tmp_path / "exp"
    job = cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "exp")
    assert wait_until(lambda: (gates / "at-3").exists() or job.poll() is not None, timeout=240)
    assert job.poll() is None, job.communicate()
    job.send_signal(signal.SIGTERM)
    rank0_log = exp / "emews.log"  # rank 0 took the signal in: its step-3 report is answered pause
    assert wait_until(lambda: rank0_log.exists() and "pause at their next report" in rank0_log.read_text(),
                      timeout=120)
    (gates / "go-3").touch()
    _, err = job.communicate(timeout=180)
    assert job.returncode == 143, err
    assert query(exp, "SELECT trial, step, action FROM decisions") == [(0, 3, "pause")]

    again = cmd.popen("resume", "exp", "--workers", "1")
    assert wait_until(lambda: (gates / "at-4").exists() or again.poll() is not None, timeout=240)
    assert again.poll() is None, again.communicate()
    assert [s for (s,) in query(exp, "SELECT step FROM reports ORDER BY seq")] == [1, 2, 3, 3]
    cmd.kill_all()
    again.wait()
    assert cmd.leftovers_after_exit() == []
    cmd.remove_killed_segments()  # its MPICH segment: no later job runs on this experiment
    status = cmd("status", "exp", timeout=120)
    assert status.returncode == 0, status.stderr
    assert "0 paused, 1 interrupted" in status.stdout and "  trial 0: step 3, loss 0.833333, interrupted" in \
        status.stdout.splitlines(), status.stdout
