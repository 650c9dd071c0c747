"""Training trials under a real ``mpiexec``: reports, decisions, checkpoints, retries, PBT lineage."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
from pathlib import Path

import pytest

import testutil
from testutil import (TESTS, events, pbt_workflow, query, read_only, stored_rows, wait_until, walltime_pause_time,
                      write_workflow)

TRAINER = testutil.TRAINER
RATES = [0.5, 0.1, 0.9, 0.3, 0.05]


def trainer_workflow(folder: Path, rates=RATES, epochs=9, name="wf", **sections) -> Path:
    return testutil.trainer_workflow(folder, rates, epochs, name, **sections)


def launch(emews_cmd, wf: Path, workers: int = 1, exp: str = "exp"):
    proc = emews_cmd("launch", str(wf), "--workers", str(workers), "--exp-dir", exp, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return emews_cmd.cwd / exp


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_asha_stops_the_trials_of_the_hand_computed_case(emews_cmd, tmp_path: Path, isolation: str) -> None:
    """One worker runs the trials in order, so the rungs fill as in tests/training/test_schedulers.py:
    rate .9 stops at step 1, rate .3 at step 3, the others train to max_t."""
    log = tmp_path / "log.jsonl"
    emews_cmd.env["TRAINER_LOG"] = str(log)
    wf = trainer_workflow(tmp_path, task={"isolation": isolation},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 1,
                                                                 "reduction_factor": 3}})
    exp = launch(emews_cmd, wf)
    last = dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial"))
    assert [last[t] for t in range(5)] == [9, 9, 1, 3, 9]
    reported = [(e["task"], e["step"], e["loss"]) for e in events(log) if e["event"] == "report"]
    stored = [(t, s, json.loads(m)["loss"]) for t, s, m in query(exp, "SELECT trial, step, metrics FROM reports ORDER BY seq")]
    assert stored == reported                       # every report stored, in the order made
    stops = [(e["task"], e["step"], e["action"]) for e in events(log) if e["event"] == "report" and e["action"] != "continue"]
    assert stops == [(0, 9, "complete"), (1, 9, "complete"), (2, 1, "stop"), (3, 3, "stop"),
                     (4, 9, "complete")]   # the objective saw each decision
    results = {r["id"]: r for r in stored_rows(exp)}
    assert [results[t]["objective"] for t in range(5)] == [RATES[t] + 1 / last[t] for t in range(5)]
    states = query(exp, "SELECT trial, step, state FROM checkpoints ORDER BY trial, step")
    assert [(t, s) for t, s, _ in states] == [(t, s) for t in range(5) for s in range(1, last[t] + 1)]
    assert {state for _, _, state in states} == {"durable"}


def test_trials_that_reach_max_t_are_completed_and_the_others_stopped_early_everywhere(emews_cmd,
                                                                                       tmp_path: Path) -> None:
    """The ASHA hand case (rates .5 .1 .05 reach max_t 9, .9 and .3 are stopped at steps 1 and 3):
    results.csv, ``emews status``, the report's header and curves, ``summary.json`` and the
    end-of-run line all say ``completed`` for the first and ``stopped early`` for the others, and
    the counts add up to the successful evaluations (before: every trial ``stop``, "5 stopped by
    the scheduler")."""
    from emews.reporting import curves, data, summary

    wf = trainer_workflow(tmp_path, task={"isolation": "inline"},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 1,
                                                                 "reduction_factor": 3}})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    assert "5/5 evaluations: 5 ok (2 stopped early, 3 completed) in " in proc.stderr
    with open(exp / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["id"], r["t:step"], r["t:decision"], r["t:ended"]) for r in rows] == [
        ("0", "9", "complete", "completed"), ("1", "9", "complete", "completed"), ("2", "1", "stop", "stopped early"),
        ("3", "3", "stop", "stopped early"), ("4", "9", "complete", "completed")]
    assert json.loads((exp / "summary.json").read_text())["endings"] == {"stopped early": 2, "completed": 3}

    status = emews_cmd("status", str(exp))
    assert status.returncode == 0, status.stderr
    assert "5/5 evaluations: 5 ok (2 stopped early, 3 completed)" in status.stdout
    assert "training: 5 trials reported; 5 ended (2 stopped early, 3 completed), 0 running, 0 paused" \
        in status.stdout
    results = emews_cmd("results", str(exp))
    assert "5 evaluations: 5 ok (2 stopped early, 3 completed)" in results.stdout

    loaded = data.load(exp)
    assert dict(summary.header(loaded))["budget"] == "5/5 evaluations: 5 ok (2 stopped early, 3 completed)"
    last = loaded.reports.groupby("trial")["step"].max()
    assert dict(curves.outcomes(loaded, last)) == {0: "completed", 1: "completed", 2: "stopped early",
                                                   3: "stopped early", 4: "completed"}


CHECKING_SCHEDULER = '''
import sqlite3
from emews.training.schedulers import TrialScheduler
from emews.training.messages import Decision, Action, CONTINUE

class StoredFirst(TrialScheduler):
    """Stops a trial when its report is not yet in the store (it must always be)."""
    def __init__(self, store: str, metric=None, mode=None):
        super().__init__(metric, mode)
        self.store = store

    def on_report(self, trial, step, metrics, params):
        db = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)
        found = db.execute("SELECT COUNT(*) FROM reports WHERE trial=? AND step=?", (trial, step)).fetchone()[0]
        db.close()
        return CONTINUE if found == 1 else Decision(Action.STOP)
'''

READING_OPTIMIZER = '''
import json
from emews import Optimizer

class Reader(Optimizer):
    def __init__(self, out: str):
        self.out = out

    def run(self, evaluator):
        results = evaluator.map([{"rate": r, "epochs": 4} for r in (0.2, 0.4)])
        seen = {"all": [[r.trial, r.step, r.metrics["loss"]] for r in evaluator.reports()],
                "one": [[r.trial, r.step] for r in evaluator.reports(results[1].id)]}
        with open(self.out, "w") as fh:
            json.dump(seen, fh)
'''


