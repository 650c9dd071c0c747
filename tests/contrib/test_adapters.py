"""Other libraries' optimizers through ``emews.contrib`` (issue 12): each passes the conformance kit
(degenerate spaces included) and runs end to end under ``emews launch``."""

from __future__ import annotations

import json
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from emews.core.optimizer import Optimizer
from emews.testing import OptimizerConformance, degenerate_space
from testutil import stored_rows, write_workflow

# looked up, not imported: collecting this file (every pytest process does) need not import nevergrad
# (3.6 s of CPU over torch's); the tests import the adapters when they run
_MISSING = [name for name in ("nevergrad", "gest_api", "xopt") if find_spec(name) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"the test extra installs {', '.join(_MISSING)}")

HERE = Path(__file__).resolve().parent


def nevergrad(*args: Any, **kwargs: Any) -> Any:
    """An ``emews.contrib.nevergrad.NevergradOptimizer``."""
    from emews.contrib.nevergrad import NevergradOptimizer

    return NevergradOptimizer(*args, **kwargs)


def gest(*args: Any, **kwargs: Any) -> Any:
    """An ``emews.contrib.gest.GestGenerator``."""
    from emews.contrib.gest import GestGenerator

    return GestGenerator(*args, **kwargs)


class TestNevergradTwoPointsDE(OptimizerConformance):
    def make_optimizer(self, seed: int) -> Optimizer:
        return nevergrad("TwoPointsDE", seed=seed)


class TestNevergradCMA(OptimizerConformance):
    def make_optimizer(self, seed: int) -> Optimizer:
        return nevergrad("CMA", seed=seed)


class TestGestWithIds(OptimizerConformance):
    """A gest-api generator that returns ``_id`` (``tests/contrib/gest_random.py``), seeded through the
    adapter's ``seed`` (the global generator it draws from): a seed of its own, in its options, would
    draw the first run's points again in a resumed run (the kit's test_resumes says so)."""

    def make_optimizer(self, seed: int) -> Optimizer:
        return gest(f"{HERE / 'gest_random.py'}:SeededRandom", seed=seed)

    def test_ids_come_back_with_their_points(self) -> None:
        from emews.testing import FLAKY, run_traced

        made: list[Any] = []

        def factory(seed: int) -> Optimizer:
            made.append(self.make_optimizer(seed))
            return made[-1]

        trace = run_traced(factory, budget=12, objective=FLAKY)
        generator = made[0].generator
        assert generator.unknown_ids == [] and sorted(generator.ingested_ids) == list(range(12))
        assert len(trace.points) == 12 and made[0].ids == {}  # every id went back, failures included


class TestXoptRandomThroughGest(OptimizerConformance):
    """Xopt's own RandomGenerator (a gest-api Generator); Xopt takes numeric discrete values only."""

    def make_optimizer(self, seed: int) -> Optimizer:
        """Xopt's generators take no seed: the adapter's ``seed`` seeds the global generators they draw from
        (the same seed gave other points in every run)."""
        return gest("xopt.generators.random:RandomGenerator", categories="indices", seed=seed)


@pytest.mark.parametrize(
    "optimizer",
    [
        {"name": "emews.contrib.nevergrad:NevergradOptimizer", "options": {"optimizer": "TwoPointsDE", "seed": 1}},
        pytest.param(
            {
                "name": "emews.contrib.gest:GestGenerator",
                "options": {"generator": "xopt.generators.random:RandomGenerator", "categories": "indices"},
            }
        ),
        {
            "name": "emews.contrib.gest:GestGenerator",
            "options": {"generator": str(HERE / "gest_random.py") + ":SeededRandom", "options": {"seed": 3}},
        },
    ],
    ids=["nevergrad", "xopt", "gest-with-ids"],
)
def test_adapters_run_a_real_candle_space_under_emews_launch(emews_cmd, tmp_path: Path, optimizer: dict) -> None:
    """adrp's GA JSON (``epochs`` 200..200), which broke both adapters before."""
    adrp = Path(__file__).parents[1] / "data" / "supervisor" / "ga" / "adrp_param_space_ga.json"
    (tmp_path / "obj.py").write_text(
        "def run(p):\n    return p['dropout'] + len(p['dense']) / 100 + p['batch_size'] / 1000\n"
    )
    wf = write_workflow(
        tmp_path,
        optimizer=optimizer,
        objective={"module": "obj.py"},
        space={"file": str(adrp)},
        budget={"evaluations": 10},
        task={"timeout": 60, "isolation": "inline"},
    )
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == 10 and {r["status"] for r in rows} == {"ok"}
    for r in rows:
        p = json.loads(r["params"])
        assert p["epochs"] == 200 and type(p["epochs"]) is int and 0.05 <= p["dropout"] <= 0.2
        assert p["batch_size"] in (16, 32, 64)
    assert emews_cmd.leftovers_after_exit() == []


