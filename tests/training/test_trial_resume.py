"""Training trials across stops (reliability round 3, findings 3, 4 and 6): ``kill -9`` of the whole
job or a walltime stop, then ``emews resume``, under a real ``mpiexec``.

What the objective itself logs (``tests/objectives/trainer.py``: each checkpoint names the trial and
the rate that trained it) and the store's rows are the evidence: no trial restores another's
checkpoint, no id is issued twice, every trial that reported ends with a result, a PBT trial goes on
with the parameters it explored, and an ASHA trial waiting at a rung stays waiting until promoted.
Everything is synchronized on store rows (read-only) and log lines, never on sleeps.
"""

from __future__ import annotations

import csv
import json
import signal
from pathlib import Path

import pytest

from testutil import (TESTS, events, query, read_only, said, stored_rows, wait_until, walltime_pause_time,
                      write_workflow)

TRAINER = TESTS / "objectives" / "trainer.py"
PROMOTION = {"name": "asha", "options": {"max_t": 9, "grace_period": 1, "reduction_factor": 3,
                                         "variant": "promotion"}}
#: trials paused at rung 1 (not for the walltime), never promoted from it, that still reported a later
#: step (finding 6's query)
TRAINED_ON_WITHOUT_PROMOTION = (
    "SELECT trial FROM decisions d WHERE action = 'pause' AND step = 1 AND NOT EXISTS (SELECT 1 FROM promotions p "
    "WHERE p.trial = d.trial AND p.step = 1) AND NOT EXISTS (SELECT 1 FROM pauses w WHERE w.task = d.trial "
    "AND w.step = 1) AND (SELECT MAX(step) FROM reports r WHERE r.trial = d.trial) > 1")


def write_points(path: Path, rates: list[float]) -> None:
    path.write_text("".join(json.dumps({"rate": r}) + "\n" for r in rates))


def trainer_space(epochs: int) -> dict:
    return {"rate": {"type": "float", "lower": 0.0, "upper": 1.0}, "epochs": {"type": "constant", "value": epochs}}


def kill_job(emews_cmd, job) -> None:
    """kill -9 of every process of the job at once, as a node loss."""
    emews_cmd.kill_all()
    job.wait()
    assert emews_cmd.leftovers_after_exit() == []


def assert_one_rate_per_trial(exp: Path) -> None:
    """Every trial's reports follow ``loss = rate + 1/step`` with the one rate its result carries."""
    params = {r["id"]: json.loads(r["params"]) for r in stored_rows(exp)}
    for trial, step, metrics in query(exp, "SELECT trial, step, metrics FROM reports ORDER BY seq"):
        assert json.loads(metrics)["loss"] - 1 / step == pytest.approx(params[trial]["rate"]), (trial, step)


