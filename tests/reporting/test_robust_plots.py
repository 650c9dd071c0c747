"""Plots that survive real data (issue 25 point 1): y ranges of runs with a diverged evaluation.

The stores come from short real sweeps (under a real ``mpiexec``) whose objective returns
``x * x``: one point of 3.2e8 makes a loss of 1e17 beside losses near 1.
"""

from __future__ import annotations

from pathlib import Path

import browser
import numpy as np
import pytest
from test_report import needs_chromium, report, screenshot_path

from emews.reporting import data as report_data
from emews.reporting import render
from emews.reporting.parameters import Parallel
from emews.reporting.trajectory import Trajectory
from emews.reporting.yrange import robust
from testutil import EmewsCommand, write_workflow


def sweep(folder: Path, xs: list[float]) -> Path:
    wf = write_workflow(
        folder,
        optimizer={"name": "sweep"},
        space={"x": {"type": "ordered", "values": xs}, "mode": {"type": "constant", "value": "ok"}},
        budget={"evaluations": len(xs)},
    )
    proc = EmewsCommand(folder)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "exp"


@pytest.fixture(scope="module")
def outlier_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Losses near 1 and one of about 1e17 (all positive: a log axis)."""
    return sweep(tmp_path_factory.mktemp("outlier"), [0.5, 0.8, 1.0, 1.2, 1.5, 2.0, 3.2e8])


@pytest.fixture(scope="module")
def clipped_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Losses near 1..4 and one of 1e4 beside a zero (not all positive: a clipped linear axis)."""
    return sweep(tmp_path_factory.mktemp("clipped"), [0.0, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 2.0, 100.0])


def test_all_positive_values_over_three_decades_are_a_log_axis() -> None:
    assert robust([1.0, 2.0, 1e17]).scale == "log"
    assert robust([1.0, 2.0, 900.0]).scale == "linear"
    assert robust([1.0, 2.0, np.nan, np.inf]).clipped == 0


def test_an_outlier_among_values_with_a_zero_is_clipped_and_counted() -> None:
    rng = robust([0.0] + [1.0 + i / 10 for i in range(20)] + [1e17])
    assert rng.scale == "linear" and rng.above == 1 and rng.below == 0
    assert rng.upper is not None and rng.upper < 10
    assert "1 point outside it (1 above, 0 below)" in rng.note()


def test_nothing_is_clipped_on_clean_data() -> None:
    rng = robust([1.0 + i / 10 for i in range(20)])
    assert rng.clipped == 0 and rng.lower is None and rng.note() == ""


def test_a_1e17_outlier_puts_the_trajectory_on_a_log_axis(outlier_exp: Path) -> None:
    plot = Trajectory().make(report_data.load(outlier_exp))
    assert plot is not None
    assert [ax.get_yscale() for ax in plot.figure.axes] == ["log", "log"]
    low, high = plot.figure.axes[0].get_ylim()
    assert low < 0.25 and high > 1e17  # every value inside the axis, the small ones not flattened
    assert "logarithmic" in plot.caption


def test_a_clipped_trajectory_marks_the_points_off_its_axis(clipped_exp: Path) -> None:
    plot = Trajectory().make(report_data.load(clipped_exp))
    assert plot is not None
    ax = plot.figure.axes[0]
    assert ax.get_yscale() == "linear"
    assert ax.get_ylim()[1] < 1e4  # the 1e4 loss does not set the range
    labels = ax.get_legend_handles_labels()[1]
    assert "off the axis (1)" in labels
    assert "1 point outside it (1 above, 0 below)" in plot.caption


