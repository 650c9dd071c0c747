"""Fail fast (issue 24) under a real ``emews launch`` (mpiexec): a run whose first evaluations all fail
with one cause stops with exit 1 and one line naming the cause and the first failed task's run dir
(or, for a Python objective, which makes none, its id and the file holding its error);
runs whose failures differ, or that also succeed, go on; ``budget.fail_fast: 0`` runs the whole budget;
the end-of-run summary names the most frequent failure cause with its count."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from emews.core.results import Outcome, Status, Task
from emews.objective.context import task_run_dir
from emews.runtime.transport import Tag, ThreadHub
from emews.runtime.worker import WorkerStopped, worker_loop
from testutil import RecordingRunner, drained, stored_rows, write_workflow

#: fails for most points with one cause, for every third with another, or succeeds there (``mode``)
OBJECTIVE = '''
import time


def run(params):
    x = int(params["x"])
    if params["mode"] == "always":
        time.sleep(0.05)  # work of some length: the workers are handed one task at a time, not a batch
        raise RuntimeError(f"bad parameters x={x}")
    if x % 3 == 0:
        if params["mode"] == "some_ok":
            return float(x)
        raise ValueError("batch too small")
    raise ValueError(f"lr {x / 1000} too large")
'''


def launch(emews_cmd, tmp_path: Path, mode: str, budget: dict, workers: int = 1):
    """Sweep x = 1, 2, ... (in order with one worker) over the objective in ``mode``."""
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    count = budget["evaluations"]
    wf = write_workflow(tmp_path, optimizer={"name": "sweep"}, objective={"module": "objective.py"},
                        space={"x": {"type": "ordered", "values": list(range(1, count + 1))},
                               "mode": {"type": "constant", "value": mode}},
                        budget=budget, task={"timeout": 60, "isolation": "process"})
    proc = emews_cmd("launch", str(wf), "--workers", str(workers), "--exp-dir", "exp", timeout=240)
    exp = tmp_path / "exp"
    return proc, exp, json.loads((exp / "summary.json").read_text())


def test_a_run_whose_first_evaluations_all_fail_alike_stops_with_exit_1_and_one_line(emews_cmd, tmp_path) -> None:
    proc, exp, summary = launch(emews_cmd, tmp_path, "always", {"evaluations": 200}, workers=2)
    assert proc.returncode == 1, proc.stderr
    rows = stored_rows(exp)
    failed = [r for r in rows if r["status"] == "failed"]
    assert len(failed) >= 5 and len(rows) < 200  # stopped: most of the budget never ran
    assert {r["status"] for r in rows} == {"failed"}
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("emews: stopped: the first 5 evaluations all failed: RuntimeError: bad parameters x=")
    first = next(r for r in failed if f"x={json.loads(r['params'])['x']} " in line + " ")
    # a Python objective makes no run dir: the line names the task and the file that holds its error
    assert not task_run_dir(exp / "runs", first["id"]).exists()
    assert f"(the first failed task is id {first['id']}, its whole error in {exp / 'results.csv'})" in line
    with open(exp / "results.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["id"] == str(first["id"]))
    assert "Traceback (most recent call last)" in row["error"] and "RuntimeError: bad parameters" in row["error"]
    assert "budget.fail_fast: 0" in line  # how to run on regardless
    assert summary["exit_status"] == 1 and summary["error"].startswith("the first 5 evaluations all failed")
    assert summary["failure_cause"]["count"] == len(failed)
    assert summary["failure_cause"]["cause"].startswith("RuntimeError: bad parameters x=")
    assert emews_cmd.leftovers_after_exit() == []


def test_failures_of_different_causes_go_on_and_the_summary_names_the_most_frequent(emews_cmd, tmp_path) -> None:
    proc, exp, summary = launch(emews_cmd, tmp_path, "differ", {"evaluations": 12})
    assert proc.returncode == 0, proc.stderr
    assert len(stored_rows(exp)) == 12
    assert "most frequent failure: 8x ValueError: lr 0.001 too large" in proc.stderr
    assert summary["failure_cause"] == {"cause": "ValueError: lr 0.001 too large", "count": 8}
    assert summary["error"] is None and summary["exit_status"] == 0


def test_a_run_where_some_evaluations_succeed_goes_on(emews_cmd, tmp_path) -> None:
    proc, exp, summary = launch(emews_cmd, tmp_path, "some_ok", {"evaluations": 12, "fail_fast": 3})
    assert proc.returncode == 0, proc.stderr  # x=1 and x=2 fail alike, then x=3 succeeds
    assert [r["status"] for r in stored_rows(exp)].count("ok") == 4 and len(stored_rows(exp)) == 12


def test_fail_fast_0_runs_the_whole_budget(emews_cmd, tmp_path) -> None:
    proc, exp, summary = launch(emews_cmd, tmp_path, "always", {"evaluations": 12, "fail_fast": 0})
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in stored_rows(exp)] == ["failed"] * 12
    assert "most frequent failure: 12x RuntimeError: bad parameters x=1" in proc.stderr
    assert summary["failure_cause"] == {"cause": "RuntimeError: bad parameters x=1", "count": 12}


def test_a_command_model_whose_parser_rejects_its_argv_stops_with_argparses_error_line(emews_cmd, tmp_path) -> None:
    """The first try of a CANDLE-style model: every evaluation dies in argparse, and the stop names
    the parser's own line (not "exited with status 2") and a run dir holding the model's stderr."""
    (tmp_path / "nt3_baseline.py").write_text(
        "import argparse, time\ntime.sleep(0.05)\nparser = argparse.ArgumentParser(prog='nt3_baseline')\n"
        "parser.add_argument('--lr', type=int)\nprint('loss', parser.parse_args().lr)\n")
    wf = write_workflow(tmp_path, objective={"command": ["python3", "nt3_baseline.py"], "metric": "loss"},
                        space={"lr": {"type": "float", "lower": 0.001, "upper": 0.1}}, budget={"evaluations": 100})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 1, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("emews: stopped: the first 5 evaluations all failed: "
                           "nt3_baseline: error: argument --lr: invalid int value: '0.")
    run_dir = Path(line.split("(first failed task's run dir: ")[1].split(")")[0])
    assert "usage: nt3_baseline" in (run_dir / "stderr.txt").read_text()
    assert len(stored_rows(tmp_path / "exp")) < 100


@pytest.mark.parametrize("abort", [True, False])
def test_an_aborting_stop_behind_tasks_handed_over_ahead_starts_none_of_them(abort: bool) -> None:
    """Fast failures are handed to a worker in batches; the fail-fast stop (an abort) comes behind
    them and must keep the worker from starting them (they went on to spend the budget: 20 of 20,
    or 522 of 2,000 evaluations before a run stopped "after the first 5"), while a plain stop lets
    the worker finish what it holds."""
    hub = ThreadHub(2)
    distributor, worker = hub.endpoint(0), hub.endpoint(1)
    tasks = [Task(i, {"x": i}, seed=i, submitted=0.0) for i in range(3)]
    distributor.send(tasks[:1], 1, Tag.TASK)
    distributor.send(tasks[1:], 1, Tag.TASK)
    distributor.send(abort, 1, Tag.STOP)
    runner = RecordingRunner(lambda task: Outcome(task.id, Status.FAILED, error="ValueError: bad"))  # fails at once
    served = worker_loop(worker, runner)
    messages = drained(distributor)
    stopped = messages[-1].payload
    assert messages[-1].tag is Tag.STOPPED and isinstance(stopped, WorkerStopped)
    sent = [o.task_id for m in messages if m.tag is Tag.OUTCOME for o in m.payload]
    if abort:  # the first task was running when the stop came in: the others never start
        assert runner.ran == [0] and sent == [0] and served == 1
        assert stopped.unfinished == (1, 2)
    else:
        assert runner.ran == sent == [0, 1, 2] and served == 3 and stopped.unfinished == ()