def test_reports_are_stored_before_the_scheduler_decides_and_the_optimizer_reads_them(
        emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "checking.py").write_text(CHECKING_SCHEDULER)
    (tmp_path / "reading.py").write_text(READING_OPTIMIZER)
    out = tmp_path / "seen.json"
    wf = write_workflow(
        tmp_path, optimizer={"name": f"{tmp_path / 'reading.py'}:Reader", "options": {"out": str(out)}},
        objective={"module": str(TRAINER), "metric": "loss"},
        space={"rate": {"type": "float", "lower": 0.0, "upper": 1.0},
               "epochs": {"type": "int", "lower": 1, "upper": 9}},
        budget={"evaluations": 2}, task={"isolation": "process"},
        trial_scheduler={"name": f"{tmp_path / 'checking.py'}:StoredFirst",
                   "options": {"store": str(tmp_path / "exp" / "results.db")}})
    exp = launch(emews_cmd, wf, workers=2)
    assert dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial")) == {0: 4, 1: 4}  # never stopped
    seen = json.loads(out.read_text())
    stored = query(exp, "SELECT trial, step, metrics FROM reports ORDER BY seq")
    assert seen["all"] == [[t, s, json.loads(m)["loss"]] for t, s, m in stored]
    assert seen["one"] == [[1, s] for s in range(1, 5)]


@pytest.mark.parametrize("tier", ["experiment", "local"])
def test_a_killed_trial_runs_again_from_its_last_checkpoint(emews_cmd, tmp_path: Path, tier: str) -> None:
    """SIGKILL of the objective's process after step 4: with retries the trial restarts from the
    step-4 checkpoint (not from scratch), and the store keeps the crashed attempt. With a local
    tier the checkpoints are staged there and restored from the experiment directory."""
    log = tmp_path / "log.jsonl"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_KILL_AT="4")
    kept = {"local_dir": str(tmp_path / "node-local")} if tier == "local" else {}
    wf = trainer_workflow(tmp_path, rates=[0.2], task={"isolation": "process", "retries": 1}, checkpoints=kept)
    exp = launch(emews_cmd, wf)
    starts = [e for e in events(log) if e["event"] == "start"]
    assert [(s["restored"], s["trail"]) for s in starts] == [(0, []), (4, [1, 2, 3, 4])]
    assert starts[0]["pid"] != starts[1]["pid"]
    steps = [s for (s,) in query(exp, "SELECT step FROM reports ORDER BY seq")]
    assert steps == list(range(1, 10))               # steps 1-4, then 5-9 after the restore
    assert [(r["status"], r["objective"]) for r in stored_rows(exp)] == [("ok", 0.2 + 1 / 9)]
    attempts = query(exp, "SELECT task, attempt, status, error FROM attempts")
    assert [(t, a, s) for t, a, s, _ in attempts] == [(0, 1, "crashed")] and "SIGKILL" in attempts[0][3]
    paths = [Path(p) for (p,) in query(exp, "SELECT path FROM checkpoints WHERE state = 'durable'")]
    assert len(paths) == 9 and all(p.parts[0] == "checkpoints" and (exp / p).is_file() for p in paths)  # relative
    if tier == "local":
        assert list((tmp_path / "node-local").iterdir()) == []   # all flushed, no folder left either


def test_without_retries_a_killed_trial_is_a_crashed_result(emews_cmd, tmp_path: Path) -> None:
    emews_cmd.env.update(TRAINER_KILL_AT="2")
    exp = launch(emews_cmd, trainer_workflow(tmp_path, rates=[0.2], task={"isolation": "process"}))
    assert [r["status"] for r in stored_rows(exp)] == ["crashed"]
    assert query(exp, "SELECT COUNT(*) FROM attempts") == [(0,)]


STARTS_OVER = """\
import os, pathlib

def run(params, ctx):  # never restores: a retry trains from scratch
    mark = pathlib.Path(params["marks"]) / f"crashed-{ctx.task_id}"
    first = not mark.exists()
    for step in (1, 2, 3):
        ctx.report(step=step, metrics={"loss": 9.0 if first else 1.0},
                   checkpoint={"try": "first" if first else "retry", "step": step})
    if first:
        mark.touch()
        os._exit(3)
    return 1.0
"""


def test_a_retry_that_starts_over_has_the_rows_of_the_checkpoints_it_wrote(emews_cmd, tmp_path: Path) -> None:
    """A retry that trains from scratch writes its checkpoints under the names its failed try used
    (one run of the task: same attempt, serials from 0). Their rows kept the failed try's report and
    metric (9 for a file holding the retry's step of loss 1: ``emews checkpoints``, keep_best and
    load_best ranked it by the failed try), and a row retention had deleted stayed deleted while the
    retry wrote its file again: never listed, never deleted (a file leaked per step). Now the row of a
    path is its newest write's."""
    from emews.training.checkpoints import read_checkpoint

    (tmp_path / "over.py").write_text(STARTS_OVER)
    (tmp_path / "marks").mkdir()
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "over.py"), "metric": "loss"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "marks": {"type": "constant", "value": str(tmp_path / "marks")}},
                        budget={"evaluations": 2}, task={"timeout": 120, "retries": 1},
                        checkpoints={"background": False, "keep_last": 1})
    exp = launch(emews_cmd, wf, workers=2)
    assert sorted(query(exp, "SELECT task, status FROM attempts")) == [(0, "crashed"), (1, "crashed")]
    rows = query(exp, "SELECT c.trial, c.step, c.path, c.metric, c.state, r.metrics FROM checkpoints c "
                      "JOIN reports r ON r.seq = c.report ORDER BY c.trial, c.step")
    assert [(t, s, state) for t, s, _, _, state, _ in rows] == [
        (t, s, "deleted" if s < 3 else "durable") for t in (0, 1) for s in (1, 2, 3)], rows
    for trial, step, path, metric, state, metrics in rows:
        assert metric == 1.0 and json.loads(metrics) == {"loss": 1.0}, rows  # the retry's report
        assert (exp / path).exists() == (state == "durable"), rows
        if state == "durable":
            assert read_checkpoint(exp / path) == {"try": "retry", "step": step}
    assert sorted(p.name for p in (exp / "checkpoints").rglob("*.ckpt")) == ["step-00000003-002.ckpt"] * 2


def test_a_corrupt_checkpoint_is_never_restored(emews_cmd, tmp_path: Path) -> None:
    """The step-4 checkpoint is cut in half before the kill: the retry restores step 3, the newest
    checkpoint that verifies."""
    log = tmp_path / "log.jsonl"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_KILL_AT="4", TRAINER_CORRUPT="1")
    exp = launch(emews_cmd, trainer_workflow(tmp_path, rates=[0.2], task={"isolation": "process", "retries": 1}))
    starts = [e for e in events(log) if e["event"] == "start"]
    assert [(s["restored"], s["trail"]) for s in starts] == [(0, []), (3, [1, 2, 3])]
    assert [r["status"] for r in stored_rows(exp)] == ["ok"]


