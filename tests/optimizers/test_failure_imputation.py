"""One failure policy for every built-in optimizer (``emews.optimizers._failures``): what the GA and
bayes tell their models about a failed evaluation, and the options that choose it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emews.optimizers._failures import FailureImputation
from emews.optimizers._ga.failure_policy import FailurePolicy
from emews.optimizers._ga.individual import Individual
from emews.optimizers.bayes import BayesianOptimizer
from emews.core.results import Result, Status
from emews.core.space import Float, Space

losses = st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.inf)), min_size=1, max_size=30)


def _result(i: int, x: float, loss: float) -> Result:
    ok = math.isfinite(loss)
    return Result(id=i, params={"x": x}, status=Status.OK if ok else Status.FAILED,
                  objective=loss if ok else None, loss=loss)


@given(history=losses)
def test_worst_is_the_worst_success_of_the_run(history):
    policy = FailureImputation("worst")
    policy.observe(history)
    ok = [v for v in history if math.isfinite(v)]
    assert policy.loss() == (max(ok) if ok else math.inf)


@given(history=losses, penalty=st.floats(-10, 10))
def test_imputed_training_set(history, penalty):
    X = np.arange(len(history), dtype=float)[:, None]
    y = np.asarray(history)
    for kind in ("worst", "skip", "penalty"):
        policy = FailureImputation(kind, penalty)
        policy.observe(history)
        Xi, yi = policy.impute(X, y)
        failed = ~np.isfinite(y)
        if kind == "skip":
            assert yi.tolist() == y[~failed].tolist() and len(Xi) == len(yi)
        else:
            assert len(Xi) == len(y)
            assert yi[~failed].tolist() == y[~failed].tolist()
            assert all(v == policy.loss() for v in yi[failed])


def test_mean_averages_the_cohort_else_worst():
    policy = FailureImputation("mean", penalty=99.0)
    assert policy.loss() == 99.0          # nothing succeeded yet: the penalty
    policy.observe([1.0, 5.0, math.inf])
    assert policy.loss([1.0, 3.0]) == 2.0
    assert policy.loss() == 5.0


@given(history=st.lists(st.one_of(st.floats(-100, 100), st.just(math.inf)), min_size=3, max_size=20))
def test_ga_and_bayes_impute_the_same_worst(history):
    """Both optimizers score a failure as the worst success of the run so far."""
    ga = FailurePolicy("worst")
    inds = [Individual({"x": 0.0}) for _ in history]
    results = [_result(i, i / len(history), v) for i, v in enumerate(history)]
    ga.assign(inds, results)
    bayes = BayesianOptimizer(seed=0, failure_penalty="worst")
    bayes.start(Space({"x": Float(0.0, 1.0)}), 1)
    bayes.ingest(results)
    _, y = bayes.engine._training_set()
    ok = [v for v in history if math.isfinite(v)]
    for ind, loss in zip(inds, history):
        if not math.isfinite(loss):
            assert ind.fitness.values[0] == (max(ok) if ok else math.inf)
    if ok:
        assert sorted(y.tolist()) == sorted(v if math.isfinite(v) else max(ok) for v in history)


def test_unknown_policy_named():
    with pytest.raises(ValueError, match="allowed: worst, mean, penalty, skip"):
        FailureImputation("median")
    with pytest.raises(ValueError, match="failure: unknown policy 'skip'"):
        FailurePolicy("skip")


@pytest.mark.parametrize("option, value, allowed", [
    ("n_initial_points", 0, "must be >= 1, not 0"),
    ("n_candidates", 5, "must be >= 10, not 5"),
    ("xi", -0.5, "must be >= 0, not -0.5"),
    ("failure_penalty", "mean", "worst"),
    ("failure_penalty", ".inf", "worst"),
    ("lookahead", -1, "must be >= 0, not -1"),
    ("max_gp_points", "100", "whole number"),
])
def test_bad_bayes_option_is_exit_2_naming_the_key(emews_cmd, option, value, allowed):
    workflow = emews_cmd.cwd / "wf.yaml"
    rendered = value if value == ".inf" else repr(value)
    workflow.write_text(
        "optimizer:\n  name: bayes\n  options: {" + f"{option}: {rendered}" + "}\n"
        "objective: {module: emews.testing, function: smooth_objective}\n"
        "space:\n  x: {type: float, lower: 0, upper: 1}\n"
        "budget: {evaluations: 5}\n")
    proc = emews_cmd("check", str(workflow), timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = proc.stdout + proc.stderr
    assert "Traceback" not in message
    assert f"optimizer.options.{option}" in message and "wf.yaml" in message
    assert allowed in message