@needs_chromium
@pytest.mark.parametrize("name", ["outlier", "clipped"])
def test_the_page_says_how_the_y_axis_is_drawn(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    exp = request.getfixturevalue(f"{name}_exp")
    report(exp)
    page = browser.open_page(exp / "report.html", screenshot_path(tmp_path, f"report-{name}"))
    assert page.errors() == []
    assert "plot-trajectory" in page.section_ids
    images = {i["id"]: i for i in page.images}
    assert images["img-trajectory"]["complete"] and images["img-trajectory"]["width"] > 0
    want = (
        "The y axis is logarithmic: the values span 18 decades."
        if name == "outlier"
        else "1 point outside it (1 above, 0 below) are the triangles on its edges."
    )
    assert want in page.text
    assert "plot-failures" not in page.section_ids  # no failures: one line
    n = 7 if name == "outlier" else 11
    assert f"Failures: none ({n} evaluations, all successful)." in page.text


# ---------------------------------------------------------------- many parameters, slices, contour
@pytest.fixture(scope="module")
def wide_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 evaluations of 20 parameters (too few for importance), long parameter names."""
    folder = tmp_path_factory.mktemp("wide")
    space: dict = {"x": {"type": "float", "lower": -2.0, "upper": 2.0}, "mode": {"type": "constant", "value": "ok"}}
    space |= {f"a_rather_long_parameter_name_{i:02d}": {"type": "float", "lower": 0.0, "upper": 1.0} for i in range(19)}
    wf = write_workflow(folder, space=space, budget={"evaluations": 12})
    proc = EmewsCommand(folder)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "exp"


@pytest.fixture(scope="module")
def ranked_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 evaluations of two parameters, one of which (x) decides the objective."""
    folder = tmp_path_factory.mktemp("ranked")
    wf = write_workflow(
        folder,
        space={
            "x": {"type": "float", "lower": -2.0, "upper": 2.0},
            "noise": {"type": "categorical", "values": ["a", "b", "c"]},
            "mode": {"type": "constant", "value": "ok"},
        },
        budget={"evaluations": 40},
    )
    proc = EmewsCommand(folder)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "exp"


def overlaps(labels: list) -> bool:
    boxes = [t.get_window_extent() for t in labels if t.get_text()]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


def test_twenty_parameters(wide_exp: Path) -> None:
    data = report_data.load(wide_exp)
    made = {p.name: p for p in render.plots(data)[0]}
    parallel = made["parallel"]
    ax = parallel.figure.axes[0]
    parallel.figure.canvas.draw()
    names = [t.get_text() for t in ax.get_xticklabels()]
    assert len(names) == 9  # 8 parameters and the objective
    assert not overlaps(ax.get_xticklabels())
    assert "the 8 of 20 parameters shown" in parallel.caption
    importance = made["importance"]
    assert importance.caption.startswith("Importance is withheld: 12 successful evaluations for 20 parameters")
    assert len(made["slices"].figure.axes) == 6
    assert len(made["contour"].figure.axes) == 2  # the plot and its colour bar


def test_importance_shows_n_and_ranks_the_parameter_that_matters(ranked_exp: Path) -> None:
    data = report_data.load(ranked_exp)
    made = {p.name: p for p in render.plots(data)[0]}
    assert "n = 40" in made["importance"].figure.axes[0].get_title()
    assert "n = 40 successful evaluations" in made["importance"].caption
    slices = made["slices"].figure.axes
    assert [ax.get_xlabel() for ax in slices] == ["x", "noise"]
    assert [t.get_text() for t in slices[1].get_xticklabels()] == ["a", "b", "c"]
    contour = made["contour"].figure.axes[0]
    assert (contour.get_xlabel(), contour.get_ylabel()) == ("x", "noise")
    assert "ranked by importance (40 evaluations)" in made["contour"].caption


@needs_chromium
def test_the_page_of_twenty_parameters(wide_exp: Path, tmp_path: Path) -> None:
    report(wide_exp)
    page = browser.open_page(wide_exp / "report.html", screenshot_path(tmp_path, "report-wide"))
    assert page.errors() == []
    for section in ("plot-parallel", "plot-importance", "plot-slices", "plot-contour"):
        assert section in page.section_ids
    assert "Importance is withheld: 12 successful evaluations for 20 parameters" in page.text
    assert "the 8 of 20 parameters shown" in page.text
    assert all(i["complete"] and i["width"] > 0 for i in page.images)


# ---------------------------------------------------------------- a categorical holding null
def test_a_categorical_with_null_among_its_values_is_drawn(tmp_path: Path) -> None:
    """A categorical whose values include null (YAML ``~``) is a level of its own on the
    parallel coordinates (``emews report`` failed with "'float' object is not subscriptable")."""
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        space={
            "x": {"type": "ordered", "values": [0.5, 1.0, 1.5]},
            "c": {"type": "categorical", "values": ["a,b", None, "<b>x</b>"]},
            "mode": {"type": "constant", "value": "ok"},
        },
        budget={"evaluations": 9},
    )
    proc = EmewsCommand(tmp_path)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = report(tmp_path / "exp", "--format", "png")
    assert report_data.load(exp).params["c"].isna().sum() == 3
    assert (exp / "report-plots" / "parallel.png").is_file()