def test_pbt_with_more_trials_than_workers_clones_only_peers_that_still_train(emews_cmd, tmp_path: Path) -> None:
    """8 trials, 2 workers, interval 3, bottom quarter (rounded up, as Ray Tune). t0 (rate .5) holds
    after its step 6 while the other worker runs t1-t7 (9 steps each) one after the other; then t0
    trains on. By hand: t1 (.1) and t2 (.2) beat t0 at their steps 3 and 6; t3-t7 (.7-.95) are
    each, at step 3, the worst of their peers (t0 at 6 and themselves; the finished trials at step 9
    are no peers) and clone t0's checkpoint, so each trains on from it. t0, at its step 9, is among
    the finished trials, none of which is a donor: it does not exploit. Before: t3 cloned t1's final
    step-9 checkpoint and trained zero steps, reporting t1's loss under new parameters.
    Every clone is marked in results.csv (``t:cloned``: donor@step)."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_GATE=str(gate), TRAINER_HOLD_AT="6", TRAINER_WAIT_HELD="1")
    rates = [0.5, 0.1, 0.2, 0.9, 0.8, 0.7, 0.95, 0.85]
    wf = pbt_workflow(tmp_path, rates)
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: read_only(exp, "SELECT COUNT(*) FROM results") == [(7,)] or job.poll() is not None,
                      timeout=240) and job.poll() is None, job.communicate()
    gate.touch()   # t1-t7 have ended: t0 trains on
    _, err = job.communicate(timeout=240)
    assert job.returncode == 0, err

    lineage = query(exp, "SELECT l.trial, l.step, l.donor, c.step, l.report, l.new_params FROM lineage l "
                         "JOIN checkpoints c ON c.id = l.checkpoint ORDER BY l.seq")
    assert [(trial, step, donor) for trial, step, donor, *_ in lineage] == [(t, 3, 0) for t in range(3, 8)]
    reports = query(exp, "SELECT trial, step, seq FROM reports ORDER BY seq")
    for trial, _, _, cloned_step, seq, _ in lineage:
        assert 1 <= cloned_step <= 6   # t0's newest durable one while it held at step 6, never a final one
        after = [step for t, step, at in reports if t == trial and at > seq]
        assert after == list(range(cloned_step + 1, 10)), (trial, after)   # it trained on from the clone
    assert [step for t, step, _ in reports if t == 0] == list(range(1, 10))
    with open(exp / "results.csv", newline="") as fh:
        rows = {int(r["id"]): r for r in csv.DictReader(fh)}
    assert {t: r["t:cloned"] for t, r in rows.items()} == \
        {**{t: "" for t in range(3)}, **{t: f"0@{c}" for t, _, _, c, _, _ in lineage}}
    assert {t: json.loads(p) for t, *_, p in lineage} == \
        {t: {"rate": float(rows[t]["p:rate"]), "epochs": 9} for t in range(3, 8)}   # results carry the new params



def test_pbt_never_clones_the_last_checkpoint_of_a_donor_that_has_not_returned_yet(emews_cmd, tmp_path: Path) -> None:
    """Two trials on two workers, 9 epochs, one exploit check at step 9. t0 (rate .1) reports its
    last step, 9, and then holds before it returns (its final evaluation); t1 (rate .9) then reports
    its step 9, the worse of the two peers: it clones a checkpoint t0 trained past (step 8), never
    t0's final step-9 one, and trains step 9 again from it with the explored rate. Before, t0's
    task had not ended yet, so it was a donor with its final checkpoint: t1 restored step 9 and
    trained zero steps, returning t0's loss under its new parameters (as if cloned from a finished
    trial, which docs/training.md says cannot happen)."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_GATE=str(gate), TRAINER_HOLD_AT="9", TRAINER_GO_AT="1:9")
    wf = pbt_workflow(tmp_path, [0.1, 0.9], epochs=9, interval=9)
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    final = exp / "checkpoints" / f"{0:06d}"
    assert wait_until(lambda: (gate.with_name("gate.held").exists() and any(final.glob("step-00000009-*.ckpt")))
                      or job.poll() is not None, timeout=240) and job.poll() is None, job.communicate()
    gate.with_name("gate.go").touch()   # t0 holds after its last report, its step-9 checkpoint written: t1 reports 9
    assert wait_until(lambda: read_only(exp, "SELECT COUNT(*) FROM results") == [(1,)] or job.poll() is not None,
                      timeout=240) and job.poll() is None, job.communicate()
    gate.touch()   # t1 has its result: t0 returns
    _, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    lineage = query(exp, "SELECT l.trial, l.step, l.donor, c.trial, c.step, l.report FROM lineage l "
                         "JOIN checkpoints c ON c.id = l.checkpoint ORDER BY l.seq")
    assert [row[:5] for row in lineage] == [(1, 9, 0, 0, 8)]   # t0 trained past step 8: never its final step 9
    reports = query(exp, "SELECT trial, step, seq FROM reports ORDER BY seq")
    assert [step for t, step, seq in reports if t == 1 and seq > lineage[0][5]] == [9]   # it trained on from the clone
    starts = [(e["task"], e["restored"], e["from_trial"]) for e in events(log) if e["event"] == "start"]
    assert sorted(starts) == [(0, 0, 0), (1, 0, 1), (1, 8, 0)]
    assert [step for t, step, _ in reports if t == 0] == list(range(1, 10))


def test_pbt_clones_only_checkpoints_its_donors_wrote(emews_cmd, tmp_path: Path) -> None:
    """The reviewer's shape: 3 workers, 6 trials, 12 steps, an exploit check every 2 steps, the bottom
    quarter (one of three peers). Every exploit clones a checkpoint its donor wrote (never one of the
    exploiting trial's own, nor the checkpoint a just-cloned donor got from someone else), written
    before the exploit; each clone restarts from exactly that checkpoint. Before, a trial whose top
    peer had just cloned it rolled back to its own older checkpoint, recorded as its own donor."""
    log = tmp_path / "log.jsonl"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_STEP_SLEEP="0.1", TRAINER_NOISE="0.6")  # interleaved, crossing
    rates = [0.9, 0.1, 0.5, 0.7, 0.3, 0.8]
    wf = pbt_workflow(tmp_path, rates, epochs=12, interval=2)
    exp = launch(emews_cmd, wf, workers=3)
    lineage = query(exp, "SELECT l.trial, l.donor, c.trial, c.step, c.report, l.report FROM lineage l "
                         "JOIN checkpoints c ON c.id = l.checkpoint ORDER BY l.seq")
    assert lineage   # the worst of three peers exploits
    for trial, donor, writer, _, written, at in lineage:
        assert donor != trial and writer == donor and written < at, (trial, donor, writer)
    clones = [(e["task"], e["from_trial"], e["restored"]) for e in events(log)
              if e["event"] == "start" and e["from_trial"] != e["task"]]
    assert sorted(clones) == sorted((trial, donor, step) for trial, donor, _, step, _, _ in lineage)