@pytest.mark.parametrize("stop", ["kill -9", "SIGTERM"])
def test_a_stop_while_trials_wait_at_a_rung_reuses_no_id_and_they_stay_waiting(emews_cmd, tmp_path: Path,
                                                                              stop: str) -> None:
    """ASHA promotion (rf 3), one worker, rates .1 .5 .6: each trial pauses at rung 1 (one step, well
    under the half second after which a running task is recorded); with three there, t0 is promoted
    and holds at a gate before step 2. kill -9 of the whole job (or SIGTERM: t0 has not reported
    since its promotion and is aborted); the resume runs new points (the points file changed). t1
    and t2 were recorded with their first report, so the new points get new ids (before: ids 1 and 2
    again, restoring t1's and t2's checkpoints at other rates), and they wait at rung 1 again
    (before: lost, re-run as interrupted and trained on without a promotion, or, at a SIGTERM,
    ended with their rung-1 results)."""
    log, gate, points = tmp_path / "log.jsonl", tmp_path / "gate", tmp_path / "points.jsonl"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_GATE=str(gate), TRAINER_GATE_AT="2")
    write_points(points, [0.1, 0.5, 0.6, 0.7, 0.8])
    wf = write_workflow(tmp_path, optimizer={"name": "sweep", "options": {"file": str(points), "backlog": 4}},
                        objective={"module": str(TRAINER), "metric": "loss"}, space=trainer_space(9),
                        budget={"evaluations": 5}, task={"isolation": "process", "timeout": 600},
                        trial_scheduler=PROMOTION)
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "exp")
    held = lambda: sorted(e["task"] for e in events(log) if e["event"] == "start" and e["restored"] == 1)  # noqa: E731
    assert wait_until(lambda: held() == [0] or job.poll() is not None, timeout=240) and job.poll() is None, \
        job.communicate()
    assert read_only(exp, "SELECT DISTINCT trial FROM reports ORDER BY trial") == [(0,), (1,), (2,)]
    assert wait_until(lambda: read_only(exp, "SELECT id FROM tasks WHERE id = 0"), timeout=60)  # t0 runs on
    if stop == "SIGTERM":
        job.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=180)
        assert job.returncode == 143, err
        assert emews_cmd.leftovers_after_exit() == []
        assert query(exp, "SELECT task, step FROM waits ORDER BY task") == [(0, 1), (1, 1), (2, 1)]
    else:
        kill_job(emews_cmd, job)
    assert query(exp, "SELECT DISTINCT trial FROM reports WHERE trial NOT IN (SELECT id FROM tasks)") == []
    assert stored_rows(exp) == []

    gate.touch()
    write_points(points, [0.1, 0.02, 0.03])   # other points than the lost run's
    second = emews_cmd("resume", "exp", timeout=300)
    assert second.returncode == 0, second.stderr
    starts = [e for e in events(log) if e["event"] == "start" and e["restored"]]
    foreign = [e for e in starts if e["from_trial"] != e["task"] or e["from_rate"] != e["rate"]]
    assert foreign == []
    results = stored_rows(exp)
    assert [(r["id"], json.loads(r["params"])["rate"]) for r in results] == \
        [(0, 0.1), (1, 0.5), (2, 0.6), (3, 0.02), (4, 0.03)]
    assert {t for (t,) in query(exp, "SELECT DISTINCT trial FROM reports")} == set(range(5))
    assert_one_rate_per_trial(exp)
    assert query(exp, TRAINED_ON_WITHOUT_PROMOTION) == []


