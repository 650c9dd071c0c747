"""A command objective's failures in the report are named by the line of its output that says what
went wrong (argparse's ``prog: error: ...``), not by its exit status (issue 25), in stores written
now and in stores written before a command's record led with that line."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import browser
import pytest
from test_report import needs_chromium, report, screenshot_path

from emews.reporting import data as report_data
from emews.reporting.failures import causes
from testutil import TESTS, EmewsCommand, write_workflow

MODEL = TESTS / "models" / "candle_model.py"
PYTHON = os.environ.get("PYTHON", "python3")
ARGPARSE = "candle_model.py: error: argument --epochs: invalid int value: 'many'"


@pytest.fixture(scope="module")
def command_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six evaluations of a CANDLE-style command; two pass an epochs argparse refuses ('many', 'lots')."""
    folder = tmp_path_factory.mktemp("command")
    wf = write_workflow(folder, optimizer={"name": "sweep"},
                        objective={"command": [PYTHON, str(MODEL)], "metric": "loss"},
                        space={"epochs": {"type": "categorical", "values": ["1", "many", "2", "lots"]},
                               "x": {"type": "ordered", "values": [0.5, 1.5]}},
                        budget={"evaluations": 8})
    proc = EmewsCommand(folder)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "exp"


@pytest.fixture(scope="module")
def older_exp(command_exp: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``command_exp`` as an earlier emews recorded it: each failure's record starts with the exit status."""
    exp = tmp_path_factory.mktemp("older") / "exp"
    shutil.copytree(command_exp, exp)
    with sqlite3.connect(exp / "results.db") as db:
        rows = db.execute("SELECT id, error FROM results WHERE status != 'ok'").fetchall()
        assert rows and all(e.split("\n")[1].startswith("command ") for _, e in rows)
        db.executemany("UPDATE results SET error = ? WHERE id = ?", [(e.split("\n", 1)[1], i) for i, e in rows])
    return exp


@pytest.mark.parametrize("name", ["command_exp", "older_exp"])
def test_argparses_line_names_the_failures(name: str, request: pytest.FixtureRequest) -> None:
    found = causes(report_data.load(request.getfixturevalue(name)))
    assert found.to_dict("records") == [{"status": "failed", "cause": ARGPARSE, "count": 4}]


@needs_chromium
@pytest.mark.parametrize("name", ["command_exp", "older_exp"])
def test_the_page_names_the_argparse_line(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    exp = report(request.getfixturevalue(name))
    page = browser.open_page(exp / "report.html", screenshot_path(tmp_path, f"report-{name}"))
    assert page.errors() == [] and "plot-failures" in page.section_ids
    assert ARGPARSE in page.text
    assert "exited with status" not in page.text


@needs_chromium
def test_the_header_names_the_command_it_ran(command_exp: Path, tmp_path: Path) -> None:
    """The report's workflow row said '?:run' for a command objective (an NT3 UPF: 'nt3-upf: ?:run,
    val_loss (minimize)'): it names the command, as the workflow does."""
    report(command_exp)
    page = browser.open_page(command_exp / "report.html", screenshot_path(tmp_path, "report-command-header"))
    assert page.errors() == []
    assert page.header["workflow"] == f"wf: {PYTHON} {MODEL}, loss (minimize)", page.header