def test_nevergrad_learns_the_budget_and_skips_single_valued_parameters() -> None:
    from emews.testing import run_traced

    made = []

    def factory(seed: int) -> Optimizer:
        made.append(nevergrad("TwoPointsDE", seed=seed))
        return made[-1]

    trace = run_traced(factory, budget=7, space=degenerate_space())
    assert made[0].budget == 7 and made[0].opt.budget == 7
    assert list(made[0].searched) == ["x"]
    assert all(p["epochs"] == 200 and p["activation"] == "relu" for p in trace.points)
    assert len({p["x"] for p in trace.points}) > 1  # x is searched


@pytest.mark.parametrize("name", ["TwoPointsDE", "NGOpt", "RandomSearch"])
def test_nevergrad_searches_integers_of_64_bits(name: str) -> None:
    """``{type: int, lower: 0, upper: 9223372036854775807}``: Nevergrad's integer casting goes through a
    float, 2**63 overflowed to -9223372036854775808, and the run ended at once ('optimizer proposed an
    invalid point ... s: value -9223372036854775808 is outside Int(lower=0, ...)')."""
    from emews.core.space import Float, Int, Space
    from emews.testing import run_traced

    space = Space({"s": Int(0, 2**63 - 1), "t": Int(-(2**63), 2**63 - 1), "k": Int(1, 5), "x": Float(0.0, 1.0)})
    trace = run_traced(lambda seed: nevergrad(name, seed=seed), budget=12, space=space)
    assert trace.summary is not None and trace.summary.error is None, trace.summary
    assert len(trace.points) == 12 and all(space.contains(p) for p in trace.points)


class TestOptunaOnDegenerateSpaces(OptimizerConformance):
    """The Optuna adapter that was already there, on the same kit (degenerate spaces included)."""

    def make_optimizer(self, seed: int) -> Optimizer:
        from emews.contrib.optuna import OptunaSampler

        return OptunaSampler(seed=seed)


@pytest.mark.parametrize("name", ["TwoPointsDE", "NGOpt"])
def test_a_resumed_nevergrad_run_proposes_no_earlier_point_again(emews_cmd, tmp_path: Path, name: str) -> None:
    """A seeded TwoPointsDE resumed from 4 to 8 evaluations asked the first run's 4 points again, in
    order (it drew with the same seed); NGOpt's first ask, the centre, came again with any seed."""
    (tmp_path / "obj.py").write_text("def run(p):\n    return (p['x'] - 0.3) ** 2 + (p['y'] - 0.1) ** 2\n")
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "emews.contrib.nevergrad:NevergradOptimizer", "options": {"optimizer": name, "seed": 5}},
        objective={"module": "obj.py"},
        space={"x": {"type": "float", "lower": -1, "upper": 1}, "y": {"type": "float", "lower": -1, "upper": 1}},
        budget={"evaluations": 4},
        task={"isolation": "inline"},
    )
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    proc = emews_cmd("resume", "exp", "--set", "budget.evaluations=8", timeout=300)
    assert proc.returncode == 0, proc.stderr
    points = [r["params"] for r in stored_rows(tmp_path / "exp")]
    assert len(points) == 8 and len(set(points)) == 8, points


@pytest.mark.parametrize("initial_points", [0, 3])
def test_a_resumed_seeded_gest_run_proposes_no_earlier_point_again(
    emews_cmd, tmp_path: Path, initial_points: int
) -> None:
    """A seeded Xopt run resumed from 2 to 6 evaluations: the initial points were drawn with the
    first run's generator again (its first point came back), and Xopt's own draws were unseeded."""
    (tmp_path / "obj.py").write_text("def run(p):\n    return (p['x'] - 0.3) ** 2 + (p['y'] - 0.1) ** 2\n")
    wf = write_workflow(
        tmp_path,
        optimizer={
            "name": "emews.contrib.gest:GestGenerator",
            "options": {
                "generator": "xopt.generators.random:RandomGenerator",
                "initial_points": initial_points,
                "seed": 5,
            },
        },
        objective={"module": "obj.py"},
        space={"x": {"type": "float", "lower": -1, "upper": 1}, "y": {"type": "float", "lower": -1, "upper": 1}},
        budget={"evaluations": 2},
        task={"isolation": "inline"},
    )
    runs = []
    for exp in ("a", "b"):  # the same seed twice: the same points, resumed ones included
        proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", exp, timeout=300)
        assert proc.returncode == 0, proc.stderr
        proc = emews_cmd("resume", exp, "--set", "budget.evaluations=6", timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append([r["params"] for r in stored_rows(tmp_path / exp)])
    assert len(runs[0]) == 6 and len(set(runs[0])) == 6, runs[0]
    assert runs[0] == runs[1]
