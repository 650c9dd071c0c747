"""HyperSpace: overlapping subspaces, one Bayesian optimizer each, proposals round robin."""

from __future__ import annotations

import csv
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emews.objective.function import ObjectiveRef
from emews.optimizers.hyperspace import HyperSpace, split_space
from emews.optimizers.random import RandomSearch
from emews.core.space import Categorical, Float, Int, Space
from emews.testing import OptimizerConformance, run_traced
from testutil import run_inline

HERE = __file__


class TestConformance(OptimizerConformance):
    budget = 20
    workers = 4
    seed = 1

    def make_optimizer(self, seed):
        return HyperSpace(seed=seed, n_candidates=200)


@settings(max_examples=50)
@given(overlap=st.floats(0.0, 0.9), m=st.integers(1, 3), seed=st.integers(0, 10**6))
def test_subspaces_cover_the_space_and_overlap_by_the_ratio(overlap, m, seed):
    space = Space({"a": Float(-5.0, 5.0), "b": Float(1e-4, 1.0, log=True), "c": Int(0, 100),
                   "k": Categorical(("x", "y"))})
    names = ["a", "b", "c"][:m]
    subs = split_space(space, names, overlap)
    assert len(subs) == 2 ** m
    rng = random.Random(seed)
    for _ in range(20):   # every point of the space is in some subspace
        point = space.sample(rng)
        assert any(sub.contains(point) for sub, _ in subs)
    for name in names:    # the two halves overlap by ``overlap`` of the range (in unit scale)
        dim = space[name]
        lows = {bounds[name] for _, bounds in subs}
        assert len(lows) == 2
        (lo1, hi1), (lo2, hi2) = sorted(lows)
        assert (lo1, hi2) == (dim.lower, dim.upper)
        shared = dim.to_unit(hi1) - dim.to_unit(lo2)
        assert shared == pytest.approx(overlap, abs=0.02 if name != "c" else 0.02 + 1 / 100)


def _sphere(params):
    return sum((float(v) - 1.0) ** 2 for k, v in params.items() if k.startswith("x"))


def sphere(params):
    return _sphere(params)


def _run(opt, budget, workers=4, seed=0, exp_dir=None):
    space = Space({f"x{i}": Float(-5.0, 5.0) for i in range(3)})
    return run_inline(lambda: opt, space=space, objective=ObjectiveRef(HERE, "sphere"), budget=budget,
                      workers=workers, seed=seed, exp_dir=exp_dir)[0]


def test_round_robin_and_shared_results(tmp_path):
    opt = HyperSpace(seed=0, n_candidates=200)
    proposals = []
    suggest = opt.suggest

    def recorded(n):
        k = opt._turn % len(opt.subspaces)
        points = suggest(n)
        proposals.append((k, len(points)))
        assert all(opt.subspaces[k].space.contains(p) for p in points)
        return points

    opt.suggest = recorded
    _run(opt, budget=24)
    assert len(opt.subspaces) == 4    # 4 workers: m = 2
    # every subspace proposed in turn: the i-th batch came from subspace i mod 4, all 24 points
    assert [k for k, _ in proposals] == [i % 4 for i in range(len(proposals))]
    assert sum(n for _, n in proposals) == 24
    # results in the overlaps were shared: the subspaces saw more results than were evaluated
    assert sum(sub.results for sub in opt.subspaces) > 24
    assert all(sub.results >= 24 // 4 for sub in opt.subspaces)


def test_best_per_subspace_reported(tmp_path):
    opt = HyperSpace(seed=0, n_candidates=200)
    _run(opt, budget=16, workers=2, exp_dir=tmp_path)
    report = json.loads((tmp_path / "hyperspace.json").read_text())
    assert len(report) == 2
    for entry, sub in zip(report, opt.subspaces):
        assert entry["results"] == sub.results
        assert sub.space.contains(entry["best_point"])
        assert entry["best_loss"] == pytest.approx(_sphere(entry["best_point"]))
    # the best of the run is the best of some subspace
    assert min(e["best_loss"] for e in report) == min(r.loss for sub in opt.subspaces for r in [sub.best])


def test_beats_random_on_a_sphere():
    """Median best over seeds: HyperSpace ahead of random search with the same budget."""
    space = Space({f"x{i}": Float(-5.0, 5.0) for i in range(3)})
    best = {}
    for name, make in (("hyperspace", lambda s: HyperSpace(seed=s, n_candidates=300)),
                       ("random", lambda s: RandomSearch(seed=s))):
        runs = [run_traced(make, seed=seed, budget=40, workers=4, space=space,
                           objective=ObjectiveRef(HERE, "sphere")) for seed in range(3)]
        best[name] = sorted(min(r.loss for r in t.results) for t in runs)[1]
    assert best["hyperspace"] < best["random"], best


def test_bad_split_names_the_option():
    opt = HyperSpace(split=["units"])
    with pytest.raises(ValueError, match="split: 'units'.*allowed: x"):
        opt.check(Space({"x": Float(0.0, 1.0), "units": Categorical(("a", "b"))}))


def test_launch_hyperspace_under_mpi_reports_its_subspaces(emews_cmd):
    """``emews launch hyperspace``: 4 worker ranks, 4 subspaces; the report in the experiment
    directory covers every result the run stored, and each subspace's best is one of them."""
    proc = emews_cmd("launch", "hyperspace", "--site", "local", "--workers", "4", "--exp-dir", "exp",
                     "--set", "budget.evaluations=24", "--set", "task.isolation=inline", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = emews_cmd.cwd / "exp"
    report = json.loads((exp / "hyperspace.json").read_text())
    assert len(report) == 4
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["completed"] == 24
    with open(exp / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24
    stored = {round(float(row["objective"]), 9) for row in rows if row["status"] == "ok"}

    def inside(row, bounds):
        return all(lo <= float(row[f"p:{name}"]) <= hi for name, (lo, hi) in bounds.items())

    # how many results each subspace saw depends on how workers freed up (batches), so the
    # report is checked against the stored points: each subspace counts exactly those in its bounds
    for entry in report:
        assert entry["results"] == sum(inside(row, entry["bounds"]) for row in rows) > 0
        assert round(entry["best_loss"], 9) in stored
    assert all(any(inside(row, entry["bounds"]) for entry in report) for row in rows)
    assert emews_cmd.leftovers_after_exit() == []
