"""The mbo optimizer (R: mlrMBO, or its mlr + randomForest fallback) end to end under real R.

Needs R, rpy2 and the R packages from tools/install-r.sh; fails (never skips) without them.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from emews.optimizers.mbo import FALLBACK, MLRMBO, MBO
from emews.optimizers.random import RandomSearch
from emews.job.wiring import RunSpec, run_in_threads
from emews.objective.function import ObjectiveRef
from emews.core.space import Categorical, Constant, Float, Space
from emews.testing import OptimizerConformance
from testutil import run_inline

ROOT = Path(__file__).resolve().parents[2]
ACKLEY = ObjectiveRef(str(ROOT / "objectives" / "ackley.py"))


@pytest.fixture(scope="module", autouse=True)
def r_available():
    from emews.contrib import rbridge
    try:
        rbridge.helpers()
    except rbridge.RUnavailable as exc:
        pytest.fail(f"mbo needs R and rpy2: {exc}", pytrace=False)
    import rpy2.rinterface as ri
    missing = [p for p in ("mlr", "ParamHelpers", "lhs", "randomForest")
               if not ri.evalr(f'requireNamespace("{p}", quietly = TRUE)')[0]]
    if missing:
        pytest.fail(f"mbo needs the R packages {', '.join(missing)}: run tools/install-r.sh", pytrace=False)


def expected_implementation() -> str:
    import rpy2.rinterface as ri
    return MLRMBO if ri.evalr('requireNamespace("mlrMBO", quietly = TRUE)')[0] else FALLBACK


def ackley_space() -> Space:
    return Space({"x1": Float(-32.768, 32.768), "x2": Float(-32.768, 32.768),
                  "act": Categorical(("relu", "tanh")), "tag": Constant("t")})


def write_objective(tmp_path: Path, name: str, body: str) -> ObjectiveRef:
    path = tmp_path / f"{name}.py"
    path.write_text("import math\n\ndef run(params):\n" + "".join(f"    {line}\n" for line in body.splitlines()))
    return ObjectiveRef(str(path))


BRANIN = """x1, x2 = params["x1"], params["x2"]
b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10"""


def run(make, space, objective, *, budget, workers, seed=0):
    return run_inline(make, space=space, objective=objective, budget=budget, workers=workers, seed=seed)


# ------------------------------------------------------------------------------------------ options

def test_options_are_validated():
    """Names, defaults and allowed values: emews_mbo's declaration in mbo.R, checked by check()."""
    space = Space({"x": Float(0.0, 1.0)})
    with pytest.raises(ValueError, match="unknown option 'n_init'"):  # the names emews_mbo declares
        MBO(n_init=3).check(space)
    for options, said in (({"infill": "pi"}, "infill: invalid value 'pi'"),
                          ({"lambda": -1}, "lambda: must be at least 0"),
                          ({"n_initial": 0}, "n_initial: must be at least 1")):
        with pytest.raises(ValueError, match=said):
            MBO(**options).check(space)
    opt = MBO(seed=3, n_initial=5, infill="ei", lambda_=2)
    assert opt.options == {"seed": 3, "n_initial": 5, "infill": "ei", "lambda": 2}  # R adds the defaults
    assert opt.implementation is None


def test_workflow_file_loads():
    from emews.config.workflow import check_workflow, load_workflow
    wf = load_workflow(str(ROOT / "workflows" / "mbo.yaml"))
    check_workflow(wf)
    opt = wf.make_optimizer()
    assert isinstance(opt, MBO) and opt.options["seed"] == 1 and opt.options["n_initial"] == 8
    assert set(wf.space.names) == {"x1", "x2", "act"}


# ------------------------------------------------------------------------------------------ end to end

def test_end_to_end_budget_space_and_report(tmp_path, monkeypatch, caplog):
    space = ackley_space()
    seen = []

    class Recording(MBO):
        def run(self, evaluator):
            put = evaluator.put

            def recording_put(points):
                points = list(points)
                assert len(points) <= evaluator.remaining, "put beyond the remaining budget"
                seen.extend(points)
                return put(points)
            evaluator.put = recording_put
            evaluator.exp_dir = tmp_path / "exp"   # the experiment directory the runtime would pass
            super().run(evaluator)

    with caplog.at_level("INFO", logger="emews.optimizers.mbo"):
        summary, opt = run(lambda: Recording(seed=2, n_initial=6, candidates=500), space, ACKLEY,
                           budget=20, workers=3)
    assert summary.completed == 20 and len(seen) == 20
    assert all(space.contains(p) for p in seen)
    assert opt.implementation == expected_implementation()
    assert any(opt.implementation in r.getMessage() for r in caplog.records)
    assert opt.value["evaluations"] == 20 and opt.value["failed"] == 0
    assert math.isclose(opt.value["best_loss"], summary.best.loss)
    report = json.loads((tmp_path / "exp" / "mbo.json").read_text())
    assert report["implementation"] == opt.implementation and report["finished"] is True
    assert report["options"]["seed"] == 2 and report["summary"]["evaluations"] == 20