def test_pbt_clones_happen_when_reports_do_not_wait(emews_cmd, tmp_path: Path) -> None:
    """``wait=False`` under PBT: the exploit answered to step N comes with the report of step N + 1,
    which the trial made with its own weights. Every exploit in ``lineage`` restarts the trial from
    exactly the donor's checkpoint with the explored rate, and the report of the discarded step is
    not stored. Before, step N + 1's report and checkpoint counted as the trial's own since the
    clone: the restart restored it (the clone never happened while lineage said it did), and an
    exploit answered to a trial's last report was dropped while its result took the new rate."""
    log = tmp_path / "log.jsonl"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_WAIT="1", TRAINER_STEP_SLEEP="0.1", TRAINER_NOISE="0.6")
    rates = [0.9, 0.1, 0.5, 0.7, 0.3, 0.8]
    wf = pbt_workflow(tmp_path, rates, epochs=12, interval=2)
    exp = launch(emews_cmd, wf, workers=3)
    lineage = query(exp, "SELECT l.trial, l.donor, c.step, l.report, l.new_params FROM lineage l "
                         "JOIN checkpoints c ON c.id = l.checkpoint ORDER BY l.seq")
    assert lineage   # the worst of three peers exploits
    clones = [(e["task"], e["from_trial"], e["restored"], e["rate"]) for e in events(log)
              if e["event"] == "start" and e["from_trial"] != e["task"]]
    assert sorted(clones) == sorted((t, donor, step, json.loads(p)["rate"]) for t, donor, step, _, p in lineage)
    reports = query(exp, "SELECT trial, step, seq FROM reports ORDER BY seq")
    for trial, _, step, seq, _ in lineage:   # after the exploit: the clone's steps, from the donor's step on
        after = [s for t, s, at in reports if t == trial and at > seq]
        assert after[: 1] in ([], [step + 1]), (trial, step, after)


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_pbt_clones_a_multi_rank_trial_on_every_member(emews_cmd, tmp_path: Path, isolation: str) -> None:
    """PBT over trials of 2 ranks (process isolation: ``ctx.process_group()`` first, as DDP code does).
    An exploit runs the objective again on both members, each restored from the donor's checkpoint
    with the explored rate, and every trial ends ok. Before, only team rank 0 ran again: its second
    ``ctx.process_group()`` raised "already initialised" (the trial failed), and inline the member
    had returned, leaving rank 0 alone in the team."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_STEP_SLEEP="0.1", TRAINER_GATE=str(gate), TRAINER_GATE_AT="1",
                         **({"TRAINER_GROUP": "1"} if isolation == "process" else {}))
    rates = [0.1, 0.5, 0.9]
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"}, objective={"module": str(TESTS / "objectives" / "trainer.py"),
                                                        "metric": "loss"},
        space={"rate": {"type": "ordered", "values": rates}, "epochs": {"type": "constant", "value": 9}},
        budget={"evaluations": len(rates)}, task={"isolation": isolation, "ranks": 2, "timeout": 600},
        trial_scheduler={"name": "pbt", "options": {"perturbation_interval": 3, "quantile_fraction": 0.25,
                                                    "resample_probability": 0.0, "mutations": ["rate"]}})
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "6", "--exp-dir", "exp")
    assert wait_until(lambda: len([e for e in events(log) if e["event"] == "start"]) == 6 or job.poll() is not None,
                      timeout=240) and job.poll() is None, job.communicate()
    gate.touch()   # the three trials (both members each) have started: they train side by side
    _, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    lineage = query(exp, "SELECT l.trial, l.donor, c.step, l.new_params FROM lineage l "
                         "JOIN checkpoints c ON c.id = l.checkpoint ORDER BY l.seq")
    assert lineage and lineage[0][:2] == (2, 0)   # t2 (.9), the worst of three peers, clones t0 (.1) first
    clones = [(e["task"], e["from_trial"], e["restored"], e["rate"]) for e in events(log)
              if e["event"] == "start" and e["from_trial"] != e["task"]]
    assert sorted(clones) == sorted(2 * [(t, donor, step, json.loads(p)["rate"]) for t, donor, step, p in lineage])
    assert query(exp, "SELECT status, COUNT(*) FROM results GROUP BY status") == [("ok", 3)]


def test_an_exploit_a_team_cannot_share_does_not_strand_its_leader(emews_cmd, tmp_path: Path) -> None:
    """Trials of 2 ranks reporting with ``wait=False``, an exploit check every 3 steps: t1 (rate .9, 3
    epochs) reports its step 3 after t0 (rate .1, 6 epochs) reported its own, is the worse of the two
    and exploits t0, at its last step. That exploit arrives after ``run`` returned on both members,
    so the team cannot run again together; the leader does not run again alone either (it would wait
    in ``ctx.restore()`` for a member that has returned, until the task timeout) and both trials end ok."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    gate.touch()   # no hold at step 3: its reports only come in task order; t0 holds before step 4
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_WAIT="1", TRAINER_GROUP="1", TRAINER_GATE=str(gate),
                         TRAINER_GATE_AT="3", TRAINER_IN_TURN="1", TRAINER_GO_AT="0:4",
                         TRAINER_IN_TURN_STORE=str(emews_cmd.cwd / "exp" / "results.db"))
    points = tmp_path / "points.jsonl"
    points.write_text('{"rate": 0.1, "epochs": 6}\n{"rate": 0.9, "epochs": 3}\n')
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep", "options": {"file": str(points)}},
        objective={"module": str(TESTS / "objectives" / "trainer.py"), "metric": "loss"},
        space={"rate": {"type": "float", "lower": 0.0, "upper": 1.0}, "epochs": {"type": "int", "lower": 1, "upper": 9}},
        budget={"evaluations": 2}, task={"isolation": "process", "ranks": 2, "timeout": 30},
        trial_scheduler={"name": "pbt", "options": {"perturbation_interval": 3, "quantile_fraction": 0.25,
                                                    "resample_probability": 0.0, "mutations": ["rate"]}})
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "5", "--exp-dir", "exp")
    assert wait_until(lambda: read_only(exp, "SELECT COUNT(*) FROM results") == [(1,)] or job.poll() is not None,
                      timeout=240) and job.poll() is None, job.communicate()
    gate.with_name(gate.name + ".go").touch()   # t1 has ended: t0 trains on
    _, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    assert query(exp, "SELECT trial, step, donor FROM lineage") == [(1, 3, 0)]   # at t1's last step
    assert query(exp, "SELECT status, COUNT(*) FROM results GROUP BY status") == [("ok", 2)]
    assert query(exp, "SELECT COUNT(*) FROM attempts") == [(0,)]   # no attempt timed out

