"""Surrogate fits keep scikit-learn's GP convergence warnings off the output, with threads about
(``optimizers._quiet``), and leave every other warning alone."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF

from emews.optimizers._bayes._engine import Engine
from emews.optimizers._bayes._space import SpaceMap
from emews.optimizers._ga.screen import SurrogateScreen
from emews.optimizers import _quiet
from emews.optimizers._quiet import quiet_model_fits
from emews.core.space import Float, Space

PLANE = Space({"x": Float(0.0, 1.0), "y": Float(0.0, 1.0)})


def _fit_at_a_bound() -> None:
    """A GP whose length scale ends at its upper bound (a constant function): sklearn warns."""
    X = np.linspace(0, 1, 8)[:, None]
    GaussianProcessRegressor(RBF(1.0, (1e-2, 1.0))).fit(X, np.ones(8) + 1e-3 * X.ravel())


def _caught(action) -> list[warnings.WarningMessage]:
    """The warnings ``action`` shows with the default filters (plus what it installs)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        action()
    return caught


def test_a_fit_at_a_bound_warns_unless_quieted_and_other_warnings_stay():
    assert any(issubclass(w.category, ConvergenceWarning) for w in _caught(_fit_at_a_bound))

    def quieted():
        quiet_model_fits()
        quiet_model_fits()                      # idempotent: one filter each
        _fit_at_a_bound()
        warnings.warn("a user's model did not converge", ConvergenceWarning)
    caught = _caught(quieted)  # other kinds too (a connection another test left open, collected now)
    assert [str(w.message) for w in caught if w.category is ConvergenceWarning] == ["a user's model did not converge"]


def test_the_optimizers_quiet_their_fits_themselves():
    for make in (lambda: SurrogateScreen(10, PLANE), lambda: Engine(SpaceMap(PLANE), seed=0)):
        def built_then_fit(make=make):
            make()
            _fit_at_a_bound()
        assert not any(issubclass(w.category, ConvergenceWarning) for w in _caught(built_then_fit))


def test_a_worker_threads_catch_warnings_does_not_undo_the_filter():
    """An objective in a worker thread enters ``catch_warnings`` (saving the filter list), the
    optimizer starts and adds its filters, the objective's block ends (restoring the saved list):
    the filters hold, because importing the module added them before any worker started."""
    def interleaved():
        importlib.reload(_quiet)                   # the optimizers' import, before the workers
        block = warnings.catch_warnings()
        block.__enter__()                          # a worker's objective enters its block
        Engine(SpaceMap(PLANE), seed=0)            # the optimizer starts meanwhile
        block.__exit__(None, None, None)           # the worker's block ends
        _fit_at_a_bound()
    assert not any(issubclass(w.category, ConvergenceWarning) for w in _caught(interleaved))
