"""bayes and hyperspace under ASHA: every trial stopped early reaches the model with its last report's loss."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from emews.core.space import Float, Space
from emews.objective.function import ObjectiveRef
from emews.optimizers.bayes import BayesianOptimizer
from emews.optimizers.hyperspace import HyperSpace
from emews.training.schedulers.asha import ASHA
from testutil import run_inline

HERE = __file__
SPACE = Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})


def curve(params: dict, ctx: Any) -> dict | None:
    """A falling learning curve that ends near the distance to (0.25, 0.7); reported each step until stopped."""
    metrics: dict = {}
    for step in range(1, 10):
        metrics = {"loss": math.dist((params["x"], params["y"]), (0.25, 0.7)) + 1.0 / step}
        if ctx.report(step=step, metrics=metrics).stop and step < 9:
            return {"stopped_at": step}  # an objective that returns no loss once stopped early
    return metrics


def returns_nothing(params: dict, ctx: Any) -> None:
    """Reports each step and returns nothing (a Ray Tune function trainable): its result is its last report."""
    for step in range(1, 10):
        if ctx.report(step=step, metrics={"loss": math.dist((params["x"], params["y"]), (0.25, 0.7)) + 1.0 / step}).stop:
            return


def returns_last_metrics(params: dict, ctx: Any) -> dict:
    """The examples' objectives: the last epoch's metrics, stopped or not."""
    metrics: dict = {}
    for step in range(1, 10):
        metrics = {"loss": math.dist((params["x"], params["y"]), (0.25, 0.7)) + 1.0 / step}
        if ctx.report(step=step, metrics=metrics).stop:
            break
    return metrics


def asha_run(tmp_path: Path, optimizer: Any, objective: str) -> dict[int, float]:
    """A real run under ASHA (max_t 9, rf 3, 2 workers, 18 trials); each stopped trial's last reported loss."""
    exp = tmp_path / "exp"
    exp.mkdir()
    run_inline(lambda: optimizer, space=SPACE, objective=ObjectiveRef(HERE, objective, "loss"), budget=18, workers=2,
               seed=1, exp_dir=exp, make_trial_scheduler=lambda: ASHA(max_t=9, grace_period=1, reduction_factor=3))
    db = sqlite3.connect(exp / "results.db")
    stopped = {trial for (trial,) in db.execute("SELECT trial FROM decisions WHERE action = 'stop'")}
    last = {trial: json.loads(metrics)["loss"]
            for trial, metrics in db.execute("SELECT trial, metrics FROM reports ORDER BY seq")}
    db.close()
    assert stopped, "ASHA stopped no trial: the test would show nothing"
    return {trial: last[trial] for trial in stopped}


@pytest.mark.parametrize("objective", ["curve", "returns_last_metrics", "returns_nothing"])
@pytest.mark.parametrize("make", [lambda: BayesianOptimizer(seed=1, n_initial_points=4),
                                  lambda: HyperSpace(seed=1, n_initial_points=2)], ids=["bayes", "hyperspace"])
def test_every_stopped_trial_reaches_the_model_with_its_last_loss(tmp_path: Path, make: Any, objective: str) -> None:
    optimizer = make()
    stopped = asha_run(tmp_path, optimizer, objective)
    told = optimizer.stopped.told
    assert len(told) == 18  # every result was told
    assert {t: told[t] for t in stopped} == pytest.approx(stopped)
    assert optimizer.stopped.from_reports == (len(stopped) if objective == "curve" else 0)


def test_only_trials_ended_by_their_scheduler_or_a_timeout_count_with_their_last_report() -> None:
    from emews.core.results import Result, Status, StoredReport
    from emews.optimizers._stopped import StoppedTrials

    reports = {0: [StoredReport(0, 0, 1, {"loss": 2.0}, 0.0), StoredReport(1, 0, 2, {"loss": float("nan")}, 0.0)],
               1: [StoredReport(2, 1, 1, {"loss": 3.0}, 0.0)],
               3: [StoredReport(3, 3, 1, {"loss": 1.5}, 0.0)],
               4: [StoredReport(4, 4, 1, {"loss": 1.25}, 0.0)],
               5: [StoredReport(5, 5, 1, {"loss": 1.75}, 0.0)]}
    ended = {0, 1, 2, 3}  # the scheduler answered stop or complete; trial 4 raised on its own

    class Reading:
        metric = "loss"
        direction = None

        def reports(self, trial: int | None = None) -> list[StoredReport]:
            return reports.get(trial, [])

        def ended_by_scheduler(self, trial: int) -> bool:
            return trial in ended

    stopped = StoppedTrials(Reading())
    results = [Result(i, {}, status, None, math.inf) for i, status in
               [(0, Status.FAILED), (1, Status.CRASHED), (2, Status.FAILED), (3, Status.FAILED),
                (4, Status.FAILED), (5, Status.TIMEOUT)]]
    # 0 diverged, 1 crashed, 2 never reported, 4 failed without its scheduler ending it: failures
    assert stopped.losses(results) == [math.inf, math.inf, math.inf, 1.5, math.inf, 1.75]
    assert stopped.from_reports == 2


def reports_then_raises(params: dict, ctx: Any) -> dict:
    """Reports two falling losses, then fails on its own (no trial scheduler in the run)."""
    for step in (1, 2):
        ctx.report(step=step, metrics={"loss": params["x"] + 1.0 / step})
    raise RuntimeError("the data loader broke")


def test_a_trial_that_fails_after_reporting_without_a_scheduler_stays_a_failure(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    exp.mkdir()
    optimizer = BayesianOptimizer(seed=1, n_initial_points=2)
    run_inline(lambda: optimizer, space=SPACE, objective=ObjectiveRef(HERE, "reports_then_raises", "loss"), budget=4,
               workers=2, seed=1, exp_dir=exp)
    db = sqlite3.connect(exp / "results.db")
    reported = {trial for (trial,) in db.execute("SELECT DISTINCT trial FROM reports")}
    db.close()
    assert len(reported) == 4  # every trial reported before it failed: the rule had reports to use
    assert optimizer.stopped.from_reports == 0
    assert all(not math.isfinite(loss) for loss in optimizer.stopped.told.values())
