"""``emews report`` on stores of short real runs: the HTML in a real headless Chromium, the PNGs,
the PDF, and the header's figures against the store, recomputed here from SQL."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import statistics
from pathlib import Path

import pytest
import yaml
from PIL import Image

import browser
from testutil import EmewsCommand

from emews.core.build import Build
from emews.reporting.render import PNG_MANIFEST

#: the plots every report of a run with successes and failures has (``curves`` needs reports)
PLOTS = ["trajectory", "load", "gantt", "parallel", "importance", "slices", "contour", "failures"]
WIDTH, HEIGHT = 1100, 480
#: where screenshots are kept besides pytest's tmp dir (CI may set it to collect them)
ARTIFACTS = os.environ.get("EMEWS_TEST_ARTIFACTS")

needs_chromium = pytest.mark.skipif(not browser.available(), reason="chromium and chromium-driver are not installed "
                                    "(bash tools/install-system-deps.sh)")


def report(exp: Path, *args: str) -> Path:
    proc = EmewsCommand(exp.parent)("report", str(exp), *args, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return exp


def screenshot_path(tmp_path: Path, name: str) -> Path:
    return tmp_path / f"{name}.png"


def keep(shot: Path) -> None:
    if ARTIFACTS:
        Path(ARTIFACTS).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(ARTIFACTS) / shot.name)


# ---------------------------------------------------------------- figures recomputed from the store
def rows(exp: Path) -> list[sqlite3.Row]:
    db = sqlite3.connect(exp / "results.db")
    db.row_factory = sqlite3.Row
    out = db.execute("SELECT r.*, COALESCE(t.attempt, 0) AS attempt FROM results r "
                     "LEFT JOIN tasks t ON t.id = r.id ORDER BY r.id").fetchall()
    db.close()
    return out


def expected_time_figures(exp: Path, workers: int) -> dict[str, float]:
    """Elapsed and utilization by the definitions in emews/reporting/timeline.py, computed naively."""
    ran = [(r["started"] if r["attempt"] else min(r["submitted"], r["started"]), r["started"], r["finished"])
           for r in rows(exp) if r["started"] is not None and r["finished"] is not None]
    gap = max(60.0, 10 * statistics.median(f - s for _, s, f in ran))
    runs: list[list[float]] = []
    for ready, _, finished in sorted(ran):
        if runs and ready - runs[-1][1] <= gap:
            runs[-1][1] = max(runs[-1][1], finished)
        else:
            runs.append([ready, finished])
    elapsed = sum(b - a for a, b in runs)
    busy = sum(f - s for _, s, f in ran)
    points = sorted({t for task in ran for t in task})
    dispatch = 0.0
    for a, b in zip(points, points[1:]):
        mid = (a + b) / 2
        if not any(lo <= mid <= hi for lo, hi in runs):
            continue
        running = sum(s <= mid < f for _, s, f in ran)
        waiting = sum(ready <= mid < s for ready, s, _ in ran)
        dispatch += min(max(workers - running, 0), waiting) * (b - a)
    capacity = workers * elapsed
    return {"elapsed": elapsed, "runs": len(runs), "busy": busy / capacity, "dispatch": dispatch / capacity,
            "optimizer": (capacity - busy - dispatch) / capacity}


def check_header(header: dict[str, str], exp: Path) -> None:
    info = json.loads((exp / "experiment.json").read_text())
    results = rows(exp)
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    done, _, shown = header["budget"].partition(" evaluations: ")
    assert done == f"{len(results)}/{len(results)}"  # every run here spends its budget
    assert dict((s, int(n)) for n, s in (part.split(" ") for part in shown.split(", "))) == counts
    best = min((r for r in results if r["status"] == "ok"), key=lambda r: (r["loss"], r["id"]))
    assert header["best"] == f"{best['objective']:.6g} (task {best['id']})"
    assert header["workers"] == str(info["workers"])
    assert header["site"] == "local"
    optimizer = yaml.safe_load((exp / "workflow.yaml").read_text())["optimizer"]
    assert header["optimizer"] == f"{optimizer['name']} {json.dumps(optimizer.get('options') or {}, sort_keys=True)}"
    assert header["emews version"].startswith(f"run: {Build.from_record(info['emews']).described};")
    want = expected_time_figures(exp, info["workers"])
    percent = [float(x) for x in re.findall(r"([\d.]+)%", header["utilization"])]
    assert percent == pytest.approx([100 * want["busy"], 100 * want["optimizer"], 100 * want["dispatch"]], abs=0.051)
    assert f"in {want['runs']} run" in header["elapsed"]
    shown_elapsed = header["elapsed"].split(" in ")[0]
    if shown_elapsed.endswith(" s") and "min" not in shown_elapsed:
        assert float(shown_elapsed[:-2]) == pytest.approx(want["elapsed"], abs=0.051)


def check_page(page: browser.PageCheck, plots: list[str]) -> None:
    assert page.errors() == []
    assert page.section_ids == ["header", *[f"plot-{p}" for p in plots], "top-k"]
    assert {i["id"]: (i["complete"], i["width"], i["height"]) for i in page.images} == \
        {f"img-{p}": (True, WIDTH, HEIGHT) for p in plots}
    assert page.screenshot.stat().st_size > 0
    with Image.open(page.screenshot) as shot:
        assert shot.size[1] > len(plots) * HEIGHT  # the whole page, every plot in it
    keep(page.screenshot)


# ---------------------------------------------------------------- tests
@needs_chromium
def test_report_of_a_run_with_every_failure_kind(faulty_exp: Path, tmp_path: Path) -> None:
    report(faulty_exp)
    page = browser.open_page(faulty_exp / "report.html", screenshot_path(tmp_path, "report-faulty"))
    check_page(page, PLOTS)
    check_header(page.header, faulty_exp)
    for cause in ("RuntimeError: bad parameters x=", "NaN", "SIGSEGV", "MemoryError", "SIGKILL",
                  "ran past the task timeout of 3 s"):
        assert cause in page.text, cause
    assert "Not shown (nothing to plot yet): curves." in page.text  # this store keeps no reports
    top = page.top_k
    best = sorted((r for r in rows(faulty_exp) if r["status"] == "ok"), key=lambda r: (r["loss"], r["id"]))
    assert [int(r["task"]) for r in top] == [r["id"] for r in best[:10]]
    assert "checkpoint" not in top[0]


def test_the_pngs_are_images_of_the_expected_size(faulty_exp: Path) -> None:
    report(faulty_exp, "--format", "png", "--out", str(faulty_exp / "pngs"))
    found = sorted(p.stem for p in (faulty_exp / "pngs").glob("*.png"))
    assert found == sorted(PLOTS)
    for name in PLOTS:
        with Image.open(faulty_exp / "pngs" / f"{name}.png") as image:
            assert image.format == "PNG" and image.size == (WIDTH, HEIGHT)
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is None or len(colours) > 20, name  # drawn, not blank


def test_png_out_into_a_folder_of_the_users_keeps_what_it_holds(faulty_exp: Path, tmp_path: Path) -> None:
    """``--format png --out FOLDER`` writes its PNGs into the folder and touches nothing else there:
    it replaced the whole folder, so ``--out experiments`` deleted every experiment in it."""
    folder = tmp_path / "experiments"
    exp = folder / "exp"
    shutil.copytree(faulty_exp, exp)
    (folder / "notes.txt").write_text("mine")
    (folder / "curves.png").write_bytes(b"mine")  # a plot this report does not draw, of the user's own
    report(exp, "--format", "png", "--out", str(folder))
    assert (folder / "notes.txt").read_text() == "mine" and (folder / "curves.png").read_bytes() == b"mine"
    assert sorted(p.name for p in exp.iterdir()) == sorted(p.name for p in faulty_exp.iterdir())
    assert sorted(p.stem for p in folder.glob("*.png")) == sorted([*PLOTS, "curves"])
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == [PNG_MANIFEST]  # no temp file left


def test_a_png_report_removes_the_plots_its_earlier_report_drew_and_this_one_does_not(faulty_exp: Path,
                                                                                        tmp_path: Path) -> None:
    """The plots an earlier report wrote into the folder (listed in its manifest) that this one does not
    draw go; a PNG of the same name that no report wrote stays (review: ``--out ~/paper/figs`` removed
    the user's own ``failures.png``)."""
    folder = tmp_path / "figs"
    folder.mkdir()
    (folder / "curves.png").write_bytes(b"an earlier report's")
    (folder / PNG_MANIFEST).write_text(json.dumps({"plots": ["curves", *PLOTS]}))
    report(faulty_exp, "--format", "png", "--out", str(folder))
    assert sorted(p.stem for p in folder.glob("*.png")) == sorted(PLOTS)
    assert json.loads((folder / PNG_MANIFEST).read_text()) == {"plots": sorted(PLOTS)}


def test_the_pdf_has_a_summary_page_and_one_page_per_plot(faulty_exp: Path) -> None:
    report(faulty_exp, "--format", "pdf")
    pdf = (faulty_exp / "report.pdf").read_bytes()
    assert pdf.startswith(b"%PDF")
    assert len(re.findall(rb"/Type /Page\b(?!s)", pdf)) == 1 + len(PLOTS)
    assert not [p.name for p in faulty_exp.iterdir() if p.name.startswith(".")]  # no temp file left


def test_the_format_is_named_by_the_out_files_suffix(faulty_exp: Path, tmp_path: Path) -> None:
    """``--out r.pdf`` without ``--format`` writes a PDF (it wrote an HTML page named r.pdf)."""
    proc = EmewsCommand(tmp_path)("report", str(faulty_exp), "--out", str(tmp_path / "r.pdf"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF") and not (tmp_path / "r-plots").exists()


@needs_chromium
def test_report_of_a_resumed_run(resumed_exp: Path, tmp_path: Path) -> None:
    report(resumed_exp, "--out", str(tmp_path / "resumed.html"))
    page = browser.open_page(tmp_path / "resumed.html", screenshot_path(tmp_path, "report-resumed"))
    assert (tmp_path / "resumed-plots").is_dir()
    check_page(page, [p for p in PLOTS if p != "failures"])  # every evaluation succeeded: one line
    assert f"Failures: none ({len(rows(resumed_exp))} evaluations, all successful)." in page.text
    check_header(page.header, resumed_exp)
    requeued = [r["id"] for r in rows(resumed_exp) if r["attempt"]]
    assert requeued and all(r["status"] == "ok" for r in rows(resumed_exp))


def add_training_tables(exp: Path) -> dict[int, str]:
    """What training-aware tasks add to a store, written through the store's own training API:
    per-step reports and durable checkpoints. Every other successful trial is stopped early by its
    scheduler after 2 of 5 steps (a ``stop`` decision)."""
    from emews.store.trial_store import TrialStore
    from emews.training.messages import CheckpointNote, Report

    db = sqlite3.connect(exp / "results.db", isolation_level=None)
    trials = TrialStore(db)
    ok = db.execute("SELECT id, objective FROM results WHERE status = 'ok' ORDER BY id").fetchall()
    paths = {}
    for n, (trial, objective) in enumerate(ok):
        steps = 5 if n % 2 == 0 else 2
        for s in range(1, steps + 1):
            path = f"checkpoints/{trial}/step-{s}.ckpt"
            value = objective + (steps - s)
            trials.add_report(Report(trial, 0, s, {"value": value, "acc": s / 5}, float(s),
                                     checkpoint=CheckpointNote(path, 1000)), metric=value, loss=value)
            trials.mark_durable([path])
            paths[trial] = path
        if steps < 5:
            trials.add_decision(trial, steps, "stop")
    db.close()
    return paths


@needs_chromium
def test_learning_curves_and_checkpoints_appear_when_the_store_has_them(faulty_exp: Path, tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    shutil.copytree(faulty_exp, exp)
    paths = add_training_tables(exp)
    report(exp)
    page = browser.open_page(exp / "report.html", screenshot_path(tmp_path, "report-curves"))
    check_page(page, PLOTS + ["curves"])
    assert page.top_k and all(row["checkpoint"] == paths[int(row["task"])] for row in page.top_k)


def test_learning_curve_outcomes(faulty_exp: Path, tmp_path: Path) -> None:
    from emews.reporting import curves, data

    exp = tmp_path / "exp"
    shutil.copytree(faulty_exp, exp)
    add_training_tables(exp)
    loaded = data.load(exp)
    frame = loaded.reports
    last = frame.groupby("trial")["step"].max()
    kinds = curves.outcomes(loaded, last)
    assert set(kinds[last == 5]) == {"completed"} and set(kinds[last == 2]) == {"stopped early"}
    assert curves.metric_name(loaded) == "value"


@pytest.mark.parametrize("args,key", [
    (["--out", "/nonexistent/folder/r.html"], "--out"),
    (["--out", "{exp}/runs"], "--out"),                                 # a folder where a file goes
    (["--format", "png", "--out", "{exp}/workflow.yaml"], "--out"),     # a file where a folder goes
    (["--top", "0"], "--top"),
    (["--format", "html", "--out", "{exp}/r.pdf"], "--out"),            # a suffix of another format
    (["--format", "pdf", "--out", "{exp}/r.html"], "--out"),
])
def test_bad_report_options_are_one_line_and_write_nothing(faulty_exp: Path, tmp_path: Path, args: list[str],
                                                           key: str) -> None:
    exp = tmp_path / "exp"
    shutil.copytree(faulty_exp, exp)
    before = sorted(p.name for p in exp.iterdir())
    proc = EmewsCommand(tmp_path)("report", str(exp), *[a.format(exp=exp) for a in args])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and key in proc.stderr
    assert sorted(p.name for p in exp.iterdir()) == before


def test_report_of_a_folder_that_is_no_experiment(tmp_path: Path) -> None:
    proc = EmewsCommand(tmp_path)("report", str(tmp_path))
    assert proc.returncode == 2 and "not an experiment directory" in proc.stderr and "Traceback" not in proc.stderr


def test_report_of_an_experiment_before_its_first_result(tmp_path: Path) -> None:
    from emews.config.experiment import create_experiment

    exp = create_experiment(tmp_path / "exp", name="early", site={"name": "local"}, info={"workers": 2},
                            workflow={"space": {"x": {"type": "float", "lower": 0, "upper": 1}},
                                      "budget": {"evaluations": 5}})
    report(exp)
    page = (exp / "report.html").read_text()
    assert "No successful evaluation yet." in page and "<img" not in page
    assert "Not shown (nothing to plot yet): trajectory, load, gantt, parallel, importance, slices, contour, failures, curves." in page
    assert list((exp / "report-plots").iterdir()) == []
