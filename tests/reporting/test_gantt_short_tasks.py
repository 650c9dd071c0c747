"""The quickstart's report (``emews launch random --workers 3``): its tasks take no time the store can
tell (started == finished at its resolution), and the Gantt drew such a task as a bar of no width, so
workers 2 and 3, which ran 44 of its 200 tasks, showed as idle lanes. Each worker that ran a task has
a lane of bars in the page as a real Chromium draws it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import browser
import pytest
from test_report import needs_chromium, report, screenshot_path
from test_team_utilization import GANTT_ROWS, bar_bands

from testutil import EmewsCommand


@pytest.fixture(scope="module")
def instant_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The quickstart's random search on 3 workers (60 evaluations), each task then recorded as one
    instant, as most of the quickstart's are (made so for every task: which ones are is timing)."""
    folder = tmp_path_factory.mktemp("instant")
    proc = EmewsCommand(folder)("launch", "random", "--site", "local", "--workers", "3", "--exp-dir", "exp",
                                "--set", "budget.evaluations=60", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = folder / "exp"
    with sqlite3.connect(exp / "results.db") as db:
        db.execute("UPDATE results SET finished = started")
    return exp


def ranks_that_ran(exp: Path) -> set[int]:
    with sqlite3.connect(f"file:{exp / 'results.db'}?mode=ro", uri=True) as db:
        return {rank for (rank,) in db.execute("SELECT DISTINCT rank FROM results WHERE rank IS NOT NULL")}


@needs_chromium
def test_every_worker_that_ran_a_task_has_bars(instant_exp: Path, tmp_path: Path) -> None:
    ran = ranks_that_ran(instant_exp)
    assert len(ran) >= 2  # the lanes to tell apart: workers that ran tasks of no measurable length
    report(instant_exp)
    page = browser.open_page(instant_exp / "report.html", screenshot_path(tmp_path, "report-gantt-instant"),
                             script=GANTT_ROWS)
    assert page.errors() == []
    assert bar_bands(page) == len(ran)
    assert "60 bars shorter than 5 pixels are drawn 5 pixels wide." in page.text
