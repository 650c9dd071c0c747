"""scikit-learn's surrogate-fit warnings kept off the run's output, threads or not.

GP fits (bayes, hyperspace, the GA's screen) routinely end with a kernel hyperparameter at its
bound or an L-BFGS search cut short; scikit-learn says so with a ``ConvergenceWarning`` per fit,
and a valid model comes back all the same. ``warnings.catch_warnings`` cannot hide them reliably:
it swaps the process-wide filter list on entry and restores it on exit, so an objective in a
worker thread that enters it too (scikit-learn's own model selection does) puts back a list
without the "ignore" while a fit runs, and the fit's warnings reach stderr (98 lines in one
``bench/quality.py --suite hpo`` run). :func:`quiet_model_fits` instead adds filters for exactly
those warnings, raised in scikit-learn's and scikit-optimize's ``gaussian_process``, to the
process's list; every other warning, a user's scikit-learn models' included, is shown as
before. Importing this module adds them, before any worker thread starts, so that every list a
thread saves and restores holds them; the optimizers add them again when they start (after a
``warnings.resetwarnings()``).
"""

from __future__ import annotations

import warnings

from sklearn.exceptions import ConvergenceWarning

#: the modules whose warnings are silenced (the warnings' ``module``, a regular expression)
GP_MODULES = r"(sklearn|skopt\.learning)\.gaussian_process\."


def quiet_model_fits() -> None:
    """Silence the convergence and negative-variance warnings of scikit-learn's GPs in this
    process (idempotent: a filter added again replaces itself)."""
    warnings.filterwarnings("ignore", category=ConvergenceWarning, module=GP_MODULES)
    warnings.filterwarnings(
        "ignore", message="Predicted variances smaller than 0", category=UserWarning, module=GP_MODULES
    )


quiet_model_fits()