def test_deterministic_under_seed_with_one_worker():
    space = ackley_space()

    def points(seed):
        summary, opt = run(lambda: MBO(seed=seed, n_initial=4, candidates=300), space, ACKLEY,
                           budget=9, workers=1)
        return opt.value["best"], opt.value["best_loss"], summary.best.params

    first, second, other = points(11), points(11), points(12)
    assert first == second
    assert other[1] != first[1]


def test_failures_are_imputed_and_avoided(tmp_path):
    # half the space fails; the run completes and the model steers proposals away from it
    flaky = write_objective(tmp_path, "half_fails",
                            'if params["x1"] > 0:\n    raise RuntimeError("fails for x1 > 0")\n'
                            'return (params["x1"] + 5) ** 2 + params["x2"] ** 2')
    space = Space({"x1": Float(-10.0, 10.0), "x2": Float(-10.0, 10.0)})
    summary, opt = run(lambda: MBO(seed=1, n_initial=8, candidates=500), space, flaky, budget=24, workers=2)
    assert summary.completed == 24
    assert summary.failed == opt.value["failed"] > 0
    assert summary.failed <= 12, f"{summary.failed} of 24 failed: the model did not avoid the failing half"
    assert summary.best.loss < 10


def test_all_failures_still_use_the_budget(tmp_path):
    always = write_objective(tmp_path, "always_fails", 'raise ValueError("nope")')
    summary, opt = run(lambda: MBO(seed=1, n_initial=3), Space({"x": Float(0.0, 1.0)}), always,
                       budget=7, workers=2)
    assert summary.completed == 7 and summary.failed == 7
    assert opt.value["failed"] == 7 and opt.value["best"] is None


def test_variants_and_edge_spaces(tmp_path):
    from emews.core.space import Int, Ordered
    space = Space({"k": Int(1, 6), "lr": Float(1e-4, 1.0, log=True), "b": Ordered((8, 16, 32)),
                   "flag": Categorical((True, False))})
    quad = write_objective(tmp_path, "quad", 'return (params["k"] - 4) ** 2 + abs(math.log10(params["lr"]) + 2)'
                                              ' + params["b"] / 32 + params["flag"]')
    for options in ({"infill": "ei"}, {"transform": "rank", "lambda": 3.0}, {"transform": "none"}):
        summary, opt = run(lambda: MBO(seed=4, n_initial=5, candidates=200, **options), space, quad,
                           budget=12, workers=2)
        assert summary.completed == 12 and opt.value["evaluations"] == 12, options
    # a space of constants only: its single point is evaluated once
    summary, opt = run(lambda: MBO(seed=1), Space({"c": Constant(3)}), ACKLEY, budget=5, workers=2)
    assert summary.completed == 1 and opt.value["evaluations"] == 1


def test_choices_holding_null_are_searched(tmp_path):
    """``max_depth: [null, 5, 10]`` (scikit-learn's "no limit"): R gets NA among the values, the
    forest a level for it, and the points that come back hold None, not an R error at the start."""
    from emews.core.space import Ordered
    space = Space({"depth": Categorical((None, 5, 10)), "width": Ordered((None, 8, 16)),
                   "flag": Categorical((True, None)), "x": Float(0.0, 1.0)})
    record = tmp_path / "seen.jsonl"
    seen = write_objective(tmp_path, "seen", f"open({str(record)!r}, 'a').write(repr(params) + chr(10))\n"
                                             'return params["x"] + (params["depth"] is None) + (params["width"] is None)')
    summary, opt = run(lambda: MBO(seed=2, n_initial=4, candidates=100), space, seen, budget=12, workers=2)
    assert summary.completed == 12 and summary.failed == 0 and opt.value["evaluations"] == 12
    points = [eval(line) for line in record.read_text().splitlines()]
    assert len(points) == 12 and all(space.contains(p) for p in points)
    assert {p["depth"] for p in points} >= {None} and {p["width"] for p in points} >= {None}