def test_a_categorical_of_one_value_and_null_is_an_axis(tmp_path: Path) -> None:
    """A categorical of ``[a, null]`` varies between two levels, but only its non-null values were
    counted: one, so the parallel coordinates (and the importance) left it out."""
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        space={
            "x": {"type": "ordered", "values": [0.5, 1.0, 1.5]},
            "c": {"type": "categorical", "values": ["a", None]},
            "mode": {"type": "constant", "value": "ok"},
        },
        budget={"evaluations": 6},
    )
    proc = EmewsCommand(tmp_path)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = report(tmp_path / "exp", "--format", "png")
    plot = Parallel().make(report_data.load(exp))
    assert plot is not None
    assert [t.get_text() for t in plot.figure.axes[0].get_xticklabels()] == ["x", "c", "value"]
    labels = {text.get_text() for text in plot.figure.axes[0].texts}
    assert {"a", "None"} <= labels, labels


# ---------------------------------------------------------------- values near the double's limit
def test_a_loss_near_the_largest_double_is_clipped_not_a_log_axis(tmp_path: Path) -> None:
    """Losses near 1 and one of 1e280 (a diverged run): the log axis this span called for made
    matplotlib's log ticks overflow, and ``emews report`` failed with an OverflowError traceback
    (1e308: an axis of 1 to 10 that showed none of the values)."""
    exp = report(sweep(tmp_path, [0.5, 0.8, 1.0, 1.2, 1.5, 1e140]))  # x * x: 1e280
    rng = robust(report_data.load(exp).ok["objective"].to_numpy(float))
    assert (rng.scale, rng.above, rng.below) == ("linear", 1, 0)


def test_losses_near_the_largest_double_draw_every_plot_without_a_warning(tmp_path: Path) -> None:
    """Losses of 1e308 beside ordinary ones (and a run where most are): matplotlib printed
    RuntimeWarnings (overflow in the colour bars, the contour's triangles) and ``emews report``
    failed with "ValueError: arange: cannot compute length" (the linear axis spanned up to 1.7e308);
    values beyond DRAW_MAX are clipped, on the edge and counted, and the report is silent."""
    (tmp_path / "huge.py").write_text(
        "def run(p):\n    return [1.0e308, 1.5e308, 1.7e308, 1.0, 2.0, -1.0e308][p['i']] + p['y']\n"
    )
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": "huge.py"},
        space={"i": {"type": "ordered", "values": [0, 1, 2, 3, 4, 5]}, "y": {"type": "ordered", "values": [0.0, 0.5]}},
        budget={"evaluations": 12},
        task={"timeout": 30, "isolation": "inline"},
    )
    emews = EmewsCommand(tmp_path)
    emews("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300, check=True)
    emews.env["PYTHONWARNINGS"] = "error::RuntimeWarning"  # an overflow a traceback
    proc = emews("report", str(tmp_path / "exp"), timeout=300)
    assert proc.returncode == 0 and "Warning" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert {"trajectory", "parallel", "slices", "contour"} <= {
        p.stem for p in (tmp_path / "exp" / "report-plots").iterdir()
    }
    rng = robust(report_data.load(tmp_path / "exp").ok["objective"].to_numpy(float))
    assert rng.upper is not None and rng.upper < 1e301 and rng.above + rng.below == 8