@pytest.mark.parametrize("stop", ["kill -9", "SIGTERM"])
def test_pbt_resumes_an_exploited_trial_with_its_explored_parameters(emews_cmd, tmp_path: Path, stop: str) -> None:
    """PBT (interval 3, bottom half), 2 workers: t0 (rate .1) holds at step 6; t1 (.9) starts once t0
    holds and, once its task is recorded, is the worse at step 3: it clones t0 with an explored rate,
    reports once from the clone and holds. kill -9 of the whole job (or SIGTERM: both held trials
    are aborted after the grace and re-queued as a walltime pause would be). The task row of t1 holds the
    explored rate, and the resumed t1 trains with it (before: with .9, from a checkpoint trained at
    the explored rate); every later lineage row starts from the rate before."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_GATE=str(gate), TRAINER_HOLD_AT="6", TRAINER_WAIT_HELD="1",
                         TRAINER_HOLD_CLONES="1", TRAINER_GO_AT="1:3")
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"}, objective={"module": str(TRAINER), "metric": "loss"},
        space={"rate": {"type": "ordered", "values": [0.1, 0.9]}, "epochs": {"type": "constant", "value": 12}},
        budget={"evaluations": 2}, task={"isolation": "process", "timeout": 600},
        trial_scheduler={"name": "pbt", "options": {"perturbation_interval": 3, "quantile_fraction": 0.5,
                                              "resample_probability": 0.0, "mutations": ["rate"]}},
        **({"walltime": {"grace": 2}} if stop == "SIGTERM" else {}))   # held trials are aborted after 2 s
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: read_only(exp, "SELECT id FROM tasks WHERE id = 1") or job.poll() is not None,
                      timeout=240) and job.poll() is None, job.communicate()
    gate.with_name("gate.go").touch()   # t1 was recorded before its exploit
    cloned_and_reported = ("SELECT COUNT(*) FROM reports r JOIN lineage l ON l.trial = r.trial AND r.seq > l.report "
                           "WHERE r.trial = 1")
    assert wait_until(lambda: read_only(exp, cloned_and_reported) not in ([], [(0,)]) or job.poll() is not None,
                      timeout=240) and job.poll() is None, job.communicate()
    if stop == "SIGTERM":
        job.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=180)
        assert job.returncode == 143, err
        assert emews_cmd.leftovers_after_exit() == []
    else:
        kill_job(emews_cmd, job)
    [(trial, donor, old, new)] = query(exp, "SELECT trial, donor, old_params, new_params FROM lineage")
    old, new = json.loads(old), json.loads(new)
    assert (trial, donor, old["rate"]) == (1, 0, 0.9) and new["rate"] != 0.9
    [(params,)] = query(exp, "SELECT params FROM tasks WHERE id = 1")
    assert json.loads(params) == new                    # the tasks row followed the exploit

    gate.touch()
    second = emews_cmd("resume", "exp", timeout=300)
    assert second.returncode == 0, second.stderr
    resumed = [e for e in events(log) if e["event"] == "start" and e["task"] == 1][2:]  # after first run, clone
    assert resumed and resumed[0]["rate"] == new["rate"] and resumed[0]["restored"] >= 6
    lineage = query(exp, "SELECT old_params, new_params FROM lineage WHERE trial = 1 ORDER BY seq")
    for (_, before), (after, _) in zip(lineage, lineage[1:]):
        assert json.loads(after) == json.loads(before)  # each exploit starts from what the trial ran with
    final = {r["id"]: json.loads(r["params"]) for r in stored_rows(exp)}
    assert sorted(final) == [0, 1] and final[1] == json.loads(lineage[-1][1])
    report = query(exp, "SELECT report FROM lineage WHERE trial = 1 ORDER BY seq LIMIT 1")[0][0]
    since = query(exp, f"SELECT step, metrics FROM reports WHERE trial = 1 AND seq > {report} ORDER BY seq")
    rates = {round(json.loads(m)["loss"] - 1 / s, 9) for s, m in since}
    assert rates <= {round(json.loads(n)["rate"], 9) for _, n in lineage}   # never trained again at .9


def test_a_walltime_stop_keeps_trials_waiting_and_the_resumed_run_promotes_them(emews_cmd, tmp_path: Path) -> None:
    """ASHA promotion (rf 3). Five workers start the five trials at once; each holds before its
    step-1 report until rank 0 logged the pause time (15 s into the job), then they report in task
    order, as one worker would, so no promotion is decided before the pause. Rates .5 .1 .9 .3 wait at
    rung 1; .05 leads it and pauses for the walltime. The run stops itself at the walltime margin
    (exit 3) with no result: the waiting trials stay waiting (table ``waits``), not ended. The resume
    (one worker) adds .95 .96 .97 .98: t4 goes on to rung 3; with 6 trials at rung 1, t1 is promoted
    across the boundary, with 9, t3; at rung 3 t4 is promoted and trains to max_t. t0 and t2 are
    never promoted and never train past step 1; they end with the results they paused with."""
    points, gate = tmp_path / "points.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_GATE=str(gate), TRAINER_GATE_AT="1", TRAINER_IN_TURN="1",
                         TRAINER_LOG=str(tmp_path / "log.jsonl"))
    rates = [0.5, 0.1, 0.9, 0.3, 0.05]
    write_points(points, rates)
    wf = write_workflow(tmp_path, optimizer={"name": "sweep", "options": {"file": str(points), "backlog": 10}},
                        objective={"module": str(TRAINER), "metric": "loss"}, space=trainer_space(9),
                        budget={"evaluations": 5}, task={"isolation": "process"}, trial_scheduler=PROMOTION,
                        walltime={"limit": "00:00:30", "margin": 15})
    job = emews_cmd.popen("launch", str(wf), "--workers", "5", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    assert walltime_pause_time(exp) is not None, job.communicate(timeout=60)
    gate.touch()
    _, err = job.communicate(timeout=240)
    assert job.returncode == 3, err
    assert stored_rows(exp) == []
    assert query(exp, "SELECT task, step FROM waits ORDER BY task") == [(0, 1), (1, 1), (2, 1), (3, 1)]
    assert query(exp, "SELECT task, step FROM pauses") == [(4, 1)]
    status = emews_cmd("status", "exp")
    assert status.returncode == 0, status.stderr
    assert "0 running, 5 paused" in status.stdout

    write_points(points, [*rates, 0.95, 0.96, 0.97, 0.98])
    second = emews_cmd("resume", "exp", "--workers", "1", "--set", "walltime.limit=00:10:00", "--set",
                       "walltime.margin=0", "--set", "budget.evaluations=9", timeout=300)
    assert second.returncode == 0, second.stderr
    assert query(exp, "SELECT trial, step FROM promotions ORDER BY seq") == [(1, 1), (3, 1), (4, 3)]
    steps = {t: [s for (s,) in query(exp, f"SELECT step FROM reports WHERE trial = {t} ORDER BY seq")]
             for t in range(9)}
    assert steps == {0: [1], 1: [1, 2, 3], 2: [1], 3: [1, 2, 3], 4: list(range(1, 10)),
                     5: [1], 6: [1], 7: [1], 8: [1]}
    results = {r["id"]: r for r in stored_rows(exp)}
    assert {t: (r["status"], round(r["objective"], 9)) for t, r in results.items()} == \
        {t: ("ok", round(rate + 1 / steps[t][-1], 9)) for t, rate in enumerate([*rates, 0.95, 0.96, 0.97, 0.98])}
    assert query(exp, TRAINED_ON_WITHOUT_PROMOTION) == []


def test_next_id_passes_every_id_the_training_tables_hold(tmp_path: Path) -> None:
    """A trial that reported, checkpointed or was cloned from holds its id, with or without a tasks row."""
    from emews.store.results_store import ResultsStore
    from emews.store.trial_store import TrialStore
    from emews.training.messages import Report

    with ResultsStore(tmp_path / "results.db") as store:
        trials = TrialStore(store.connection)
        assert store.next_id() == 0
        trials.add_report(Report(trial=4, session=0, step=1, metrics={"loss": 1.0}, time=0.0), 1.0, 1.0)
        assert store.next_id() == 5
        trials.add_decision(9, 1, "pause")
        assert store.next_id() == 10
        trials.add_lineage(2, 3, 12, 1, {"rate": 0.1}, {"rate": 0.2}, 1)
        assert store.next_id() == 13


def test_a_trial_the_run_stopped_as_it_paused_waits_again_with_its_last_reported_result(tmp_path: Path) -> None:
    """The scheduler's replay says who waits: a trial whose task ended after its pause (its outcome
    stored in ``waits``) waits again with that outcome; one the stop caught before its outcome arrived
    waits with its last report's metric. A trial its rebuilt scheduler does not pause is not held."""
    from emews.core.results import Outcome, Status, Task
    from emews.store.results_store import ResultsStore
    from emews.store.trial_store import TrialStore
    from emews.runtime.trial_reports import TrialService
    from emews.training.schedulers.asha import ASHA
    from emews.training.messages import Report

    with ResultsStore(tmp_path / "results.db") as store:
        trials = TrialStore(store.connection)
        for trial, loss in ((0, 1.5), (1, 1.1), (2, 1.05)):
            trials.add_report(Report(trial=trial, session=0, step=1, metrics={"loss": loss}, time=0.0), loss, loss,
                              Task(trial, {"rate": loss - 1}, 0, 0.0))
        trials.add_wait(0, 1, Outcome(0, Status.OK, 1.5, {"loss": 1.5, "steps": 1}))
        service = TrialService(trials, ASHA(max_t=9, reduction_factor=3, variant="promotion").bind(
            metric="loss", direction="minimize"), metric="loss")
        service.rebuild()   # t0 and t1 paused at rung 1 (n // 3 = 0); t2 is the top 1 of 3
        held = {task.id: service.resumed_wait(task) for task, _ in store.unfinished()}
        assert (held[0].step, held[0].outcome.value, held[0].outcome.metrics) == (1, 1.5, {"loss": 1.5, "steps": 1})
        assert (held[1].step, held[1].outcome.status, held[1].outcome.value) == (1, Status.OK, 1.1)
        assert held[2] is None