def test_a_scheduler_metric_no_report_has_is_said_once(emews_cmd, tmp_path: Path) -> None:
    """``trial_scheduler.options.metric: val_loss`` where the objective reports ``loss`` and ``step``:
    ASHA sees no loss, lets every trial train to the end and no checkpoint is ranked; the run says so
    once on stderr, naming the key and the metrics reported. Before, nothing was said: the run looked
    like an ASHA search ("5 completed") and load_best returned step-1 checkpoints as the best."""
    wf = trainer_workflow(tmp_path, task={"isolation": "process"},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9, "metric": "val_loss"}})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "without the metric" in line]
    assert said == ["emews: trial 0 reported step 1 without the metric 'val_loss' (trial_scheduler.options.metric; "
                    "it reported loss, step): reports without it are not ranked (the trial scheduler lets the trial "
                    "go on, its checkpoint has no metric for load_best and keep_best)"]
    assert query(emews_cmd.cwd / "exp", "SELECT COUNT(*) FROM checkpoints WHERE loss IS NOT NULL") == [(0,)]


DUMPING_ASHA = '''
import json
from emews.training.schedulers.asha import ASHA

class Dumping(ASHA):
    """ASHA that writes its rung table after every decision."""
    def __init__(self, out: str, **options):
        super().__init__(**options)
        self.out = out

    def on_report(self, trial, step, metrics, params):
        decision = super().on_report(trial, step, metrics, params)
        with open(self.out, "w") as fh:
            json.dump({str(m): {str(t): v for t, v in rung.items()} for m, rung in self.recorded.items()}, fh)
        return decision
'''


def test_trials_paused_at_the_walltime_margin_continue_on_resume_with_the_rungs_rebuilt(
        emews_cmd, tmp_path: Path) -> None:
    """Five workers start the five trials at once; each holds before its step-1 report until rank 0
    logged the pause time (15 s into the job), then they report in task order, as one worker would:
    every report is answered pause (ASHA's stop of trial 2 stays a stop), nothing new starts, and the
    run stops itself at the walltime margin (exit 3). ``emews resume`` (one worker) continues the
    paused trials at step 2 from their checkpoints, with ASHA's rungs rebuilt from the stored
    reports: rung 1 holds the step-1 losses of run one, so at its step 2 ASHA's rank rule stops
    trial 0 (it passed rung 1 alone, and is now outside the best ceil(n/3) of the n trials there;
    with no rungs rebuilt it would be alone there again and go on); the others end as in the
    uninterrupted hand-computed case."""
    log, rungs, gate = tmp_path / "log.jsonl", tmp_path / "rungs.json", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_GATE=str(gate), TRAINER_GATE_AT="1", TRAINER_IN_TURN="1")
    (tmp_path / "dumping.py").write_text(DUMPING_ASHA)
    wf = trainer_workflow(tmp_path, task={"isolation": "process"},
                          trial_scheduler={"name": f"{tmp_path / 'dumping.py'}:Dumping",
                                     "options": {"out": str(rungs), "max_t": 9}},
                          walltime={"limit": "00:00:30", "margin": 15})
    job = emews_cmd.popen("launch", str(wf), "--workers", "5", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    pause_at = walltime_pause_time(exp)
    assert pause_at is not None, job.communicate(timeout=60)
    gate.touch()
    _, err = job.communicate(timeout=240)
    assert job.returncode == 3, err
    assert "stopped at the walltime margin" in err and "emews resume" in err
    assert all(e["time"] < pause_at for e in events(log) if e["event"] == "start")
    paused = dict(query(exp, "SELECT task, step FROM pauses"))
    assert paused == {0: 1, 1: 1, 3: 1, 4: 1}
    assert [r["id"] for r in stored_rows(exp)] == [2]  # only ASHA's stop is a result

    second = emews_cmd("resume", str(exp), "--workers", "1", "--set", "walltime.limit=00:10:00",
                       "--set", "walltime.margin=0", timeout=240)
    assert second.returncode == 0, second.stderr
    starts = {e["task"]: e for e in events(log) if e["event"] == "start" and e["restored"]}
    assert {t: (e["restored"], e["trail"]) for t, e in starts.items()} == {t: (1, [1]) for t in paused}
    reported = query(exp, "SELECT trial, step FROM reports ORDER BY seq")
    assert len(reported) == len(set(reported))       # no step trained twice
    last = dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial"))
    assert [last[t] for t in range(5)] == [2, 9, 1, 3, 9]
    table = json.loads(rungs.read_text())
    assert table["1"] == {"0": 1.5, "1": 1.1, "2": 1.9, "3": 1.3, "4": 1.05}   # step-1 losses, from run one
    assert table["3"] == pytest.approx({str(t): RATES[t] + 1 / 3 for t in range(5) if last[t] >= 3})
    assert sorted(r["id"] for r in stored_rows(exp)) == [0, 1, 2, 3, 4]


def test_asha_promotion_waiting_trials_end_when_the_optimizer_waits_for_them(emews_cmd, tmp_path: Path) -> None:
    """Promotion rule (rf 3, no resource: a trial in the top goes on in its task), one worker, the
    sweep keeping 2 points queued. t0 1.5 and t1 1.1 pause at rung 1 (n // 3 = 0); the sweep then
    waits for a result, so the least promising, t0, ends with its result. t2 1.9 (n=3) puts t1 in
    the top: t1 is promoted, resumes at step 1 and pauses at rung 3 (n=1); t2, then t3 (1.3) end as
    the sweep waits. t4 (1.05) leads rung 1, goes on and pauses at rung 3 next to t1 (.433 > .383):
    t1 ends, then t4. No pause is left for ``emews resume``."""
    wf = trainer_workflow(tmp_path, task={"isolation": "inline"},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9, "variant": "promotion"}})
    exp = launch(emews_cmd, wf)
    steps = {t: [s for (s,) in query(exp, f"SELECT step FROM reports WHERE trial = {t} ORDER BY seq")]
             for t in range(5)}
    assert steps == {0: [1], 1: [1, 2, 3], 2: [1], 3: [1], 4: [1, 2, 3]}
    assert query(exp, "SELECT trial, step FROM promotions") == [(1, 1)]
    assert [(r["status"], r["objective"]) for r in stored_rows(exp)] == \
        [("ok", RATES[t] + 1 / steps[t][-1]) for t in range(5)]
    assert query(exp, "SELECT COUNT(*) FROM pauses") == [(0,)]
    # ended where they paused, below max_t: stopped early, not "completed" (as before) in every listing
    with open(exp / "results.csv", newline="") as fh:
        assert [(r["t:step"], r["t:decision"], r["t:ended"]) for r in csv.DictReader(fh)] == \
            [(str(steps[t][-1]), "pause", "stopped early") for t in range(5)]
    assert json.loads((exp / "summary.json").read_text())["endings"] == {"stopped early": 5}


