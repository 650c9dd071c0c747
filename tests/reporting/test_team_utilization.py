"""Utilization of multi-rank tasks (issue 25): a task of ``task.ranks`` k is busy on k worker ranks,
in the report's header, its load plot and the frame, from a real 2-rank team run under ``mpiexec``."""

from __future__ import annotations

import json
import re
import shutil
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
def pairs_page(pairs_exp: Path) -> Path:
    """``emews report`` of the pairs run, made once for the tests that read its page."""
    return report(pairs_exp) / "report.html"


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
def test_the_header_counts_every_rank_of_a_team(pairs_exp: Path, pairs_page: Path, tmp_path: Path) -> None:
    page = browser.open_page(pairs_page, screenshot_path(tmp_path, "report-teams"))
    assert page.errors() == []
    use = timeline.utilization(report_data.load(pairs_exp).results, 3)
    busy = float(re.match(r"([\d.]+)% busy", page.header["utilization"]).group(1))
    assert busy == pytest.approx(100 * busy_rank_seconds(pairs_exp) / use.capacity, abs=0.051)


def stored_teams(exp: Path) -> list[tuple[int, int, list[int] | None]]:
    """(rank, team size its objective measured, team_ranks) of each result, from the store."""
    with sqlite3.connect(f"file:{exp / 'results.db'}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT rank, json_extract(metrics, '$.size'), team_ranks FROM results ORDER BY id")
        return [(rank, size, None if team is None else json.loads(team)) for rank, size, team in rows]


def test_the_store_records_the_ranks_each_team_held(mixed_exp: Path) -> None:
    """Each task of k > 1 ranks keeps its k distinct worker ranks, team rank 0 (its ``rank``) first."""
    rows = stored_teams(mixed_exp)
    assert sorted(size for _, size, _ in rows) == [1, 1, 2, 2, 3, 3]
    for rank, size, team in rows:
        if size == 1:
            assert team is None
        else:
            assert team is not None and len(set(team)) == size and team[0] == rank and set(team) <= {1, 2, 3}


def test_the_gantt_draws_a_team_on_every_rank_it_held(mixed_exp: Path) -> None:
    from emews.reporting.gantt import Gantt

    data = report_data.load(mixed_exp)
    gantt = Gantt().make(data)
    assert gantt is not None
    ax = gantt.figure.axes[0]
    hatched = [c for c in ax.collections if c.get_hatch()]
    teams = int((data.results["ranks"] > 1).sum())
    assert teams == 4 and len(hatched) == 1 and len(hatched[0].get_paths()) == 2 + 2 + 3 + 3
    rows = {round(float(p.vertices[:, 1].mean())) for p in hatched[0].get_paths()}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2", "3"] and rows == {0, 1, 2}
    assert f"{teams} evaluations ran on several ranks (task.ranks): each is hatched on every rank of its team." \
        in gantt.caption
    assert "multi-rank task" in [t.get_text() for t in ax.get_legend().get_texts()]


#: the rows of the Gantt image (read back from the page in Chromium) with the pixels of each:
#: how many are the colour of a successful task's bar (#2b8cbe)
GANTT_ROWS = """
const img = document.getElementById('img-gantt');
const canvas = document.createElement('canvas');
canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
const g = canvas.getContext('2d'); g.drawImage(img, 0, 0);
const d = g.getImageData(0, 0, canvas.width, canvas.height).data;
const rows = [];
for (let y = 0; y < canvas.height; y++) {
  let n = 0;
  for (let x = 0; x < canvas.width; x++) {
    const i = 4 * (y * canvas.width + x);
    if (Math.abs(d[i] - 0x2b) + Math.abs(d[i + 1] - 0x8c) + Math.abs(d[i + 2] - 0xbe) < 40) n++;
  }
  rows.push(n);
}
return {rows: rows};
"""


def bar_bands(page: browser.PageCheck) -> int:
    """How many horizontal lanes of bars the Gantt image shows: runs of at least 20 image rows that
    each hold bar-coloured pixels (the legend's patch is a few rows tall)."""
    rows = page.measured["rows"]  # type: ignore[index]
    runs, length = [], 0
    for n in [*rows, 0]:
        if n >= 3:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    return sum(1 for r in runs if r >= 20)


def leaders_and_held(exp: Path) -> tuple[set[int], set[int]]:
    rows = stored_teams(exp)
    return {rank for rank, _, _ in rows}, {r for rank, _, team in rows for r in (team or [rank])}


@needs_chromium
def test_the_report_shows_bars_on_both_ranks_of_each_team(pairs_exp: Path, pairs_page: Path, tmp_path: Path) -> None:
    """In the page as Chromium draws it, the Gantt has a lane of bars for each rank the 2-rank teams
    held, not only for their rank 0."""
    leaders, held = leaders_and_held(pairs_exp)
    assert len(held) > len(leaders)  # some team rank is never a rank 0: before, its lane was empty
    page = browser.open_page(pairs_page, screenshot_path(tmp_path, "report-team-gantt"),
                             script=GANTT_ROWS)
    assert page.errors() == []
    assert bar_bands(page) == len(held)
    assert f"(6 evaluations, {len(held)} workers)" in page.text
    assert "6 evaluations ran on several ranks (task.ranks): each is hatched on every rank of its team." in page.text


@needs_chromium
def test_a_store_that_does_not_record_teams_still_reports(pairs_exp: Path, tmp_path: Path) -> None:
    """A store of schema 1 (no ``team_ranks``): each team is drawn on its rank 0, the caption says
    why, and the utilization still counts both ranks of each team (the workflow's task.ranks)."""
    old = tmp_path / "exp"
    shutil.copytree(pairs_exp, old)
    (old / "report.html").unlink(missing_ok=True)
    with sqlite3.connect(old / "results.db") as db:
        db.executescript("ALTER TABLE results DROP COLUMN team_ranks; PRAGMA user_version = 1")
    leaders, _ = leaders_and_held(pairs_exp)
    report(old)
    page = browser.open_page(old / "report.html", screenshot_path(tmp_path, "report-team-gantt-old"),
                             script=GANTT_ROWS)
    assert page.errors() == []
    assert bar_bands(page) == len(leaders)
    assert "This store does not record which ranks a team held: 6 of them are drawn on their team's rank 0 alone" \
        in page.text
    use = timeline.utilization(report_data.load(old).results, 3)
    assert use.busy_seconds == pytest.approx(busy_rank_seconds(old), rel=1e-9)
    with sqlite3.connect(f"file:{old / 'results.db'}?mode=ro", uri=True) as db:  # read, not migrated
        assert "team_ranks" not in {row[1] for row in db.execute("PRAGMA table_info(results)")}
