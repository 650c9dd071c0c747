"""Sweeps (grid and points file), optimizer references, and workflow lookup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testutil import FAULTY, write_workflow
from emews.cli import main
from emews.optimizers.sweep import Sweep
from emews.job.wiring import RunSpec, run_in_threads
from emews.objective.function import ObjectiveRef
from emews.store.results_store import ResultsStore
from emews.core.space import Categorical, Constant, Float, Space

SPACE = Space({"x": Float(-2.0, 2.0), "mode": Categorical(("ok", "dict")), "tag": Constant("t")})


def run_sweep(sweep: Sweep, budget: int, exp: Path) -> list:
    spec = RunSpec(SPACE, lambda: sweep, ObjectiveRef(str(FAULTY)), budget=budget, isolation="inline",
                   exp_dir=exp, show_progress=False)
    summary = run_in_threads(spec, workers=3)
    assert summary.error is None, summary.error
    return list(ResultsStore(exp / "results.db"))


def test_grid_sweep_covers_the_grid_once(tmp_path: Path) -> None:
    results = run_sweep(Sweep(levels=3), budget=100, exp=tmp_path)
    points = sorted((r.params["x"], r.params["mode"]) for r in results)
    assert points == sorted((x, m) for x in (-2.0, 0.0, 2.0) for m in ("ok", "dict"))
    assert all(r.params["tag"] == "t" for r in results)


def test_a_grid_holds_the_bounds_and_the_decimals_between_them(tmp_path: Path) -> None:
    """A log grid over lr [1e-4, 1] swept 0.00010000000000000009 and 0.10000000000000006 (a lower bound
    that is not the one written, flags such as --lr 0.00010000000000000009), [1e-12, 1e12]
    999999999999.999, and [-1, 1] at 6 levels -0.19999999999999996."""
    space = Space({"lr": Float(1e-4, 1.0, log=True), "w": Float(1e-12, 1e12, log=True), "x": Float(-1.0, 1.0)})
    spec = RunSpec(space, lambda: Sweep(levels=5), ObjectiveRef(str(FAULTY)), budget=5, isolation="inline",
                   exp_dir=tmp_path, show_progress=False)
    assert run_in_threads(spec, workers=1).error is None
    first = [r.params for r in ResultsStore(tmp_path / "results.db")]
    assert [p["x"] for p in first] == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert {p["lr"] for p in first} == {1e-4} and {p["w"] for p in first} == {1e-12}
    assert Float(1e-4, 1.0, log=True).grid(5) == [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    assert Float(1e-12, 1e12, log=True).grid(3) == [1e-12, 1.0, 1e12]
    assert Float(-1.0, 1.0).grid(6) == [-1.0, -0.6, -0.2, 0.2, 0.6, 1.0]
    assert Float(1.0, 1.0000000000000004).grid(3) == [1.0, 1.0000000000000002, 1.0000000000000004]  # kept apart


def test_a_float_with_one_value_is_swept_once_per_grid_point(tmp_path: Path) -> None:
    """``dropout: {lower: 0.1, upper: 0.1}`` (as real CANDLE files have) made the grid evaluate every point
    ``levels`` times: 25 evaluations for the 5 points of x, and a budget of 25 by default."""
    space = Space({"dropout": Float(0.1, 0.1), "x": Float(0.0, 1.0), "w": Float(1.0, 1.0000000000000002)})
    assert Sweep.planned_evaluations({"levels": 5}, space) == 10
    spec = RunSpec(space, lambda: Sweep(levels=5), ObjectiveRef(str(FAULTY)), budget=100, isolation="inline",
                   exp_dir=tmp_path, show_progress=False)
    assert run_in_threads(spec, workers=2).error is None
    points = [tuple(r.params.values()) for r in ResultsStore(tmp_path / "results.db")]
    assert len(points) == 10 == len(set(points))


def test_points_file_is_evaluated_in_order_with_constants_filled(tmp_path: Path) -> None:
    points = [{"x": 0.5, "mode": "ok"}, {"x": -1.0, "mode": "dict"}, {"x": 2.0, "mode": "ok"}]
    path = tmp_path / "points.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in points) + "\n")
    results = run_sweep(Sweep(file=str(path)), budget=10, exp=tmp_path)
    assert [(r.params["x"], r.params["mode"], r.params["tag"]) for r in results] == \
        [(p["x"], p["mode"], "t") for p in points]


def test_a_bad_line_in_the_points_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "points.jsonl"
    path.write_text('{"x": 0.5, "mode": "ok"}\n{"x": 9.0, "mode": "ok"}\n')
    spec = RunSpec(SPACE, lambda: Sweep(file=str(path)), ObjectiveRef(str(FAULTY)), budget=10,
                   isolation="inline", show_progress=False)
    summary = run_in_threads(spec, workers=1)
    assert f"{path}:2" in str(summary.error.error) and "x" in str(summary.error.error)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_missing_points_file_is_a_config_error(in_tmp: Path, capsys: pytest.CaptureFixture) -> None:
    wf = write_workflow(in_tmp, optimizer={"name": "sweep", "options": {"file": "nope.jsonl"}})
    assert main(["check", str(wf)]) == 2
    err = capsys.readouterr().err
    assert "optimizer.options" in err and "nope.jsonl" in err


def test_optimizer_by_module_path(in_tmp: Path, capsys: pytest.CaptureFixture) -> None:
    wf = write_workflow(in_tmp, optimizer={"name": "emews.optimizers.random:RandomSearch", "options": {"seed": 2}})
    assert main(["check", str(wf)]) == 0, capsys.readouterr().err


def test_a_workflow_in_the_working_directory_shadows_the_built_in(in_tmp: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    assert main(["check", "random"]) == 0
    assert "budget 200" in capsys.readouterr().out
    (in_tmp / "workflows").mkdir()
    write_workflow(in_tmp / "workflows", name="random", budget={"evaluations": 7})
    assert main(["check", "random"]) == 0
    out = capsys.readouterr().out
    assert str(in_tmp / "workflows" / "random.yaml") in out and "budget 7" in out