def test_a_report_that_does_not_wait_gets_its_decision_by_the_next_report(emews_cmd, tmp_path: Path) -> None:
    """``wait=False``: the objective goes on at once and gets each decision at its next report, so
    ASHA's stop of rate .9 (at step 1) and of rate .3 (at step 3) reach them one step later."""
    emews_cmd.env["TRAINER_WAIT"] = "1"
    wf = trainer_workflow(tmp_path, task={"isolation": "process"},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9}})
    exp = launch(emews_cmd, wf)
    last = dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial"))
    assert last[0] == last[1] == last[4] == 9
    assert (last[2], last[3]) == (2, 4)
    # the report made before the stop arrived gets the stop again: stopped early (before: "completed")
    with open(exp / "results.csv", newline="") as fh:
        assert [(r["t:step"], r["t:decision"], r["t:ended"]) for r in csv.DictReader(fh)] == [
            ("9", "complete", "completed"), ("9", "complete", "completed"), ("2", "stop", "stopped early"),
            ("4", "stop", "stopped early"), ("9", "complete", "completed")]
    assert json.loads((exp / "summary.json").read_text())["endings"] == {"stopped early": 2, "completed": 3}


def test_a_trial_that_ignores_its_stop_shows_as_stopped_early(emews_cmd, tmp_path: Path) -> None:
    """The ASHA hand case with an objective that never breaks: rates .9 and .3 are stopped at steps
    1 and 3 as when they obey (their later reports, stored, reach no scheduler, so the rungs are
    the hand case's), each later report is answered stop again, and both end "stopped early" in
    results.csv, ``emews status`` and summary.json. Before, they ended "completed" (the last
    step's answer was continue), and rate .9's later reports sat in ASHA's rungs, so rate .3 was
    never stopped."""
    log = tmp_path / "log.jsonl"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_DEAF="1")
    wf = trainer_workflow(tmp_path, task={"isolation": "process"},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 1,
                                                                 "reduction_factor": 3}})
    exp = launch(emews_cmd, wf)
    assert query(exp, "SELECT trial, COUNT(*) FROM reports GROUP BY trial") == [(t, 9) for t in range(5)]
    answers = [(e["task"], e["step"], e["action"]) for e in events(log) if e["event"] == "report"]
    assert [(t, s) for t, s, a in answers if a == "stop"] == [(2, s) for s in range(1, 10)] + [(3, s) for s in range(3, 10)]
    with open(exp / "results.csv", newline="") as fh:
        assert [(r["t:step"], r["t:decision"], r["t:ended"]) for r in csv.DictReader(fh)] == [
            ("9", "complete", "completed"), ("9", "complete", "completed"), ("9", "stop", "stopped early"),
            ("9", "stop", "stopped early"), ("9", "complete", "completed")]
    status = emews_cmd("status", str(exp))
    assert "5 ended (2 stopped early, 3 completed)" in status.stdout, status.stdout
    assert json.loads((exp / "summary.json").read_text())["endings"] == {"stopped early": 2, "completed": 3}


