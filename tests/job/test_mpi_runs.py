"""End-to-end runs under a real ``mpiexec`` (the one next to this Python), 3-5 ranks."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from emews.objective.context import task_run_dir
from testutil import GATED, wait_until, write_workflow, stored_rows as rows


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
                      "error", "rank", "host", "submitted", "started", "finished", "seed"]
    for name in ("workflow.yaml", "site.yaml", "experiment.json", "emews.log", "summary.json"):
        assert (exp / name).is_file(), name
    assert json.loads((exp / "summary.json").read_text())["completed"] == 200
    assert emews_cmd.leftovers_after_exit() == []  # the CSV child included, where one ran
    # the CSV the run wrote (following the store, or at the end on a full node) is what a full export writes
    assert "written at the end instead" not in (exp / "emews.log").read_text()
    followed = (exp / "results.csv").read_bytes()
    assert emews_cmd("results", "exp", timeout=60).returncode == 0
    assert (exp / "results.csv").read_bytes() == followed


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
    note = (task_run_dir(exp / "runs", ctx["id"]) / "note.txt").read_text().split()
    assert int(note[0]) == ctx["id"] and int(note[1]) == ctx["rank"]
    out = (task_run_dir(exp / "runs", by_mode["ok"]["id"]) / "stdout.txt").read_text()  # the child's output
    assert "evaluating x=3.0" in out
    with open(exp / "results.csv") as fh:
        header = next(csv.reader(fh))
    assert "m:accuracy" in header and "m:epochs_run" in header
    assert emews_cmd.leftovers_after_exit() == []


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
        assert emews_cmd.leftovers_after_exit() == []


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
    """The job ends on the optimizer's error without waiting for the hanging tasks: their
    timeout (600 s) is far beyond the command's (120 s, else ``TimeoutExpired``)."""
    (tmp_path / "exploding.py").write_text(EXPLODING)
    wf = write_workflow(
        tmp_path, optimizer={"name": "exploding.py:Exploding"},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
               "mode": {"type": "categorical", "values": ["ok", "hang"]}},
        budget={"evaluations": 20}, task={"isolation": isolation, "timeout": 600})
    proc = emews_cmd("launch", str(wf), "--workers", "3", "--exp-dir", "exp", timeout=120)
    assert proc.returncode != 0
    assert "ZeroDivisionError: the optimizer blew up on purpose" in proc.stderr
    assert "Traceback" in proc.stderr and "exploding.py" in proc.stderr
    assert len(rows(tmp_path / "exp")) == 2  # results that arrived before the failure are kept
    assert emews_cmd.leftovers_after_exit() == []


SEEN_RANDOM = '''
import os
from emews import EvaluatorObserver
from emews.optimizers.random import RandomSearch


class SeenRandom(RandomSearch):
    """Random search that appends the id of every result it receives to $SEEN_FILE (fsynced)."""

    def run(self, evaluator):
        with open(os.environ["SEEN_FILE"], "a") as seen:
            class Seen(EvaluatorObserver):
                def received(self, results):
                    seen.write("".join(f"{r.id}\\n" for r in results))
                    seen.flush()
                    os.fsync(seen.fileno())

            evaluator.observers.append(Seen())
            super().run(evaluator)
'''


def seen_ids(path: Path) -> list[int]:
    """The ids an optimizer wrote, whole lines only (a kill may cut the last one)."""
    if not path.exists():
        return []
    return [int(line) for line in path.read_text().split("\n")[:-1]]


def test_kill_9_keeps_what_the_optimizer_saw_and_resume_completes_the_budget(emews_cmd, tmp_path: Path) -> None:
    """kill -9 of every process of the job at once: every result the optimizer received is in the store (stored
    before it is seen), the store is intact and nothing is left running. ``emews resume`` then
    runs the budget out: each id is stored once, earlier rows are untouched, and across both runs
    the optimizer receives each id exactly once (earlier ones as history)."""
    (tmp_path / "seen_random.py").write_text(SEEN_RANDOM)
    wf = write_workflow(tmp_path, optimizer={"name": "seen_random.py:SeenRandom", "options": {"seed": 1}},
                        budget={"evaluations": 150}, task={"isolation": "process", "timeout": 600},
                        objective={"module": str(GATED)})
    exp, gate, seen_file = tmp_path / "exp", tmp_path / "gate-open", tmp_path / "seen-1.txt"
    # tasks from id 40 on wait at the gate (closed until the resume): the job cannot end first
    emews_cmd.env.update(SEEN_FILE=str(seen_file), GATE_FILE=str(gate), GATE_FROM="40")
    job = emews_cmd.popen("launch", str(wf), "--workers", "3", "--exp-dir", "exp")
    if not wait_until(lambda: len(seen_ids(seen_file)) >= 30 or job.poll() is not None, timeout=180):
        pytest.fail("the optimizer saw fewer than 30 results in 180 s")
    assert job.poll() is None, job.communicate()
    emews_cmd.kill_all()
    job.wait()
    assert emews_cmd.leftovers_after_exit() == []
    seen = seen_ids(seen_file)
    before = rows(exp)
    assert len(seen) == len(set(seen)) >= 30
    assert set(seen) <= {r["id"] for r in before}, sorted(set(seen) - {r["id"] for r in before})
    db = sqlite3.connect(exp / "results.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    proc = emews_cmd("results", "exp")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {len(before)} rows" in proc.stdout

    gate.touch()
    emews_cmd.env["SEEN_FILE"] = str(tmp_path / "seen-2.txt")
    proc = emews_cmd("resume", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"resumed: {len(before)} earlier evaluations given to the optimizer" in proc.stderr
    after = rows(exp)
    after_ids = [r["id"] for r in after]
    assert len(after) == 150 and len(set(after_ids)) == 150 and {r["status"] for r in after} == {"ok"}
    assert len({r["params"] for r in after}) == 150  # no point evaluated twice
    assert [r for r in after if r["id"] in {b["id"] for b in before}] == before  # earlier rows untouched
    resumed_seen = seen_ids(tmp_path / "seen-2.txt")
    assert len(resumed_seen) == len(set(resumed_seen))
    assert set(resumed_seen).isdisjoint(r["id"] for r in before)
    assert set(resumed_seen) | {r["id"] for r in before} == set(after_ids)
    assert emews_cmd.leftovers_after_exit() == []


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


def test_one_worker_is_one_worker_not_1_workers(emews_cmd, tmp_path: Path) -> None:
    """The run's header said 'experiment ...: 1 workers', its progress '1/1 workers busy', a batch
    script '# emews site perlmutter: 1 workers + 1 optimizer = 2 ranks on 1 node(s)'."""
    wf = write_workflow(tmp_path, budget={"evaluations": 3})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert f"experiment {tmp_path / 'exp'}: 1 worker\n" in proc.stderr
    assert "1 workers" not in proc.stderr and "/1 worker busy" in proc.stderr, proc.stderr
    dry = emews_cmd("launch", str(wf), "--site", "perlmutter", "--workers", "1", "--set", "scheduler.nodes=1",
                    "--set", "scheduler.account=m1", "--exp-dir", "dry", "--dry-run", timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "# emews site perlmutter: 1 worker + 1 optimizer = 2 ranks on 1 node\n" in dry.stdout + dry.stderr