def test_a_rebuild_gives_the_scheduler_no_report_a_trial_made_after_its_stop(tmp_path: Path) -> None:
    """ASHA's rungs at 1 and 3 (one worker's order): t0 (rate .1) then t1 (rate .9) report step 1; t1 is
    stopped there but reports steps 2 and 3 anyway (each answered stop again, stored, given to no
    scheduler); t2 (.05) then reports 1, 2 and 3. The scheduler ``emews resume`` rebuilds from the store has
    the live one's rungs (t1 is not at rung 3) and answers t2's next reports as the live one; before, the
    replay fed t1's steps 2 and 3 to ASHA, and its rung 3 held a trial the live run never put there."""
    from emews.core.results import Task
    from emews.runtime.trial_reports import TrialService
    from emews.store.results_store import ResultsStore
    from emews.training.messages import Report
    from emews.training.schedulers.asha import ASHA

    def asha() -> ASHA:
        return ASHA(max_t=9, grace_period=1, reduction_factor=3).bind(metric="loss", direction="minimize")

    tasks = {t: Task(t, {"rate": rate}, t, 0.0) for t, rate in enumerate((0.1, 0.9, 0.05))}

    def report(service: TrialService, trial: int, step: int) -> str:
        loss = tasks[trial].params["rate"] + 1 / step
        reply = service.handle(Report(trial, 0, step, {"loss": loss}, 0.0), tasks[trial])
        assert reply is not None
        return reply.decision.action.value

    with ResultsStore(tmp_path / "results.db") as store:
        live = TrialService(store, asha(), metric="loss")
        answers = [report(live, t, s) for t, s in ((0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3), (2, 1))]
        assert answers == ["continue"] * 3 + ["stop"] * 3 + ["continue"]
        rebuilt = TrialService(store, asha(), metric="loss")
        assert rebuilt.rebuild() == 5   # t1's steps 2 and 3 not replayed
        assert rebuilt.scheduler.recorded == live.scheduler.recorded and 1 not in live.scheduler.recorded[3]
        assert report(rebuilt, 1, 4) == "stop"   # t1 stays stopped after the resume
        assert [report(rebuilt, 2, s) for s in (2, 3)] == [report(live, 2, s) for s in (2, 3)]