def test_status_of_a_killed_run_calls_its_unended_trial_interrupted_not_running(emews_cmd, tmp_path: Path) -> None:
    """Trial 0 holds after its step-4 report and every process of the job is SIGKILLed at once (a node
    failure): ``emews status`` says the run is not running and lists trial 0 as interrupted, with
    ``emews resume`` to continue it; before, it counted it among the running trials forever. After
    the resume, which trains it on from its checkpoint, nothing is interrupted."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_GATE=str(gate), TRAINER_HOLD_AT="4")
    wf = trainer_workflow(tmp_path, rates=[0.5, 0.1], task={"isolation": "process"},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9}})
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    # held after report 4, and report 4's checkpoint in place under its final name (it is written in
    # the background: killed before its rename, the resume rightly restores step 3)
    step4 = lambda: list((exp / "checkpoints" / "000000").glob("step-00000004-*.ckpt"))  # noqa: E731
    assert wait_until(lambda: (gate.with_name("gate.held").exists() and step4()) or job.poll() is not None,
                      timeout=120) and job.poll() is None, testutil.said(job)
    emews_cmd.kill_all()
    job.communicate(timeout=60)
    assert emews_cmd.leftovers_after_exit() == []
    status = emews_cmd("status", str(exp))
    assert status.returncode == 0, status.stderr
    assert "job: local, not running" in status.stdout
    assert "training: 1 trial reported; 0 ended, 0 running, 0 paused, 1 interrupted (the run is not running; " \
           "emews resume continues them)" in status.stdout, status.stdout
    assert "  trial 0: step 4, loss 0.75, interrupted" in status.stdout
    gate.touch()
    second = emews_cmd("resume", str(exp), timeout=240)
    assert second.returncode == 0, second.stderr
    assert [e["restored"] for e in events(log) if e["event"] == "start" and e["task"] == 0] == [0, 4]
    status = emews_cmd("status", str(exp))
    assert "training: 2 trials reported; 2 ended (2 completed), 0 running, 0 paused" in status.stdout, status.stdout


def _sigterm_while_held(job: subprocess.Popen, exp: Path, gate: Path) -> None:
    """SIGTERM to a launched ``job`` whose trials are held at the trainer's ``gate``: once rank 0
    says the trials pause at their next report, the gate opens and the job exits 143."""
    job.send_signal(signal.SIGTERM)
    rank0_log = exp / "emews.log"
    assert wait_until(lambda: rank0_log.exists() and "pause at their next report" in rank0_log.read_text(),
                      timeout=120)
    gate.touch()
    _, err = job.communicate(timeout=180)
    assert job.returncode == 143, err


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_sigterm_pauses_the_running_trial_at_its_next_report_and_resume_continues_it(
        emews_cmd, tmp_path: Path, isolation: str) -> None:
    """Trial 0 is held after its step-5 report; the job gets SIGTERM (as from scancel). Once rank 0
    has logged that trials pause, the trial goes on: its step-6 report is answered with pause, it
    checkpoints and returns, and the job ends cleanly (143). ``emews resume`` continues it from the
    step-6 checkpoint (steps 7-9 only), then the other trials: ASHA's rung table and stops are those
    of the uninterrupted hand case."""
    log, rungs = tmp_path / "log.jsonl", tmp_path / "rungs.json"
    gate = tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_HOLD_AT="5", TRAINER_GATE=str(gate))
    (tmp_path / "dumping.py").write_text(DUMPING_ASHA)
    wf = trainer_workflow(tmp_path, task={"isolation": isolation},
                          trial_scheduler={"name": f"{tmp_path / 'dumping.py'}:Dumping",
                                     "options": {"out": str(rungs), "max_t": 9}},
                          walltime={"grace": 100})
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    assert wait_until(lambda: log.exists() and [e for e in events(log) if e["event"] == "report" and e["step"] == 5],
                      timeout=120)
    _sigterm_while_held(job, exp, gate)
    assert [(e["step"], e["action"]) for e in events(log) if e["event"] == "report"][-2:] == \
        [(5, "continue"), (6, "pause")]
    assert query(exp, "SELECT task, step FROM pauses") == [(0, 6)]
    assert query(exp, "SELECT COUNT(*) FROM attempts") == [(0,)]   # paused, not aborted
    assert stored_rows(exp) == []
    status = emews_cmd("status", str(exp))
    assert status.returncode == 0, status.stderr
    assert "training: 1 trial reported; 0 ended, 0 running, 1 paused" in status.stdout
    assert "  trial 0: step 6, loss 0.666667, paused" in status.stdout.splitlines()

    second = emews_cmd("resume", str(exp), timeout=240)
    assert second.returncode == 0, second.stderr
    starts = [(e["task"], e["restored"], e["trail"]) for e in events(log) if e["event"] == "start"]
    assert starts[:2] == [(0, 0, []), (0, 6, [1, 2, 3, 4, 5, 6])]
    reported = query(exp, "SELECT trial, step FROM reports ORDER BY seq")
    assert [s for t, s in reported if t == 0] == list(range(1, 10))   # no step trained twice
    last = dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial"))
    assert [last[t] for t in range(5)] == [9, 9, 1, 3, 9]
    table = json.loads(rungs.read_text())
    assert table["1"] == {"0": 1.5, "1": 1.1, "2": 1.9, "3": 1.3, "4": 1.05}
    with open(exp / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["t:step"], r["t:decision"]) for r in rows] == \
        [(str(last[t]), "stop" if last[t] < 9 else "complete") for t in range(5)]
    assert emews_cmd.leftovers_after_exit() == []


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_sigterm_pauses_a_multi_rank_trial_at_its_next_report_and_resume_continues_it(
        emews_cmd, tmp_path: Path, isolation: str) -> None:
    """The same stop for a trial on a team of 2 ranks: only team rank 0 reports, the other member
    takes part in each report (and gets rank 0's decision). Both are held after step 5 and the job
    gets SIGTERM: the member must not abandon the trial at the signal (which aborted the team and
    lost step 6's checkpoint), but pause with rank 0 at step 6; resume trains steps 7-9 only."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_HOLD_AT="5", TRAINER_GATE=str(gate),
                         **({"TRAINER_GROUP": "1"} if isolation == "process" else {}))
    wf = trainer_workflow(tmp_path, rates=[0.5], task={"isolation": isolation, "ranks": 2, "timeout": 600},
                          trial_scheduler={"name": "asha", "options": {"max_t": 9}}, walltime={"grace": 100})
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    assert wait_until(lambda: log.exists() and len([e for e in events(log) if e["event"] == "report"
                                                    and e["step"] == 5]) == 2, timeout=120)  # both members
    _sigterm_while_held(job, exp, gate)
    assert [(e["step"], e["action"]) for e in events(log) if e["event"] == "report"][-4:] == \
        [(5, "continue")] * 2 + [(6, "pause")] * 2
    assert query(exp, "SELECT task, step FROM pauses") == [(0, 6)]
    assert query(exp, "SELECT COUNT(*) FROM attempts") == [(0,)]   # paused, not aborted

    second = emews_cmd("resume", str(exp), timeout=240)
    assert second.returncode == 0, second.stderr
    assert sorted({(e["restored"], tuple(e["trail"])) for e in events(log) if e["event"] == "start"}) == \
        [(0, ()), (6, (1, 2, 3, 4, 5, 6))]
    assert [s for _, s in query(exp, "SELECT trial, step FROM reports ORDER BY seq")] == list(range(1, 10))
    assert emews_cmd.leftovers_after_exit() == []


def test_asha_promotions_run_again_with_more_resource_from_their_checkpoints(emews_cmd, tmp_path: Path) -> None:
    """Promotion rule with ``resource: epochs`` (rf 2, rungs 1, 2, 4, max_t 8), one worker, every
    point queued at once (sweep backlog), each trial dispatched with epochs 1. By hand:
    t0 1.5 waits (n=1).  t1 1.1 is the top-1 of 2: promoted to epochs 2, .6 waits at rung 2 (n=1).
    t2 1.9 waits.  t3 1.3 is in the top-2 of 4: promoted, .8 at rung 2 is behind t1 (.6), which is
    now promoted to epochs 4: .35 waits at rung 4 (n=1).  t4 1.05 leads rung 1, then rung 2 (.55),
    then rung 4 (.3): promoted to 2, 4, then max_t 8, where it stops. Nothing else qualifies: the
    waiting trials end with their results so far. Each promoted run restores the checkpoint of
    the step it paused at, and its reports go on from there."""
    log = tmp_path / "log.jsonl"
    emews_cmd.env["TRAINER_LOG"] = str(log)
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep", "options": {"backlog": 5}},
        objective={"module": str(TRAINER), "metric": "loss"},
        space={"rate": {"type": "ordered", "values": RATES}, "epochs": {"type": "constant", "value": 1}},
        budget={"evaluations": 5}, task={"isolation": "process"},
        trial_scheduler={"name": "asha", "options": {"max_t": 8, "grace_period": 1, "reduction_factor": 2,
                                               "variant": "promotion", "resource": "epochs"}})
    exp = launch(emews_cmd, wf)
    steps = {t: [s for (s,) in query(exp, f"SELECT step FROM reports WHERE trial = {t} ORDER BY seq")]
             for t in range(5)}
    assert steps == {0: [1], 1: [1, 2, 3, 4], 2: [1], 3: [1, 2], 4: list(range(1, 9))}
    assert query(exp, "SELECT trial, step, resource FROM promotions ORDER BY seq") == \
        [(1, 1, 2), (3, 1, 2), (1, 2, 4), (4, 1, 2), (4, 2, 4), (4, 4, 8)]
    starts = [(e["task"], e["restored"], e["trail"]) for e in events(log) if e["event"] == "start"]
    assert starts == [(0, 0, []), (1, 0, []), (1, 1, [1]), (2, 0, []), (3, 0, []), (3, 1, [1]),
                      (1, 2, [1, 2]), (4, 0, []), (4, 1, [1]), (4, 2, [1, 2]), (4, 4, [1, 2, 3, 4])]
    results = {r["id"]: r for r in stored_rows(exp)}
    assert {t: (r["status"], round(r["objective"], 9), json.loads(r["params"])["epochs"])
            for t, r in results.items()} == {0: ("ok", 1.5, 1), 1: ("ok", 0.35, 4), 2: ("ok", 1.9, 1),
                                             3: ("ok", 0.8, 2), 4: ("ok", 0.175, 8)}
    with open(exp / "results.csv", newline="") as fh:   # only t4 trained to max_t
        assert {int(r["id"]): r["t:ended"] for r in csv.DictReader(fh)} == \
            {0: "stopped early", 1: "stopped early", 2: "stopped early", 3: "stopped early", 4: "completed"}


