"""Integers print as integers in the report and ``emews status`` (issue 25 point 4): an objective
and a training metric of 1234567 read 1234567, not 1.23457e+06."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import browser
import pytest
from test_report import needs_chromium, report, screenshot_path

from emews.output.numbers import number
from testutil import EmewsCommand, write_workflow

BIG = 1234567


@pytest.fixture(scope="module")
def counted_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep whose objective is a count: 1234567, 2469134 and 3703701."""
    folder = tmp_path_factory.mktemp("counted")
    (folder / "obj.py").write_text(f"def run(p):\n    return {BIG} * p['n']\n")
    wf = write_workflow(folder, optimizer={"name": "sweep"}, objective={"module": "obj.py"},
                        space={"n": {"type": "ordered", "values": [3, 1, 2]}}, budget={"evaluations": 3})
    proc = EmewsCommand(folder)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "exp"


def test_numbers() -> None:
    assert [number(BIG), number(float(BIG)), number(-3.0), number(2.0 ** 60)] == \
        ["1234567", "1234567", "-3", "1.15292e+18"]
    assert [number(0.123456789), number(1234567.5), number(float("nan")), number(True), number("a")] == \
        ["0.123457", "1.23457e+06", "nan", "True", "a"]


@needs_chromium
def test_the_page_prints_an_integer_objective_in_full(counted_exp: Path, tmp_path: Path) -> None:
    report(counted_exp)
    page = browser.open_page(counted_exp / "report.html", screenshot_path(tmp_path, "report-integers"))
    assert page.errors() == []
    assert page.header["best"].startswith(f"{BIG} (task ")
    assert [row["value"] for row in page.top_k] == [str(BIG * n) for n in (1, 2, 3)]
    assert "e+06" not in page.text


def test_status_prints_a_trials_integer_metric_in_full(counted_exp: Path, tmp_path: Path) -> None:
    from emews.store.trial_store import TrialStore
    from emews.training.messages import Report

    exp = tmp_path / "exp"
    shutil.copytree(counted_exp, exp)
    db = sqlite3.connect(exp / "results.db", isolation_level=None)
    TrialStore(db).add_report(Report(7, 0, 4, {"value": BIG}, 1.0), metric=BIG, loss=BIG)  # a trial under way
    db.close()
    proc = EmewsCommand(tmp_path)("status", str(exp), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"  trial 7: step 4, value {BIG}, interrupted" in proc.stdout.splitlines(), proc.stdout  # run not running


def test_status_and_the_end_of_run_summary_print_an_integer_best_in_full(counted_exp: Path, tmp_path: Path) -> None:
    proc = EmewsCommand(tmp_path)("status", str(counted_exp), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"best objective {BIG} (task " in proc.stdout, proc.stdout
    assert "e+06" not in proc.stdout, proc.stdout
