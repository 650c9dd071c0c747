"""PBT lineage in the report's learning curves (issue 25): which trial cloned which, at which step,
with which new parameters, drawn and listed, from a real PBT run under ``mpiexec``.

The run is test_trial_runs' hand-computed PBT case: trials 3-7 each clone trial 0 at their step 3."""

from __future__ import annotations

from pathlib import Path

import browser
import pytest
from stores import count
from test_report import needs_chromium, report, screenshot_path

from emews.reporting import data as report_data
from emews.reporting import render
from testutil import TESTS, EmewsCommand, pbt_workflow, wait_until

TRAINER = TESTS / "objectives" / "trainer.py"
RATES = [0.5, 0.1, 0.2, 0.9, 0.8, 0.7, 0.95, 0.85]


@pytest.fixture(scope="module")
def pbt_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pbt")
    gate = folder / "gate"
    cmd = EmewsCommand(folder)
    cmd.env.update(TRAINER_LOG=str(folder / "log.jsonl"), TRAINER_GATE=str(gate), TRAINER_HOLD_AT="6",
                   TRAINER_WAIT_HELD="1")
    wf = pbt_workflow(folder, RATES)
    exp = folder / "exp"
    job = cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: count(exp, "SELECT COUNT(*) FROM results") == 7 or job.poll() is not None,
                      timeout=240) and job.poll() is None, job.communicate()
    gate.touch()   # t1-t7 have ended: t0 trains on
    _, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    return exp


def test_the_curves_draw_and_list_every_exploit(pbt_exp: Path) -> None:
    data = report_data.load(pbt_exp)
    assert data.lineage is not None
    curves = {p.name: p for p in render.plots(data)[0]}["curves"]
    table = curves.table
    assert table is not None
    assert [(t, s, d) for t, s, d in table[["trial", "at step", "cloned trial"]].itertuples(index=False)] == \
        [(t, 3, 0) for t in range(3, 8)]
    news = {int(t): n["rate"] for t, n in zip(data.lineage["trial"], data.lineage["new_params"], strict=True)}
    for trial, text in zip(table["trial"], table["new parameters"], strict=True):
        assert text.startswith(f"rate {RATES[trial]:g} -> ") and text.endswith(f"{news[trial]:g}"), text
    ax = curves.figure.axes[0]
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    assert len(arrows) == 5 and all(a.xy[0] == 3 for a in arrows)
    assert "PBT exploit (5)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert "5 PBT exploits" in curves.caption


@needs_chromium
def test_the_page_shows_the_lineage(pbt_exp: Path, tmp_path: Path) -> None:
    report(pbt_exp)
    page = browser.open_page(pbt_exp / "report.html", screenshot_path(tmp_path, "report-pbt"))
    assert page.errors() == [] and "plot-curves" in page.section_ids
    assert "5 PBT exploits: each dashed arrow" in page.text
    for trial in range(3, 8):
        assert f"{trial}\t3\t0\trate {RATES[trial]:g} -> " in page.text, page.text[-1500:]
