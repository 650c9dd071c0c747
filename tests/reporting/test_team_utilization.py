"""Utilization of multi-rank tasks (issue 25): a task of ``task.ranks`` k is busy on k worker ranks,
in the report's header, its load plot and the frame, from a real 2-rank team run under ``mpiexec``."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import browser
import pytest
from test_report import needs_chromium, report, screenshot_path

from emews.reporting import data as report_data
from emews.reporting import timeline
from testutil import TESTS, EmewsCommand, write_workflow

TEAM = str(TESTS / "objectives" / "team.py")


def team_exp(folder: Path, ranks: object, space: dict) -> Path:
    wf = write_workflow(folder, optimizer={"name": "sweep"}, objective={"module": TEAM, "function": "allreduce"},
                        space=space, budget={"evaluations": 6},
                        task={"timeout": 60, "isolation": "inline", "ranks": ranks})
    proc = EmewsCommand(folder)("launch", str(wf), "--workers", "3", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "exp"


@pytest.fixture(scope="module")
def pairs_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six tasks of 2 ranks each on 3 workers."""
    return team_exp(tmp_path_factory.mktemp("pairs"), 2, {"x": {"type": "ordered", "values": [1, 2, 3, 4, 5, 6]}})


@pytest.fixture(scope="module")
def mixed_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tasks sized by their parameter k: 1, 2 or 3 ranks."""
    return team_exp(tmp_path_factory.mktemp("mixed"), "k",
                    {"k": {"type": "ordered", "values": [1, 2, 3]}, "x": {"type": "ordered", "values": [1, 2]}})


def busy_rank_seconds(exp: Path) -> float:
    """Busy worker-time recomputed from the store: each task's duration times its team's size (the
    ``size`` its allreduce objective measured on ``ctx.comm``)."""
    with sqlite3.connect(f"file:{exp / 'results.db'}?mode=ro", uri=True) as db:
        return db.execute("SELECT SUM((finished - started) * json_extract(metrics, '$.size')) FROM results "
                          "WHERE status = 'ok'").fetchone()[0]


@pytest.mark.parametrize("name", ["pairs_exp", "mixed_exp"])
def test_a_multi_rank_task_is_busy_on_each_of_its_ranks(name: str, request: pytest.FixtureRequest) -> None:
    exp = request.getfixturevalue(name)
    data = report_data.load(exp)
    assert (data.results["status"] == "ok").all()
    use = timeline.utilization(data.results, data.workers)
    assert use.busy_seconds == pytest.approx(busy_rank_seconds(exp), rel=1e-9)
    assert use.busy_seconds + use.idle_optimizer_seconds + use.idle_dispatch_seconds == \
        pytest.approx(use.capacity, rel=1e-9)
    assert timeline.load(data.results).busy.max() <= data.workers


@needs_chromium
def test_the_header_counts_every_rank_of_a_team(pairs_exp: Path, tmp_path: Path) -> None:
    report(pairs_exp)
    page = browser.open_page(pairs_exp / "report.html", screenshot_path(tmp_path, "report-teams"))
    assert page.errors() == []
    use = timeline.utilization(report_data.load(pairs_exp).results, 3)
    busy = float(re.match(r"([\d.]+)% busy", page.header["utilization"]).group(1))
    assert busy == pytest.approx(100 * busy_rank_seconds(pairs_exp) / use.capacity, abs=0.051)


def test_the_gantt_marks_multi_rank_tasks(mixed_exp: Path) -> None:
    from emews.reporting.gantt import Gantt

    data = report_data.load(mixed_exp)
    gantt = Gantt().make(data)
    assert gantt is not None
    hatched = [c for c in gantt.figure.axes[0].collections if c.get_hatch()]
    teams = int((data.results["ranks"] > 1).sum())
    assert teams == 4 and len(hatched) == 1 and len(hatched[0].get_paths()) == teams
    assert f"{teams} evaluations ran on several ranks (task.ranks): each is hatched on its team's rank 0" \
        in gantt.caption
    assert "multi-rank task" in [t.get_text() for t in gantt.figure.axes[0].get_legend().get_texts()]