def test_integers_beyond_32_bits_are_searched(tmp_path):
    """``seed: {type: int, lower: 0, upper: 4294967295}``: R's integers hold 31 bits, and the run ended with
    'point 3 has NA for parameter 's'' (NA from as.integer) at its first model proposal."""
    from emews.core.space import Int
    space = Space({"s": Int(0, 2**32 - 1), "t": Int(-(2**63), 2**63 - 1), "x": Float(0.0, 1.0)})
    record = tmp_path / "seen.jsonl"
    seen = write_objective(tmp_path, "seen", f"open({str(record)!r}, 'a').write(repr(params) + chr(10))\n"
                                             'return params["x"] + params["s"] / 2 ** 32')
    summary, opt = run(lambda: MBO(seed=2, n_initial=4, candidates=100), space, seen, budget=10, workers=2)
    assert summary.completed == 10 and summary.failed == 0
    points = [eval(line) for line in record.read_text().splitlines()]
    assert len(points) == 10 and all(space.contains(p) for p in points)
    assert all(type(p["s"]) is int and type(p["t"]) is int for p in points)


def test_asking_for_mlrmbo_where_it_is_missing(tmp_path):
    if expected_implementation() == MLRMBO:
        summary, opt = run(lambda: MBO(seed=1, implementation="mlrMBO"), ackley_space(), ACKLEY,
                           budget=10, workers=2)
        assert opt.implementation == MLRMBO and summary.completed == 10
        return
    from emews.contrib.rbridge import RError
    box = {}
    spec = RunSpec(space=ackley_space(), make_optimizer=lambda: box.setdefault("o", MBO(implementation="mlrMBO")),
                   objective=ACKLEY, budget=5, isolation="inline", show_progress=False)
    summary = run_in_threads(spec, workers=1)
    assert isinstance(summary.error.error, RError)
    assert "mlrMBO is not installed" in summary.error.error.r_message
    # and the fallback can be asked for by name
    _, opt = run(lambda: MBO(seed=1, n_initial=3, implementation="fallback"), ackley_space(), ACKLEY,
                 budget=4, workers=1)
    assert opt.implementation == FALLBACK


def refit_after(n: int) -> int:
    """mbo.R's policy: refit after every result up to about 160 observations, then after n^2 / 25,000
    results (10 at 500, 40 at 1,000), at most 100."""
    return min(100, max(1, n * n // 25000))


def test_large_histories_refit_the_forest_less_often_and_never_repeat_a_point(tmp_path):
    # one worker: every proposal round follows exactly one result, so the fits are countable
    quad = write_objective(tmp_path, "quad2", 'return (params["x"] - 0.3) ** 2 + (params["y"] + 0.2) ** 2')
    space = Space({"x": Float(-1.0, 1.0), "y": Float(-1.0, 1.0)})
    points = []

    class Recording(MBO):
        def run(self, evaluator):
            put = evaluator.put
            evaluator.put = lambda batch: put(points.extend(batch) or batch)
            super().run(evaluator)

    n0, budget = 4, 320
    summary, opt = run(lambda: Recording(seed=3, n_initial=n0, candidates=300, ntree=10, implementation="fallback"),
                       space, quad,
                       budget=budget, workers=1)
    fits, seen = 0, None
    for n in range(n0, budget):  # observations when each proposal is made
        if seen is None or n - seen >= refit_after(n):
            fits, seen = fits + 1, n
    assert summary.completed == budget
    assert opt.value["refits"] == fits < budget - n0  # fewer fits than proposals once the history is large
    assert len({(p["x"], p["y"]) for p in points}) == budget  # proposals from a kept fit never repeat a point
    assert summary.best.loss < 0.01


def test_beats_random_search_on_branin(tmp_path):
    branin = write_objective(tmp_path, "branin", BRANIN)
    space = Space({"x1": Float(-5.0, 10.0), "x2": Float(0.0, 15.0)})
    budget, seeds = 30, (1, 2, 3, 4, 5)
    mbo, rnd = [], []
    for seed in seeds:
        # one worker: the comparison is deterministic under the seeds
        s, _ = run(lambda: MBO(seed=seed, n_initial=8), space, branin,
                   budget=budget, workers=1, seed=seed)
        mbo.append(s.best.loss)
        s, _ = run(lambda: RandomSearch(seed=seed), space, branin, budget=budget, workers=1, seed=seed)
        rnd.append(s.best.loss)
    print(f"branin best after {budget}: mbo {mbo} random {rnd}")
    assert statistics.median(mbo) < statistics.median(rnd)
    assert statistics.median(mbo) < 1.0  # global minimum 0.398


# ------------------------------------------------------------------------------------------ conformance kit

class TestMBOConformance(OptimizerConformance):
    budget = 20
    workers = 3
    main_thread = True  # R must stay on the thread that runs the optimizer

    def make_optimizer(self, seed):
        return MBO(seed=seed, n_initial=6, candidates=300)
