"""A run whose optimizer ends on its own before the evaluation budget is spent says so (real launch).

A new user read a GA's `76/96 evaluations` with exit status 0 and nothing else as a stop (the
first-day review of 2026-11-29): the GA's generations were done and its unchanged children were
not evaluated again. Such a run now ends with a line naming the optimizer and the counts."""

from __future__ import annotations

import json
from pathlib import Path

from emews.job.rank_zero import ended_under_budget
from testutil import write_workflow


def test_a_ga_whose_generations_end_before_the_budget_says_so(tmp_path: Path, emews_cmd) -> None:
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "ga", "options": {"population": 4, "generations": 1, "seed": 3, "strategy": "simple"}},
        budget={"evaluations": 40},  # 4 + 4 at the most
    )
    launched = emews_cmd("launch", str(wf), "--site", "local", "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert launched.returncode == 0, launched.stderr
    summary = json.loads((tmp_path / "exp" / "summary.json").read_text())
    done = summary["completed"] + summary["failed"]
    assert done <= 8, summary
    lines = launched.stderr.splitlines()
    said = f"the ga optimizer ended on its own after {done} of the 40 evaluations the budget allows"
    ended = [i for i, line in enumerate(lines) if line.startswith(said)]
    results = [i for i, line in enumerate(lines) if line.startswith("results: ")]
    assert ended and results and ended[0] < results[0], launched.stderr  # above the results: line, as documented


def test_a_spent_budget_says_nothing_more(tmp_path: Path, emews_cmd) -> None:
    wf = write_workflow(tmp_path, budget={"evaluations": 6})
    launched = emews_cmd("launch", str(wf), "--site", "local", "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert launched.returncode == 0, launched.stderr
    assert "ended on its own" not in launched.stderr
    assert ended_under_budget("random", 6, 6) is None
    assert ended_under_budget("random", 6, None) is None