def test_median_stopping_under_mpiexec(emews_cmd, tmp_path: Path) -> None:
    """Median rule (grace 2, min_samples 2), one worker, loss = rate + 1/step. At step 2 rate .9's
    best (1.4) is worse than the median (1.05) of the means so far of rates .5 (1.25) and .1 (.85):
    it stops there. Rate .3 (best .8 at step 2 against the median 1.25 of 1.25, .85, 1.65), and
    every later one, stays at or under the median all the way: they train to 9."""
    wf = trainer_workflow(tmp_path, task={"isolation": "inline"},
                          trial_scheduler={"name": "median", "options": {"grace_period": 2, "min_samples": 2}})
    exp = launch(emews_cmd, wf)
    last = dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial"))
    assert [last[t] for t in range(5)] == [9, 9, 2, 9, 9]
    assert [(r["status"], r["objective"]) for r in stored_rows(exp)] == \
        [("ok", RATES[t] + 1 / last[t]) for t in range(5)]


def test_hyperband_brackets_stop_at_their_own_rungs_under_mpiexec(emews_cmd, tmp_path: Path) -> None:
    """Hyperband (max_t 9, rf 3): brackets with rungs [1, 3], [3] and none take the trials in turn.
    Bracket 0 holds rates .1 and .9: .9 (1.9 at step 1 > 1.1) stops at step 1. Bracket 1 holds .5
    and .8: .8 (1.133 at step 3 > .833) stops at step 3. Bracket 2 (rate .2) never stops."""
    wf = trainer_workflow(tmp_path, rates=[0.1, 0.5, 0.2, 0.9, 0.8], task={"isolation": "inline"},
                          trial_scheduler={"name": "hyperband", "options": {"max_t": 9, "reduction_factor": 3}})
    exp = launch(emews_cmd, wf)
    last = dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial"))
    assert [last[t] for t in range(5)] == [9, 9, 9, 1, 3]


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_trial_that_returns_nothing_after_reporting_has_its_last_report_as_its_result(
        emews_cmd, tmp_path: Path, isolation: str) -> None:
    """A Ray Tune function trainable reports each epoch and returns nothing; an Optuna objective is
    ported with a bare ``return`` once stopped. Every such trial was stored as failed ('objective
    returned NoneType None, not a number') and the run stopped at budget.fail_fast's 5 (exit 1). Its
    result is now its last report: status ok, the objective its metric, the other keys m: columns."""
    (tmp_path / "bare.py").write_text(
        "def run(params, ctx):\n"
        "    for step in range(1, 10):\n"
        "        metrics = {'loss': params['rate'] + 1.0 / step, 'acc': 1.0 - params['rate']}\n"
        "        if ctx.report(step=step, metrics=metrics).stop:\n"
        "            return\n")
    wf = write_workflow(tmp_path, objective={"module": "bare.py", "metric": "loss"}, optimizer={"name": "sweep"},
                        space={"rate": {"type": "ordered", "values": RATES + [0.7, 0.2]}},
                        budget={"evaluations": 7}, task={"isolation": isolation},
                        trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 1,
                                                                     "reduction_factor": 3}})
    exp = launch(emews_cmd, wf)
    last = {trial: json.loads(m) for trial, m in query(exp, "SELECT trial, metrics FROM reports ORDER BY seq")}
    steps = dict(query(exp, "SELECT trial, MAX(step) FROM reports GROUP BY trial"))
    rows = {r["id"]: r for r in stored_rows(exp)}
    assert len(rows) == 7 and {r["status"] for r in rows.values()} == {"ok"}, rows
    assert {t: r["objective"] for t, r in rows.items()} == {t: last[t]["loss"] for t in rows}
    assert {t: json.loads(r["metrics"]) for t, r in rows.items()} == {t: {"acc": last[t]["acc"]} for t in rows}
    assert min(steps.values()) < 9 and max(steps.values()) == 9  # stopped early and completed trials alike
