"""A sweep over a points file with no ``space`` (a CANDLE UPF sweep, issue 25 point 1): the report,
its plots and ``emews status`` take the parameters from the stored points (``results.csv``'s
``p:`` columns), as they would from a space."""

from __future__ import annotations

import json
from pathlib import Path

import browser
import pytest
from test_report import needs_chromium, report, screenshot_path

from emews.reporting import data as report_data
from emews.reporting import render
from testutil import EmewsCommand, write_workflow

#: the objective: the loss depends on lr, less on batch; act is a categorical
OBJECTIVE = "def run(p):\n    return (p['lr'] - 0.3) ** 2 + p['batch'] / 1000 + (0.1 if p['act'] == 'tanh' else 0.0)\n"
POINTS = [{"lr": round(0.05 * i, 2), "batch": 16 * (1 + i % 4), "act": ("relu", "tanh")[i % 2]} for i in range(1, 17)]


@pytest.fixture(scope="module")
def spaceless_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("spaceless")
    (folder / "points.txt").write_text("".join(json.dumps(p) + "\n" for p in POINTS))
    (folder / "obj.py").write_text(OBJECTIVE)
    wf = write_workflow(
        folder,
        optimizer={"name": "sweep", "options": {"file": "points.txt"}},
        objective={"module": "obj.py"},
        space={},
        budget={"evaluations": len(POINTS)},
    )
    proc = EmewsCommand(folder)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "exp"


def test_the_parameters_come_from_the_stored_points(spaceless_exp: Path) -> None:
    data = report_data.load(spaceless_exp)
    assert data.space == {}
    assert list(data.params.columns) == ["lr", "batch", "act"]
    assert sorted(data.params["lr"]) == sorted(p["lr"] for p in POINTS)
    made = {p.name: p for p in render.plots(data)[0]}
    assert {"parallel", "importance", "slices", "contour"} <= set(made)
    assert [ax.get_xlabel() for ax in made["slices"].figure.axes][0] == "lr"


def test_status_names_the_best_point(spaceless_exp: Path) -> None:
    proc = EmewsCommand(spaceless_exp.parent)("status", str(spaceless_exp), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "{}" not in proc.stdout
    assert '{"lr": 0.2, "batch": 16, "act": "relu"}' in proc.stdout, proc.stdout


@needs_chromium
def test_the_page_of_a_spaceless_sweep(spaceless_exp: Path, tmp_path: Path) -> None:
    report(spaceless_exp)
    page = browser.open_page(spaceless_exp / "report.html", screenshot_path(tmp_path, "report-spaceless"))
    assert page.errors() == []
    for section in ("plot-parallel", "plot-importance", "plot-slices", "plot-contour"):
        assert section in page.section_ids
    assert "Not shown (nothing to plot yet): curves." in page.text  # only the curves: no reports
    assert {"lr", "batch", "act"} <= set(page.top_k[0]), page.top_k[0]
    assert page.top_k[0]["lr"] == "0.2" and page.top_k[0]["act"] == "relu"


def test_status_shows_the_best_point_as_stored_when_the_lines_differ_in_keys(tmp_path: Path) -> None:
    """A UPF's lines may differ in keys: ``emews status`` printed the best point with every other
    line's keys as ``null`` (``{"id": "lists", ..., "mode": null, "sleep": null}``), parameters the
    point never had, where ``emews results`` and the end of the run print it as stored. A null the
    point holds stays."""
    lines = [
        {"id": "best", "lr": 0.3, "note": None},
        {"id": "slow", "lr": 0.5, "mode": "sleep"},
        {"id": "wide", "lr": 0.9, "dense": [10, 10]},
    ]
    (tmp_path / "upf.txt").write_text("".join(json.dumps(p) + "\n" for p in lines))
    (tmp_path / "obj.py").write_text("def run(p):\n    return abs(p['lr'] - 0.3)\n")
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep", "options": {"file": "upf.txt"}},
        objective={"module": "obj.py"},
        space={},
        budget={"evaluations": len(lines)},
    )
    emews = EmewsCommand(tmp_path)
    assert emews("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300).returncode == 0
    stored = '{"id": "best", "lr": 0.3, "note": null}'
    results = emews("results", "exp", timeout=120)
    status = emews("status", "exp", timeout=120)
    assert stored in results.stdout.splitlines()[2], results.stdout
    assert stored in status.stdout.splitlines()[3], status.stdout
