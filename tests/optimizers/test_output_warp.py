"""The output warp of the model-based optimizers (``optimizers._output_warp``): the losses a GP
is fitted on, Yeo-Johnson transformed, order kept."""

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
from emews.space import Float, Space

LOSSES = st.lists(st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False), min_size=0, max_size=60)


@settings(max_examples=300, deadline=None)
@given(y=LOSSES)
def test_the_warp_keeps_the_order_of_the_losses_and_is_finite(y):
    y = np.array(y, dtype=float)
    w = power_warp(y)
    assert w.shape == y.shape and np.all(np.isfinite(w))
    order = np.argsort(y, kind="stable")
    assert np.all(np.diff(w[order]) >= 0)          # never reorders two losses
    if len(y):
        assert w[np.argmin(y)] == w.min()           # the best point stays the best (ties allowed)


@pytest.mark.parametrize("y", [[], [3.0], [1.0, 2.0, 3.0, 4.0][:MIN_POINTS - 1], [2.5] * 10])
def test_too_few_or_equal_losses_are_fitted_as_they_are(y):
    np.testing.assert_array_equal(power_warp(np.array(y, dtype=float)), np.array(y, dtype=float))


def test_heavy_tailed_losses_no_longer_squash_the_good_ones_together():
    """Losses spread over twelve e-folds (a few runs far worse than the rest): raw, the better
    half shares a third of a percent of the range; warped, ten times as much, and the targets
    are standardized."""
    y = np.exp(np.linspace(0.0, 12.0, 30))
    w = power_warp(y)
    half = len(y) // 2
    raw_share = (y[half] - y[0]) / np.ptp(y)
    warped_share = (w[half] - w[0]) / np.ptp(w)
    assert raw_share < 0.005 and warped_share > 10 * raw_share
    assert abs(w.mean()) < 1e-9 and abs(w.std() - 1.0) < 1e-6


def _fitted_targets(output_warp: bool) -> tuple[np.ndarray, np.ndarray]:
    """The losses told and the targets the engine's GP was fitted on for its next proposal."""
    space = Space({"x": Float(-5.0, 5.0), "y": Float(-5.0, 5.0)})
    engine = _engine.Engine(SpaceMap(space), seed=0, n_initial_points=2, n_candidates=100,
                            output_warp=output_warp)
    rng = np.random.RandomState(1)
    xs = rng.uniform(-5, 5, (30, 2))
    losses = np.exp((xs ** 2).sum(1))              # heavy-tailed: e^0 .. e^50
    engine.tell([list(x) for x in xs], list(losses))
    engine.n_proposed = len(xs)                    # the initial design is done: the model proposes
    seen = {}
    fit = engine._fit

    def spy(name, X, y, lies=None):
        seen["y"] = np.array(y)
        return fit(name, X, y, lies)

    engine._fit = spy
    assert len(engine.propose(2)) == 2
    return losses, seen["y"]


def test_the_gp_is_fitted_on_warped_losses_by_default_and_on_raw_ones_when_off():
    losses, warped = _fitted_targets(output_warp=True)
    np.testing.assert_allclose(warped, power_warp(losses))
    assert np.argmin(warped) == np.argmin(losses)
    losses, raw = _fitted_targets(output_warp=False)
    np.testing.assert_array_equal(raw, losses)


def test_the_option_is_checked_and_reaches_every_engine():
    assert BayesianOptimizer().options["output_warp"] is True
    assert BayesianOptimizer(output_warp=False).options["output_warp"] is False
    with pytest.raises(ValueError, match="output_warp"):
        BayesianOptimizer(output_warp="sometimes")
    opt = HyperSpace(seed=0, output_warp=False)
    opt.start(Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)}), 4)
    assert opt.subspaces and all(s.engine.output_warp is False for s in opt.subspaces)
    with pytest.raises(ValueError, match="output_warp"):
        HyperSpace(output_warp=[1])
