"""``emews resume`` of an experiment with nothing left to run (its ``budget.evaluations`` all stored,
no task unfinished) says so in one line, starts no job and exits with the status the last run
recorded; when that is uncertain (no ``summary.json``, a ``results.csv`` short of rows) the job runs
as before. Real ``emews launch`` and ``emews resume`` (mpiexec). The finished case resumed with a
larger budget: tests/core/test_hardening.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testutil import FAULTY, stored_rows, write_workflow


def files_of(exp: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``exp``: its size and modification time (ns); not SQLite's WAL index
    (``results.db-shm``), which every reader of the store writes to."""
    return {str(p.relative_to(exp)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in exp.rglob("*") if p.is_file() and not p.name.endswith("-shm")}


def launch(emews_cmd, tmp_path: Path, mode: str, budget: dict) -> Path:
    """Sweep x = 1, 2, 3 over the faulty objective in ``mode`` (inline tasks, one worker)."""
    wf = write_workflow(tmp_path, optimizer={"name": "sweep"}, objective={"module": str(FAULTY)},
                        space={"x": {"type": "ordered", "values": [1, 2, 3]},
                               "mode": {"type": "constant", "value": mode}},
                        budget=budget, task={"isolation": "inline"})
    emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    return tmp_path / "exp"


def test_a_failed_run_with_its_budget_spent_resumes_to_nothing_and_stays_failed(emews_cmd, tmp_path: Path) -> None:
    exp = launch(emews_cmd, tmp_path, "raise", {"evaluations": 3, "fail_fast": 3})
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["exit_status"] == 1 and summary["completed"] == 3, summary  # stopped fast at its last evaluation
    before = files_of(exp)
    proc = emews_cmd("resume", "exp", timeout=240)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [
        f"emews: nothing to resume: {exp.absolute()} has the 3 evaluations of its budget (budget.evaluations: 3); "
        "raise it with --set budget.evaluations=N to go on"
    ]
    assert files_of(exp) == before and not (exp / "lease.json").exists()


def test_a_lowered_budget_resumes_to_nothing(emews_cmd, tmp_path: Path) -> None:
    exp = launch(emews_cmd, tmp_path, "ok", {"evaluations": 3})
    proc = emews_cmd("resume", "exp", "--set", "budget.evaluations=2", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "has 3 evaluations, over its budget (budget.evaluations: 2)" in proc.stderr
    assert len(stored_rows(exp)) == 3


def drop_summary(exp: Path) -> None:
    (exp / "summary.json").unlink()  # as after a kill -9 in the first run's last moments


def drop_a_csv_row(exp: Path) -> None:
    csv = exp / "results.csv"  # as after a full disk while the CSV was written (the summary says 0)
    csv.write_text("".join(csv.read_text().splitlines(keepends=True)[:-1]))


@pytest.mark.parametrize("uncertain", [drop_summary, drop_a_csv_row])
def test_when_the_last_run_left_no_summary_or_an_old_csv_the_job_runs_as_before(emews_cmd, tmp_path: Path,
                                                                               uncertain) -> None:
    exp = launch(emews_cmd, tmp_path, "ok", {"evaluations": 3})
    uncertain(exp)
    log = (exp / "emews.log").stat().st_size
    proc = emews_cmd("resume", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to resume" not in proc.stderr and "resumed: 3 earlier evaluations" in proc.stderr
    assert json.loads((exp / "summary.json").read_text())["completed"] == 3
    assert len((exp / "results.csv").read_text().splitlines()) == 1 + 3
    assert (exp / "emews.log").stat().st_size > log  # the job ran and logged
    assert len(stored_rows(exp)) == 3


def test_a_run_that_spent_its_time_budget_resumes_to_nothing(emews_cmd, tmp_path: Path) -> None:
    """``budget: {time: 2s}`` spent: resume started a job that did nothing; it says so in one line,
    as for an evaluation budget, and how to raise it."""
    (tmp_path / "slow.py").write_text("import time\n\n\ndef run(p):\n    time.sleep(0.3)\n    return p['x']\n")
    wf = write_workflow(tmp_path, optimizer={"name": "random", "options": {"seed": 1}},
                        objective={"module": str(tmp_path / "slow.py")},
                        space={"x": {"type": "float", "lower": 0, "upper": 1}},
                        budget={"time": "2s"}, task={"isolation": "inline"})
    first = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert first.returncode == 0, first.stderr
    exp = tmp_path / "exp"
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["budget_reached"] and summary["elapsed"] >= 2, summary
    before = files_of(exp)
    proc = emews_cmd("resume", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"emews: nothing to resume: {exp.absolute()} spent its time budget (") and \
        line.endswith("budget.time: 2s); raise it with --set budget.time=... to go on"), line
    assert files_of(exp) == before and not (exp / "lease.json").exists()


def test_the_resumed_line_comes_before_the_progress_lines(emews_cmd, tmp_path: Path) -> None:
    """``emews resume`` said ``resumed: N earlier evaluations ...`` at the run's end, after its
    progress lines: it is said when the resume takes effect, before the first progress line."""
    exp = launch(emews_cmd, tmp_path, "ok", {"evaluations": 2})
    proc = emews_cmd("resume", "exp", "--set", "budget.evaluations=3", timeout=240)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    resumed = [i for i, line in enumerate(lines) if line.startswith("resumed: 2 earlier evaluations")]
    progress = [i for i, line in enumerate(lines) if " evaluations, " in line and " failed, best " in line]
    assert len(resumed) == 1 and progress and resumed[0] < progress[0], proc.stderr
    assert "3/3 evaluations" in lines[progress[-1]], proc.stderr
    assert len(stored_rows(exp)) == 3
