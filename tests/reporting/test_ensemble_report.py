"""The report of a UQ ensemble (``replicates``) ranks points by their mean over the replicates, as
the optimizer, the best point and docs/results.md do."""

from __future__ import annotations

from pathlib import Path

import browser
from test_report import needs_chromium, report, screenshot_path

from testutil import EmewsCommand, write_workflow

#: x=2 has the luckiest replicate (0.0) and the worst mean; x=1 the best mean (1.1)
LOSSES = {1: [1.0, 1.1, 1.2], 2: [0.0, 5.0, 5.0], 3: [2.0, 2.0, 2.0]}


@needs_chromium
def test_the_top_table_of_an_ensemble_lists_points_by_their_mean(tmp_path: Path) -> None:
    """The top-k table listed single replicates (task 3 of x=2 first, with its lucky 0.0) while the
    header's best was the point x=1 with the best mean."""
    (tmp_path / "obj.py").write_text(f"def run(p):\n    return {LOSSES}[p['x']][p['replicate']]\n")
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": "obj.py"},
        space={"x": {"type": "ordered", "values": [1, 2, 3]}},
        replicates=3,
        budget={"evaluations": 9},
        task={"timeout": 30, "isolation": "inline"},
    )
    EmewsCommand(tmp_path)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=180, check=True)
    exp = report(tmp_path / "exp")
    page = browser.open_page(exp / "report.html", screenshot_path(tmp_path, "report-ensemble"))
    assert page.errors() == []
    assert page.header["best"].startswith("1.1 (mean of 3 replicates of one point: tasks 0, 1, 2)")
    rows = [(row["x"], row["value (mean)"], row["replicates"]) for row in page.top_k]
    assert rows == [("1", "1.1", "3"), ("3", "2", "3"), ("2", "3.33333", "3")], page.top_k
    assert [row["tasks"] for row in page.top_k] == ["0, 1, 2", "6, 7, 8", "3, 4, 5"]
    assert all("replicate" not in row for row in page.top_k)