DIVERGED_AT_A_RUNG = '''
import math, os, time
from pathlib import Path

def run(params, ctx):
    """Ranked by its accuracy (finite), its loss diverged (NaN): paused at rung 1, it holds until the gate."""
    gate = Path(os.environ["GATE"])
    for step in range(1, 4):
        loss = float(os.environ.get("LOSS", "nan")) / step
        decision = ctx.report(step=step, metrics={"loss": loss, "acc": 0.1 * step}, checkpoint=step)
        if decision.stop:
            gate.with_name("held").touch()
            deadline = time.monotonic() + 120
            while not gate.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            break
'''


def _killed_while_paused(emews_cmd, tmp_path: Path) -> Path:
    """Launch DIVERGED_AT_A_RUNG (one trial), kill -9 the job while the trial holds at its pause, resume."""
    (tmp_path / "diverged.py").write_text(DIVERGED_AT_A_RUNG)
    gate = tmp_path / "gate"
    emews_cmd.env["GATE"] = str(gate)
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "diverged.py"), "metric": "loss"},
                        space={"rate": {"type": "float", "lower": 0.0, "upper": 1.0}},
                        optimizer={"name": "random", "options": {"seed": 1}},
                        budget={"evaluations": 1}, task={"isolation": "inline", "timeout": 600},
                        trial_scheduler={"name": "asha", "options": {
                            "max_t": 9, "grace_period": 1, "reduction_factor": 3, "variant": "promotion",
                            "metric": "acc", "mode": "max"}})
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "exp")
    assert wait_until(lambda: (tmp_path / "held").exists() or job.poll() is not None, timeout=240)
    assert job.poll() is None, job.communicate()
    kill_job(emews_cmd, job)
    assert query(exp, "SELECT trial, step, action FROM decisions") == [(0, 1, "pause")]
    assert stored_rows(exp) == []
    gate.touch()
    second = emews_cmd("resume", "exp", timeout=300)
    assert second.returncode == 0, second.stderr
    assert query(exp, "SELECT COUNT(*) FROM reports") == [(1,)]  # held, not run again
    return exp


