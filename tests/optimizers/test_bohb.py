"""BOHB: proposals from density models of the reports at the highest budget with enough of them."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from emews.core.evaluator import Evaluator
from emews.core.queues import QueuePair
from emews.core.results import StoredReport
from emews.core.space import Categorical, Float, Ordered, Space
from emews.job.wiring import RunSpec, run_in_threads
from emews.objective.function import ObjectiveRef
from emews.optimizers._kde import Encoding
from emews.optimizers.bohb import BOHB
from emews.testing import OptimizerConformance
from emews.training.schedulers.asha import ASHA
from emews.training.schedulers.hyperband import Hyperband

HERE = __file__
REPO = Path(__file__).resolve().parents[2]
SPACE = Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})
OPTIMUM = (0.25, 0.7)


class TestConformance(OptimizerConformance):
    budget = 24
    workers = 3

    def make_optimizer(self, seed: int) -> BOHB:
        return BOHB(seed=seed)


def attached(space: Space, reports: list[StoredReport], **options: Any) -> BOHB:
    """A BOHB reading ``reports`` through a real Evaluator (metric ``loss``), started."""
    evaluator = Evaluator(QueuePair(), space, workers=2, budget=10_000, seed=0, metric="loss",
                          reports=lambda trial=None: [r for r in reports if trial in (None, r.trial)])
    optimizer = BOHB(**options)
    optimizer.attach(evaluator)
    optimizer.start(space, evaluator.workers)
    return optimizer


def curves(optimizer: BOHB, points: list[dict], losses: list[list[float]], reports: list[StoredReport]) -> None:
    """Trial ``i`` ran ``points[i]`` and reported ``losses[i][s - 1]`` at steps ``s = 1, 2, ...``."""
    first = len(optimizer.fidelities.params)
    optimizer.submitted(list(range(first, first + len(points))), points)
    for i, curve in enumerate(losses):
        for step, loss in enumerate(curve, 1):
            reports.append(StoredReport(len(reports), first + i, step, {"loss": loss, "acc": 0.5}, 0.0))


def distance(point: dict) -> float:
    return math.dist((point["x"], point["y"]), OPTIMUM)


def test_the_model_uses_the_highest_budget_with_enough_observations() -> None:
    """12 trials reach step 1, 7 step 3 (2 stopped there: their last reports count), 5 step 9: with
    two parameters a budget needs HpBandSter's 2 (d + 1) = 6, so step 3 is modelled; a sixth trial
    at step 9 makes it 9."""
    reports: list[StoredReport] = []
    bohb = attached(SPACE, reports, seed=1, random_fraction=0.0)
    assert bohb.enough == 6
    rng = random.Random(0)
    points = [SPACE.sample(rng) for _ in range(12)]
    lengths = [9] * 5 + [3] * 2 + [1] * 5
    curves(bohb, points, [[distance(p) + 1 / s for s in range(1, n + 1)] for p, n in zip(points, lengths, strict=True)], reports)
    bohb.suggest(1)
    assert bohb.stats["budget"] == 3.0
    assert sorted(bohb.fidelities.budgets().items())[:3] == [(1.0, 12), (2.0, 7), (3.0, 7)]
    curves(bohb, [SPACE.sample(rng)], [[1.0] * 9], reports)
    bohb.suggest(1)
    assert bohb.stats["budget"] == 9.0
    stricter = attached(SPACE, reports, seed=1, random_fraction=0.0, min_points=9)
    stricter.submitted(list(range(13)), [*points, SPACE.sample(rng)])
    stricter.suggest(1)
    assert stricter.stats["budget"] == 1.0  # 9 are needed: steps 2 to 9 have 8 at most


def test_the_defaults_are_hpbandster_s() -> None:
    """HpBandSter's BOHB: a budget is modelled once its good and its bad set hold d + 1 points each
    (2 (d + 1) observations), the bandwidth floor is 1e-3, and only the observations at the budget
    count (trials stopped below it stay out); a third of the proposals random, the top 15 % good,
    64 candidates 3 times as wide. Measured against the earlier defaults in docs/training.md."""
    bohb = attached(SPACE, [], seed=1)
    assert (bohb.enough, bohb.min_bandwidth, bohb.stopped_as_bad) == (6, 1e-3, False)
    assert (bohb.random_fraction, bohb.top_fraction, bohb.samples, bohb.bandwidth_factor) == (
        pytest.approx(1 / 3), 0.15, 64, 3.0)
    four = Space({"a": Float(0.0, 1.0), "b": Float(0.0, 1.0), "c": Ordered((1, 2, 3)), "d": Categorical(("x", "y"))})
    assert attached(four, [], seed=1).enough == 10


def test_the_model_follows_the_high_budget_where_the_rungs_disagree() -> None:
    """Low-rung losses favour x near 1, step-3 losses x near 0 (a slow starter wins): with enough
    trials at step 3, proposals go where step 3 says."""
    reports: list[StoredReport] = []
    bohb = attached(SPACE, reports, seed=2, random_fraction=0.0)
    rng = random.Random(1)
    points = [SPACE.sample(rng) for _ in range(30)]
    curves(bohb, points, [[1 - p["x"], 0.5, p["x"]] for p in points], reports)
    proposals = bohb.suggest(60)
    assert bohb.stats["budget"] == 3.0
    assert np.mean([p["x"] for p in proposals]) < 0.3


def test_proposals_concentrate_where_low_rung_losses_are_low() -> None:
    """40 trials stopped at rung 1 of a bowl around OPTIMUM (with noise): model proposals land
    far closer to it than random proposals do."""
    reports: list[StoredReport] = []
    bohb = attached(SPACE, reports, seed=3, random_fraction=0.0)
    rng = random.Random(2)
    points = [SPACE.sample(rng) for _ in range(40)]
    curves(bohb, points, [[distance(p) ** 2 + rng.gauss(0, 0.01)] for p in points], reports)
    model = [distance(p) for p in bohb.suggest(200)]
    at_random = [distance(SPACE.sample(rng)) for _ in range(200)]
    assert bohb.stats == {"random": 0, "model": 200, "budget": 1.0}
    assert np.mean(model) < 0.6 * np.mean(at_random)


def test_categorical_and_ordered_parameters_are_modelled() -> None:
    """A categorical value and an ordered one make the loss: proposals stay in the space, take the
    good categorical value, and score far better than random points on the same landscape."""
    space = Space({"x": Float(0.0, 1.0), "k": Categorical(("a", "b", "c")), "u": Ordered((16, 32, 64, 128))})

    def loss(p: dict) -> float:
        return 0.1 * abs(p["x"] - 0.5) + (0.0 if p["k"] == "b" else 1.0) + (0.0 if p["u"] == 32 else 0.5)

    reports: list[StoredReport] = []
    bohb = attached(space, reports, seed=4, random_fraction=0.0)
    rng = random.Random(3)
    points = [space.sample(rng) for _ in range(60)]
    curves(bohb, points, [[loss(p)] for p in points], reports)
    proposals = bohb.suggest(200)
    assert all(space.contains(p) for p in proposals)
    assert np.mean([p["k"] == "b" for p in proposals]) > 0.6
    assert np.mean([loss(p) for p in proposals]) < 0.6 * np.mean([loss(space.sample(rng)) for _ in range(200)])


def test_stopped_as_bad_puts_trials_stopped_below_the_budget_in_the_bad_set() -> None:
    """8 trials reach step 3 (the lower x, the better there), 6 were stopped at step 1 (small x,
    y above 0.8) and 2 still run at step 1. BOHB's default models step 3's 8 only and proposes
    some points in the stopped trials' region; with ``stopped_as_bad`` those 6 (not the running
    ones) join the bad set, and proposals keep off their region."""
    from emews.core.results import Result, Status

    rng = random.Random(11)
    promoted = [{"x": rng.uniform(0.0, 0.5), "y": rng.uniform(0.0, 1.0)} for _ in range(8)]
    stopped = [{"x": rng.uniform(0.0, 0.2), "y": rng.uniform(0.8, 1.0)} for _ in range(6)]
    running = [{"x": rng.uniform(0.0, 1.0), "y": rng.uniform(0.0, 1.0)} for _ in range(2)]
    models, shares = {}, {}
    for flag in (False, True):
        reports: list[StoredReport] = []
        bohb = attached(SPACE, reports, seed=12, random_fraction=0.0, stopped_as_bad=flag)
        curves(bohb, promoted + stopped + running,
               [[1.0, 0.9, p["x"]] for p in promoted] + [[0.5]] * 6 + [[0.7]] * 2, reports)
        bohb.ingest([Result(i, p, Status.OK, 0.5, 0.5) for i, p in enumerate(stopped, start=8)])
        models[flag] = bohb._model()
        assert bohb.stats["budget"] == 3.0
        shares[flag] = np.mean([p["y"] > 0.8 for p in bohb.suggest(300)])
    (good, bad), (good_too, bad_more) = models[False], models[True]
    np.testing.assert_array_equal(good.data, good_too.data)
    assert len(good.data) == 3 and len(bad.data) == 5  # the 8 at step 3: the best d + 1, the rest
    assert len(bad_more.data) == 11  # and the 6 stopped at step 1, not the 2 still running
    stopped_rows = {tuple(Encoding.of(SPACE).encode(p)) for p in stopped}
    assert stopped_rows <= {tuple(row) for row in bad_more.data}
    assert shares[True] < shares[False] / 2


@pytest.mark.parametrize("share", [0.0, 0.25, 1.0])
def test_a_share_of_proposals_is_random(share: float) -> None:
    reports: list[StoredReport] = []
    bohb = attached(SPACE, reports, seed=5, random_fraction=share)
    rng = random.Random(4)
    points = [SPACE.sample(rng) for _ in range(20)]
    curves(bohb, points, [[distance(p)] for p in points], reports)
    bohb.suggest(400)
    assert bohb.stats["random"] + bohb.stats["model"] == 400
    assert abs(bohb.stats["random"] / 400 - share) < 0.07


def test_random_until_a_budget_has_enough_and_bohb_s_default_share() -> None:
    reports: list[StoredReport] = []
    bohb = attached(SPACE, reports, seed=6)
    assert bohb.random_fraction == pytest.approx(1 / 3)
    curves(bohb, [SPACE.sample(random.Random(5)) for _ in range(3)], [[0.1, 0.2], [0.3], [0.2]], reports)
    bohb.suggest(50)
    assert bohb.stats == {"random": 50, "model": 0, "budget": None}


def test_results_without_reports_are_modelled_and_failures_are_bad() -> None:
    """A plain objective (no reports): the results are the budget above every step."""
    from emews.core.results import Result, Status

    bohb = attached(SPACE, [], seed=7, random_fraction=0.0)
    rng = random.Random(6)
    points = [SPACE.sample(rng) for _ in range(30)]
    bohb.submitted(list(range(30)), points)
    bohb.ingest([Result(i, p, Status.OK, distance(p), distance(p)) if i % 4 else
                 Result(i, p, Status.FAILED, None, math.inf) for i, p in enumerate(points)])
    proposals = bohb.suggest(100)
    assert bohb.stats["budget"] == math.inf
    assert np.mean([distance(p) for p in proposals]) < 0.6 * np.mean([distance(p) for p in points])


# ------------------------------------------------------------------ real runs: ASHA, resume

def trainer(params: dict, ctx: Any) -> dict:
    """A learning curve that ends near the distance to OPTIMUM, reported each step until stopped."""
    metrics = {}
    for step in range(1, 10):
        metrics = {"loss": distance(params) + 1.0 / step}
        if ctx.report(step=step, metrics=metrics).stop:
            break
    return metrics


class FirstModel(BOHB):
    """BOHB that keeps the model of its first proposal (the densities' data and the budget)."""

    first: tuple[float, np.ndarray, np.ndarray] | None = None

    def suggest(self, n: int) -> list[dict[str, Any]]:
        if FirstModel.first is None:
            model = self._model()
            FirstModel.first = (self.stats["budget"], *(kde.data for kde in model)) if model else (None, None, None)
        return super().suggest(n)


SCHEDULERS = {"asha": lambda: ASHA(max_t=9, grace_period=1, reduction_factor=3),
              "hyperband": lambda: Hyperband(max_t=9, grace_period=1, reduction_factor=3)}


def asha_run(exp: Path, optimizer: BOHB, budget: int, scheduler: str = "asha") -> None:
    spec = RunSpec(space=SPACE, make_optimizer=lambda: optimizer, objective=ObjectiveRef(HERE, "trainer", "loss"),
                   budget=budget, seed=1, isolation="inline", show_progress=False, exp_dir=exp,
                   make_trial_scheduler=SCHEDULERS[scheduler])
    summary = run_in_threads(spec, workers=2)
    assert summary.error is None, summary.error


@pytest.mark.parametrize("scheduler", ["asha", "hyperband"])
def test_with_asha_the_model_reads_the_rungs_and_a_resumed_run_rebuilds_it(tmp_path: Path, scheduler: str) -> None:
    """A real run under ASHA (or Hyperband) models a rung above the first; a resumed run's first
    proposal comes from the same model, rebuilt from the stored reports and results."""
    exp = tmp_path / "exp"
    exp.mkdir()
    first = BOHB(seed=1)
    asha_run(exp, first, budget=30, scheduler=scheduler)
    assert first.stats["model"] > 0 and first.stats["budget"] > 1.0  # the metric came from the evaluator
    model = first._model()
    assert model is not None
    budget = first.stats["budget"]
    FirstModel.first = None
    asha_run(exp, FirstModel(seed=1), budget=34, scheduler=scheduler)
    assert FirstModel.first is not None
    again, good, bad = FirstModel.first
    assert again == budget
    np.testing.assert_array_equal(good, model[0].data)
    np.testing.assert_array_equal(bad, model[1].data)


def test_emews_launch_trains_digits_under_asha_with_bohb(emews_cmd, tmp_path: Path) -> None:
    """The user's route: ``optimizer: bohb`` with ``trial_scheduler: asha`` on the torch MLP;
    ``bohb.json`` says the model proposed points (from which rungs depends on the timing: two
    asynchronous workers; the in-process ASHA run above checks a rung above the first)."""
    pytest.importorskip("torch")
    workflow = yaml.safe_load((REPO / "workflows" / "asha.yaml").read_text())
    workflow.update(optimizer={"name": "bohb", "options": {"seed": 1}}, budget={"evaluations": 14},
                    task={"isolation": "inline"}, trial_scheduler={"name": "asha", "options": {"max_t": 9}})
    workflow["objective"]["module"] = str(REPO / "objectives" / "digits_torch.py")
    workflow["space"]["epochs"]["value"] = 9
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(workflow))
    proc = emews_cmd("launch", "wf.yaml", "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "14/14 evaluations: 14 ok" in proc.stderr and "stopped early" in proc.stderr
    stats = json.loads((tmp_path / "exp" / "bohb.json").read_text())
    assert stats["random"] + stats["model"] == 14 and stats["model"] > 0
    assert sum(stats["budgets"].values()) == stats["model"]


def stopped_run(agreeing: bool, promoted_count: int = 12) -> BOHB:
    """``promoted_count`` trials reach step 3 (the lower x, the better there) and 8 were stopped at
    step 1 (x above 0.8): their step-1 losses rank as step 3 does (``agreeing``: x + 0.1) or the
    other way round (1.1 - x: a fast starter is a poor finisher)."""
    from emews.core.results import Result, Status

    rng = random.Random(21)
    promoted = [{"x": rng.uniform(0.0, 0.8), "y": rng.uniform(0.0, 1.0)} for _ in range(promoted_count)]
    stopped = [{"x": rng.uniform(0.8, 1.0), "y": rng.uniform(0.0, 1.0)} for _ in range(8)]
    first = (lambda p: p["x"] + 0.1) if agreeing else (lambda p: 1.1 - p["x"])
    reports: list[StoredReport] = []
    bohb = attached(SPACE, reports, seed=22, random_fraction=0.0, stopped_as_bad="auto")
    curves(bohb, promoted + stopped,
           [[first(p), 0.5, p["x"]] for p in promoted] + [[first(p)] for p in stopped], reports)
    bohb.ingest([Result(i, p, Status.OK, first(p), first(p)) for i, p in enumerate(stopped, start=promoted_count)])
    return bohb


def test_with_auto_stopped_trials_count_as_bad_only_where_the_rungs_agree() -> None:
    """``stopped_as_bad: auto``: trials stopped at step 1 join step 3's bad set when step-1 losses
    rank the promoted trials as step 3 does (Spearman >= 0.5 over them), and not when they rank
    them the other way (boosting's crossing curves)."""
    for agreeing, expected in ((True, 12 + 8), (False, 12)):
        bohb = stopped_run(agreeing)
        good, bad = bohb._model()
        assert bohb.stats["budget"] == 3.0
        assert len(good.data) + len(bad.data) == expected
        bohb.suggest(10)
        assert bohb.with_stopped == (10 if agreeing else 0)


def test_too_few_trials_at_both_steps_say_nothing_of_agreement() -> None:
    """With fewer than ``min_points`` promoted trials to compare the rungs on (3 of 6), stopped
    trials stay out of the bad set however the losses rank; with ``agreement: -1`` and enough
    trials, crossing curves count too."""
    few = stopped_run(True, promoted_count=3)
    few._model()  # reads the reports: step 1 is modelled (3 + 8 trials), step 3 has 3
    assert few.stats["budget"] == 1.0 and few.enough == 6
    assert few._stopped_bad(3.0) == []
    crossing = stopped_run(False)
    crossing.agreement = -1.0
    good, bad = crossing._model()
    assert len(good.data) + len(bad.data) == 12 + 8
