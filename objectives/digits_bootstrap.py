"""A UQ ensemble member: the digits MLP trained on one bootstrap sample of the training set.

Run with ``replicates: N`` (``workflows/ensemble.yaml``): replicate ``r`` draws bootstrap sample
``r`` (the same sample for every point, so points are compared on equal terms) and seeds the
network's initialisation with the task's own seed. The spread of the validation error over the
replicates of a point (``emews results EXP --by-point``: ``std``) is the ensemble's predictive
uncertainty; ``mean_max_proba`` is the member's average confidence on the validation set.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from emews.objectives import digits_mlp


def run(params: Mapping[str, Any], context: Any = None) -> dict[str, float]:
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.metrics import log_loss
    from sklearn.neural_network import MLPClassifier

    if digits_mlp._DATA is None:
        digits_mlp.setup()
    x_train, x_val, y_train, y_val = digits_mlp._DATA
    sample = np.random.default_rng(int(params.get("replicate", 0))).integers(0, len(x_train), len(x_train))
    model = MLPClassifier(hidden_layer_sizes=(int(params.get("units", 32)),),
                          learning_rate_init=float(params.get("lr", 1e-3)), max_iter=int(params.get("epochs", 20)),
                          random_state=None if context is None else context.seed % (2**32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(x_train[sample], y_train[sample])
    proba = model.predict_proba(x_val)
    accuracy = float((proba.argmax(axis=1) == y_val).mean())
    return {"value": 1.0 - accuracy, "accuracy": accuracy, "log_loss": float(log_loss(y_val, proba)),
            "mean_max_proba": float(proba.max(axis=1).mean()), "bootstrap": int(params.get("replicate", 0))}