def test_a_trial_killed_while_paused_and_never_promoted_is_stopped_early(emews_cmd, tmp_path: Path) -> None:
    """As a trial whose task ended at its pause and that was never promoted, one the job was killed
    at while it paused ends ``stopped early`` (results.csv, the summary), not ``completed``: it
    trained one step of nine (before: completed, its wait never stored)."""
    emews_cmd.env["LOSS"] = "2.0"
    exp = _killed_while_paused(emews_cmd, tmp_path)
    [result] = stored_rows(exp)
    assert (result["status"], result["objective"]) == ("ok", 2.0)
    with open(exp / "results.csv") as fh:
        [row] = list(csv.DictReader(fh))
    assert (row["t:step"], row["t:ended"]) == ("1", "stopped early")
    assert json.loads((exp / "summary.json").read_text())["endings"] == {"stopped early": 1}


def test_a_trial_paused_at_a_nan_resumes_failed_not_ok(emews_cmd, tmp_path: Path) -> None:
    """ASHA promotion ranks by ``acc``; the objective's metric ``loss`` is NaN. The trial pauses at rung 1
    and the job is killed (kill -9) before its task ended: ``emews resume`` holds it again with its last
    report as its outcome, and, never promoted (nothing else to run), it ends with that outcome: a NaN is
    no success (before: ``ok`` with the objective NaN, ranked by ``exp.best`` and counted ok)."""
    exp = _killed_while_paused(emews_cmd, tmp_path)
    [result] = stored_rows(exp)
    assert result["status"] == "failed" and "NaN" in result["error"], result


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_an_ok_outcome_with_a_value_that_is_not_finite_is_a_failed_result(value: float) -> None:
    """The one place an outcome becomes a result (every path: resume, retry, pool, team) never makes a
    non-finite value a success that results.csv, the summary or ``best`` could rank."""
    from emews.core.results import Outcome, Result, Status, Task

    result = Result.from_outcome(Task(3, {"x": 1}, 0, 0.0), Outcome(3, Status.OK, value, {"acc": 0.5}), -1.0)
    assert (result.status, result.loss) == (Status.FAILED, float("inf"))
    assert result.error == f"objective returned {'NaN' if value != value else f'{value:g}'}"


def test_a_rebuilt_pbt_draws_as_the_live_one_after_a_trial_diverged(tmp_path: Path) -> None:
    """A report whose metric is NaN (a diverged model) is answered stop by the trial service without
    asking the scheduler; PBT seeds each draw with the reports it has seen. The PBT ``emews resume``
    rebuilds from the store must not count the NaN report either: its next exploit draws the same
    parameters as the uninterrupted run's (before: one report more, other draws)."""
    from emews.core.results import Task
    from emews.core.space import Float, Space
    from emews.runtime.trial_reports import TrialService
    from emews.store.results_store import ResultsStore
    from emews.training.messages import Action, Report
    from emews.training.schedulers.pbt import PBT

    space = Space({"lr": Float(1e-3, 1e-1, log=True)})

    def pbt() -> PBT:
        return PBT(perturbation_interval=1, quantile_fraction=0.5, resample_probability=1.0).bind(
            metric="loss", direction="minimize", space=space, seed=7)

    tasks = {t: Task(t, {"lr": 0.01 * (t + 1)}, t, 0.0) for t in range(4)}
    with ResultsStore(tmp_path / "results.db") as store:
        live = TrialService(store, pbt(), metric="loss")
        answers = [live.handle(Report(t, 0, step, {"loss": loss}, 0.0), tasks[t]).decision.action.value
                   for t, step, loss in ((0, 1, 0.1), (1, 1, 0.2), (2, 1, float("nan")), (3, 1, 0.4))]
        assert answers[2] == "stop"  # diverged: no scheduler asked
        rebuilt = TrialService(store, pbt(), metric="loss")
        rebuilt.rebuild()
        assert rebuilt.scheduler.reports == live.scheduler.reports
        after = [s.scheduler.on_report(3, 2, {"loss": 0.5}, tasks[3].params) for s in (live, rebuilt)]
        assert after[0].action is Action.EXPLOIT and after[0] == after[1]


