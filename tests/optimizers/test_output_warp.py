"""The output warp of the model-based optimizers (``optimizers._output_warp``): the losses a GP
is fitted on, or their Yeo-Johnson transform, whichever explains them better."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emews.optimizers._bayes import _engine
from emews.optimizers._bayes._space import SpaceMap
from emews.optimizers._output_warp import MIN_POINTS, power_warp
from emews.optimizers.bayes import BayesianOptimizer
from emews.optimizers.hyperspace import HyperSpace
from emews.core.space import Float, Space

LOSSES = st.lists(st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False), min_size=0, max_size=60)
PLANE = Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})


@settings(max_examples=300, deadline=None)
@given(y=LOSSES)
def test_the_warp_keeps_the_order_of_the_losses_and_is_finite(y):
    y = np.array(y, dtype=float)
    warp = power_warp(y)
    w = warp.values
    assert w.shape == y.shape and np.all(np.isfinite(w)) and np.isfinite(warp.log_jacobian)
    order = np.argsort(y, kind="stable")
    assert np.all(np.diff(w[order]) >= 0)          # never reorders two losses
    if len(y):
        assert w[np.argmin(y)] == w.min()           # the best point stays the best (ties allowed)


@pytest.mark.parametrize("y", [[], [3.0], [1.0, 2.0, 3.0, 4.0][:MIN_POINTS - 1], [2.5] * 10])
def test_too_few_or_equal_losses_are_fitted_as_they_are(y):
    warp = power_warp(np.array(y, dtype=float))
    assert not warp.applied and warp.log_jacobian == 0.0
    np.testing.assert_array_equal(warp.values, np.array(y, dtype=float))


def test_heavy_tailed_losses_no_longer_squash_the_good_ones_together():
    """Losses spread over twelve e-folds (a few runs far worse than the rest): raw, the better
    half shares a third of a percent of the range; warped, ten times as much, and the targets
    are standardized."""
    y = np.exp(np.linspace(0.0, 12.0, 30))
    w = power_warp(y).values
    half = len(y) // 2
    raw_share = (y[half] - y[0]) / np.ptp(y)
    warped_share = (w[half] - w[0]) / np.ptp(w)
    assert raw_share < 0.005 and warped_share > 10 * raw_share
    assert abs(w.mean()) < 1e-9 and abs(w.std() - 1.0) < 1e-6


def _engine_told(losses_of, output_warp, n=40):
    """An engine told ``n`` random points of the unit square with ``losses_of(points)``."""
    engine = _engine.Engine(SpaceMap(PLANE), seed=0, n_initial_points=2, n_candidates=100,
                            output_warp=output_warp)
    xs = np.random.RandomState(1).uniform(0, 1, (n, 2))
    losses = losses_of(xs)
    engine.tell([list(x) for x in xs], list(losses))
    engine.n_proposed = n                            # the initial design is done: the model proposes
    return engine, losses


def _fitted_targets(engine):
    """The targets the engine's GP is fitted on for its next proposal."""
    seen = {}
    fit = engine._fit

    def spy(name, X, y, lies=None):
        seen["y"] = np.array(y)
        return fit(name, X, y, lies)

    engine._fit = spy
    assert len(engine.propose(2)) == 2
    return seen["y"]


def _plane(xs):
    return xs @ np.array([3.0, 1.0])


def _exp_plane(xs):
    return np.exp(4.0 * _plane(xs))


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("losses_of, warped", [(_plane, False), (_exp_plane, True)])
def test_auto_takes_the_warp_only_when_it_explains_the_losses_better(losses_of, warped, scale):
    """A plane is a GP's natural target: the raw losses win. Its exponential (over twelve
    e-folds) is a plane again after a log-like transform: the warp wins. Whatever the units of
    the losses: both likelihoods are densities of the losses (the Jacobians counted)."""
    engine, losses = _engine_told(lambda xs: scale * losses_of(xs), "auto")
    targets = _fitted_targets(engine)
    assert engine.warp_choices == [warped]
    if warped:
        np.testing.assert_allclose(targets, power_warp(losses).values)
    else:
        np.testing.assert_array_equal(targets, losses)
    assert engine.hyperfits == 1                     # the choice's kernel serves the fit


@pytest.mark.parametrize("output_warp", [True, False])
def test_true_and_false_fix_the_targets(output_warp):
    engine, losses = _engine_told(_exp_plane, output_warp)
    targets = _fitted_targets(engine)
    expected = power_warp(losses).values if output_warp else losses
    np.testing.assert_allclose(targets, expected)
    assert engine.warp_choices == []


def test_the_option_is_checked_and_reaches_every_engine():
    assert BayesianOptimizer().options["output_warp"] == "auto"
    assert BayesianOptimizer(output_warp=False).options["output_warp"] is False
    with pytest.raises(ValueError, match="output_warp"):
        BayesianOptimizer(output_warp="sometimes")
    opt = HyperSpace(seed=0, output_warp=False)
    opt.start(PLANE, 4)
    assert opt.subspaces and all(s.engine.output_warp is False for s in opt.subspaces)
    with pytest.raises(ValueError, match="output_warp"):
        HyperSpace(output_warp=[1])
