"""End-to-end runs under a real ``mpiexec`` (the one next to this Python), 3-5 ranks."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from testutil import REPO, write_workflow


def rows(exp: Path) -> list[dict]:
    db = sqlite3.connect(exp / "results.db")
    db.row_factory = sqlite3.Row
    out = [dict(r) for r in db.execute("SELECT * FROM results ORDER BY id")]
    db.close()
    return out


def test_random_workflow_end_to_end(emews_cmd) -> None:
    """The README's main command: built-in workflow, local site, 3 workers."""
    proc = emews_cmd("launch", "random", "--site", "local", "--workers", "3", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    exp = emews_cmd.cwd / "exp"
    results = rows(exp)
    assert len(results) == 200 and {r["status"] for r in results} == {"ok"}
    assert {r["rank"] for r in results} == {1, 2, 3}  # every worker got work
    assert "best objective" in proc.stderr and "200/200 evaluations" in proc.stderr
    with open(exp / "results.csv") as fh:
        header = next(csv.reader(fh))
    assert header == ["id", "status", "objective", "p:x1", "p:lr", "p:units", "p:act", "p:batch", "p:epochs",
                      "error", "rank", "host", "submitted", "started", "finished"]
    for name in ("workflow.yaml", "site.yaml", "experiment.json", "emews.log", "summary.json"):
        assert (exp / name).is_file(), name
    assert json.loads((exp / "summary.json").read_text())["completed"] == 200
    # per-task run dirs hold the isolated child's output
    assert (exp / "runs" / "000000" / "stdout.txt").exists()
    assert emews_cmd.leftover_processes() == []


def test_every_failure_kind_becomes_a_recorded_result(emews_cmd, tmp_path: Path) -> None:
    modes = ["ok", "dict", "raise", "nan", "segfault", "oom", "kill", "hang", "context"]
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"},
        space={"mode": {"type": "categorical", "values": modes}, "x": {"type": "constant", "value": 3.0}},
        budget={"evaluations": len(modes)}, task={"timeout": 8, "isolation": "process", "memory_limit": "400MB"})
    proc = emews_cmd("launch", str(wf), "--workers", "3", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    by_mode = {json.loads(r["params"])["mode"]: r for r in rows(exp)}
    assert set(by_mode) == set(modes)
    expect = {"ok": "ok", "dict": "ok", "raise": "failed", "nan": "failed", "segfault": "crashed",
              "oom": "failed", "kill": "crashed", "hang": "timeout", "context": "ok"}
    assert {m: r["status"] for m, r in by_mode.items()} == expect
    assert by_mode["ok"]["objective"] == 9.0
    assert json.loads(by_mode["dict"]["metrics"]) == {"accuracy": 0.5, "epochs_run": 3}
    assert "RuntimeError: bad parameters x=3.0" in by_mode["raise"]["error"]
    assert "Traceback" in by_mode["raise"]["error"]
    assert "NaN" in by_mode["nan"]["error"]
    assert "SIGSEGV" in by_mode["segfault"]["error"]
    assert "MemoryError" in by_mode["oom"]["error"]
    assert "SIGKILL" in by_mode["kill"]["error"]
    assert "timeout of 8 s" in by_mode["hang"]["error"]
    for r in by_mode.values():
        assert r["rank"] in (1, 2, 3) and r["host"]
    ctx = by_mode["context"]
    note = (exp / "runs" / f"{ctx['id']:06d}" / "note.txt").read_text().split()
    assert int(note[0]) == ctx["id"] and int(note[1]) == ctx["rank"]
    out = (exp / "runs" / f"{by_mode['ok']['id']:06d}" / "stdout.txt").read_text()
    assert "evaluating x=3.0" in out
    with open(exp / "results.csv") as fh:
        header = next(csv.reader(fh))
    assert "m:accuracy" in header and "m:epochs_run" in header
    assert emews_cmd.leftover_processes() == []


def test_a_crashed_child_is_replaced_and_the_worker_goes_on(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"},
        space={"mode": {"type": "categorical", "values": ["segfault", "kill", "ok"]},
               "x": {"type": "ordered", "values": [1, 2, 3, 4]}},
        budget={"evaluations": 12}, task={"timeout": 30, "isolation": "process"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    results = rows(tmp_path / "exp")
    assert len(results) == 12
    for r in results:
        mode = json.loads(r["params"])["mode"]
        assert r["status"] == ("ok" if mode == "ok" else "crashed"), r
    ok_ranks = {r["rank"] for r in results if r["status"] == "ok"}
    crash_ranks = {r["rank"] for r in results if r["status"] == "crashed"}
    assert ok_ranks & crash_ranks  # a worker whose child crashed served good tasks afterwards


def test_budget_is_respected_exactly(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(tmp_path, budget={"evaluations": 37}, task={"isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "4", "--exp-dir", "exp", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in rows(tmp_path / "exp")] == list(range(37))


def test_clean_shutdown_runs_teardown_in_every_worker(emews_cmd, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    emews_cmd.env["FAULTY_MARKERS"] = str(markers)
    for isolation in ("process", "inline"):
        for f in markers.iterdir():
            f.unlink()
        wf = write_workflow(tmp_path, name=isolation, budget={"evaluations": 12}, task={"isolation": isolation})
        proc = emews_cmd("launch", str(wf), "--workers", "3", "--exp-dir", f"exp-{isolation}", timeout=120)
        assert proc.returncode == 0, proc.stderr
        setups = {p.name.split("-")[1] for p in markers.glob("setup-*")}
        teardowns = {p.name.split("-")[1] for p in markers.glob("teardown-*")}
        assert len(setups) == 3 and setups == teardowns, (isolation, setups, teardowns)
        assert emews_cmd.leftover_processes() == []


EXPLODING = '''
from emews import Optimizer

class Exploding(Optimizer):
    def __init__(self, after=2):
        self.after = after

    def run(self, evaluator):
        evaluator.map([{"x": 0.5, "mode": "ok"}] * self.after)
        evaluator.put([{"x": 0.5, "mode": "hang"}] * evaluator.workers)
        raise ZeroDivisionError("the optimizer blew up on purpose")
'''


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_optimizer_exception_ends_the_job_quickly(emews_cmd, tmp_path: Path, isolation: str) -> None:
    (tmp_path / "exploding.py").write_text(EXPLODING)
    wf = write_workflow(
        tmp_path, optimizer={"name": "exploding.py:Exploding"},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
               "mode": {"type": "categorical", "values": ["ok", "hang"]}},
        budget={"evaluations": 20}, task={"isolation": isolation, "timeout": 600})
    start = time.monotonic()
    proc = emews_cmd("launch", str(wf), "--workers", "3", "--exp-dir", "exp", timeout=60)
    elapsed = time.monotonic() - start
    assert proc.returncode != 0
    assert "ZeroDivisionError: the optimizer blew up on purpose" in proc.stderr
    assert "Traceback" in proc.stderr and "exploding.py" in proc.stderr
    assert elapsed < 20, elapsed
    assert len(rows(tmp_path / "exp")) == 2  # results that arrived before the failure are kept
    time.sleep(0.5)
    assert emews_cmd.leftover_processes() == []


def test_kill_9_loses_at_most_the_tasks_in_flight(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(tmp_path, budget={"evaluations": 100000}, task={"isolation": "process"},
                        objective={"module": str(REPO / "tests" / "objectives" / "slow.py")})
    job = emews_cmd.popen("launch", str(wf), "--workers", "3", "--exp-dir", "exp")
    db_path = tmp_path / "exp" / "results.db"
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 30 and time.monotonic() < deadline:
        time.sleep(0.2)
        if db_path.exists():
            try:
                seen = len(rows(tmp_path / "exp"))
            except sqlite3.Error:
                pass
    assert seen >= 30, job.stderr.read() if job.poll() is not None else "too slow"
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    time.sleep(1.0)  # the children of killed ranks die with their parents (PDEATHSIG)
    results = rows(tmp_path / "exp")
    assert len(results) >= seen
    assert [r["id"] for r in results] == sorted({r["id"] for r in results})
    db = sqlite3.connect(db_path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    assert emews_cmd.leftover_processes() == []
    # and `emews results` still exports what was saved
    proc = emews_cmd("results", "exp")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {len(results)} rows" in proc.stdout


def test_a_killed_experiment_resumes_without_repeating_finished_work(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(tmp_path, budget={"evaluations": 150}, task={"isolation": "process"},
                        objective={"module": str(REPO / "tests" / "objectives" / "slow.py")})
    job = emews_cmd.popen("launch", str(wf), "--workers", "3", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    deadline = time.monotonic() + 60
    before: list[dict] = []
    while len(before) < 40 and time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            before = rows(exp) if (exp / "results.db").exists() else []
        except sqlite3.Error:
            pass
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    before = rows(exp)
    assert 40 <= len(before) < 150
    proc = emews_cmd("resume", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    after = rows(exp)
    assert len(after) == 150 and {r["status"] for r in after} == {"ok"}
    assert len({r["params"] for r in after}) == 150  # no point evaluated twice
    assert {r["id"]: r["finished"] for r in before} == {r["id"]: r["finished"] for r in after if r["id"] in
                                                          {b["id"] for b in before}}
    assert f"resumed: {len(before)} evaluations answered from the results store" in proc.stderr


def test_each_worker_sees_exactly_its_gpus(emews_cmd, tmp_path: Path) -> None:
    """GPU binding by environment variable from the node-local rank, reported in the task context."""
    (tmp_path / "site-configs").mkdir()
    (tmp_path / "site-configs" / "gpubox.yaml").write_text(
        "extends: local\nnode: {gpus: 4, gpus_per_worker: 2, gpu_binding: env, gpu_env: CUDA_VISIBLE_DEVICES}\n")
    wf = write_workflow(tmp_path, optimizer={"name": "sweep"},
                        space={"mode": {"type": "constant", "value": "gpus"},
                               "x": {"type": "ordered", "values": list(range(8))}},
                        budget={"evaluations": 8}, task={"isolation": "process"})
    proc = emews_cmd("launch", str(wf), "--site", "gpubox", "--workers", "2", "--exp-dir", "exp", timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = {r["rank"]: json.loads(r["metrics"]) for r in rows(tmp_path / "exp")}
    assert seen == {1: {"gpu_ids": [0, 1], "visible": "0,1"}, 2: {"gpu_ids": [2, 3], "visible": "2,3"}}
    too_many = emews_cmd("launch", str(wf), "--site", "gpubox", "--workers", "3", "--exp-dir", "exp2")
    assert too_many.returncode == 2 and "GPUs" in too_many.stderr
    assert not (tmp_path / "exp2").exists()
