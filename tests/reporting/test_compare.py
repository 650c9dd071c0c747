"""``emews report A B``: two runs of one search (two seeds) on one page, their best-so-far curves
overlaid, checked in a real headless Chromium; experiments of different metrics are refused."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from PIL import Image

import browser
from testutil import write_workflow

needs_chromium = pytest.mark.skipif(not browser.available(), reason="chromium and chromium-driver are not installed "
                                    "(bash tools/install-system-deps.sh)")

OBJECTIVE = "def run(params):\n    return (params['x'] - 0.3) ** 2\n"
TABLE = ("const t = document.querySelector('#experiments table');"
         "const cols = [...t.querySelectorAll('th')].map(h => h.textContent);"
         "return [...t.querySelectorAll('tbody tr')].map(r => Object.fromEntries("
         "[...r.querySelectorAll('td')].map((d, i) => [cols[i], d.textContent])));")


def _run(emews_cmd, folder: Path, name: str, seed: int, evaluations: int, **objective: str) -> Path:
    folder.mkdir()
    (folder / "obj.py").write_text(OBJECTIVE)
    wf = write_workflow(folder, objective={"module": str(folder / "obj.py"), "function": "run", **objective},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
                        optimizer={"name": "random", "options": {"seed": seed}},
                        budget={"evaluations": evaluations}, task={"isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", name, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return emews_cmd.cwd / name


def _best(exp: Path) -> tuple[float, int]:
    """The best objective of ``exp`` and at which evaluation (in the order they finished) it came."""
    rows = sorted(csv.DictReader((exp / "results.csv").open()), key=lambda r: (r["finished"], int(r["id"])))
    values = [float(r["objective"]) for r in rows]
    best = min(values)
    return best, values.index(best) + 1


@needs_chromium
def test_two_seeds_of_one_search_on_one_page(emews_cmd, tmp_path: Path) -> None:
    a = _run(emews_cmd, tmp_path / "a", "seed-1", 1, 12)
    b = _run(emews_cmd, tmp_path / "b", "seed-2", 2, 8)
    proc = emews_cmd("report", str(a), str(b), "--out", "both.html", timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = browser.open_page(emews_cmd.cwd / "both.html", tmp_path / "compare.png", script=TABLE)
    assert page.errors() == []
    assert page.section_ids == ["header", "plot-compare", "experiments"]
    assert {i["id"]: (i["complete"], i["width"], i["height"]) for i in page.images} == \
        {"img-compare": (True, 1100, 480)}
    assert page.header["metric"] == "value (minimize)"
    table = page.measured
    assert [row["experiment"] for row in table] == ["seed-1", "seed-2"]
    for row, exp, count in zip(table, (a, b), (12, 8), strict=True):
        best, at = _best(exp)
        assert math.isclose(float(row["best value"]), best, rel_tol=1e-5)
        assert int(row["found at evaluation"]) == at
        assert row["evaluations"].startswith(f"{count}: ")
        assert row["optimizer"].startswith("random ")
    with Image.open(emews_cmd.cwd / "both-plots" / "compare.png") as png:
        assert png.size == (1100, 480)


def test_experiments_of_different_metrics_are_not_compared(emews_cmd, tmp_path: Path) -> None:
    a = _run(emews_cmd, tmp_path / "a", "min", 1, 3)
    b = _run(emews_cmd, tmp_path / "b", "max", 1, 3, direction="maximize")
    proc = emews_cmd("report", str(a), str(b), timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "the experiments optimize different metrics (min: value (minimize), max: value (maximize))" in line
    assert not (emews_cmd.cwd / "comparison.html").exists() and not (emews_cmd.cwd / "comparison-plots").exists()
    pdf = emews_cmd("report", str(a), str(b), "--format", "pdf", timeout=300)
    assert pdf.returncode == 2 and "a comparison is written as html or png" in pdf.stderr


def test_one_experiment_named_twice_is_refused(emews_cmd, tmp_path: Path) -> None:
    """``emews report EXP EXP/`` wrote a comparison of one experiment with itself."""
    a = _run(emews_cmd, tmp_path / "a", "once", 1, 3)
    for twice, said in ((str(a), f"{a}: named twice"), (str(a.parent / "a" / ".." / "once"), f"is {a} again")):
        proc = emews_cmd("report", str(a), twice, timeout=300)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        (line,) = proc.stderr.splitlines()
        assert line.startswith("emews: error: ") and said in line and "compare different experiments" in line, line
    assert not (emews_cmd.cwd / "comparison.html").exists() and not (emews_cmd.cwd / "comparison-plots").exists()