def test_a_rebuilt_hyperband_deals_brackets_as_the_live_one_after_a_trial_diverged(tmp_path: Path) -> None:
    """Hyperband deals trials to brackets in the order of their first report; a trial whose first
    report is NaN never reached it live (stopped at once), so the rebuilt one deals it no bracket
    either, and the trials after it keep their brackets (before: each one bracket on)."""
    from emews.core.results import Task
    from emews.runtime.trial_reports import TrialService
    from emews.store.results_store import ResultsStore
    from emews.training.messages import Report
    from emews.training.schedulers.hyperband import Hyperband

    def hyperband() -> Hyperband:
        return Hyperband(max_t=9, grace_period=1, reduction_factor=3).bind(metric="loss", direction="minimize")

    with ResultsStore(tmp_path / "results.db") as store:
        live = TrialService(store, hyperband(), metric="loss")
        for t, loss in ((0, 0.1), (1, float("nan")), (2, 0.3), (3, 0.4)):
            live.handle(Report(t, 0, 1, {"loss": loss}, 0.0), Task(t, {"rate": loss}, t, 0.0))
        rebuilt = TrialService(store, hyperband(), metric="loss")
        rebuilt.rebuild()
        assert rebuilt.scheduler.bracket_of == live.scheduler.bracket_of == {0: 0, 2: 1, 3: 2}


HELD_TRAINER = '''\
import pathlib, time

def run(params, ctx):
    events = pathlib.Path(params["events"])
    state, start = ctx.restore(default=(0, 0))
    (events / f"start-{start}").touch()
    if params["second"] == "stuck" and start == 2:  # caught again before it trains a step
        (events / "held-stuck").touch()
        while True:
            time.sleep(0.05)
    hold = {0: 2, 2: 4}.get(start)  # the first run holds after step 2, the second (from 2) after step 4
    for step in range(start + 1, 7):
        ctx.report(step=step, metrics={"loss": 1.0 / step}, checkpoint=step)
        if step == hold:
            (events / f"held-{step}").touch()
            while True:  # until the job is killed
                time.sleep(0.05)
    return 1.0 / 6
'''


@pytest.mark.parametrize("second", ["trains", "stuck"])
def test_a_trial_that_trained_on_between_two_kills_is_run_again_not_failed(emews_cmd, tmp_path: Path,
                                                                          second: str) -> None:
    """kill -9 of the whole job twice (two node losses) while one trial trains: it checkpointed steps 1-2,
    then, resumed, steps 3-4. The second resume recorded it failed ('the run stopped 2 times while
    this task ran; not run again') and threw its four steps away: the rule meant for a task that
    takes the job down each time it runs. A run that checkpointed the trial is progress: it is
    resumed (from step 4) and completes. One whose second run wrote nothing (``stuck``) is still
    given up."""
    (tmp_path / "held.py").write_text(HELD_TRAINER)
    events = tmp_path / "events"
    events.mkdir()
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "held.py"), "metric": "loss"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "events": {"type": "constant", "value": str(events)},
                               "second": {"type": "constant", "value": second}},
                        budget={"evaluations": 1}, task={"timeout": 120, "isolation": "process"},
                        checkpoints={"background": False})  # in place when the trial says it holds
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", str(exp))
    assert wait_until(lambda: (events / "held-2").exists() or job.poll() is not None, timeout=180), said(job)
    kill_job(emews_cmd, job)
    job = emews_cmd.popen("resume", str(exp), "--workers", "1")
    caught = events / ("held-4" if second == "trains" else "held-stuck")
    assert wait_until(lambda: caught.exists() or job.poll() is not None, timeout=180), said(job)
    kill_job(emews_cmd, job)
    last = emews_cmd("resume", str(exp), "--workers", "1", timeout=240)
    assert last.returncode == 0, last.stderr
    [row] = stored_rows(exp)
    if second == "trains":
        assert (row["status"], row["objective"]) == ("ok", pytest.approx(1 / 6)), row
        assert sorted(p.name for p in events.glob("start-*")) == ["start-0", "start-2", "start-4"]
    else:
        assert row["status"] == "failed" and "the run stopped 2 times while this task ran" in row["error"], row
        assert sorted(p.name for p in events.glob("start-*")) == ["start-0", "start-2"]
