"""A real training objective: an MLP classifier on scikit-learn's bundled digits data set.

Parameters (all optional, with defaults): ``lr`` (learning rate), ``units``
(hidden units), ``layers``, ``act`` (relu | tanh | logistic; ``sigmoid`` is
accepted for logistic), ``batch``, ``epochs``, ``alpha`` (L2 penalty).
Returns the validation error (1 - accuracy) as ``value`` plus the accuracy and
the training time, so ``metric: value, direction: minimize`` fits.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Mapping

_DATA: tuple[Any, Any, Any, Any] | None = None


def setup() -> None:
    """Load and split the data once per worker (the data ship with scikit-learn)."""
    global _DATA
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    x, y = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    scaler = StandardScaler().fit(x_train)
    _DATA = (scaler.transform(x_train), scaler.transform(x_val), y_train, y_val)


def run(params: Mapping[str, Any], context: Any = None) -> dict[str, float]:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    if _DATA is None:
        setup()
    assert _DATA is not None
    x_train, x_val, y_train, y_val = _DATA
    act = {"sigmoid": "logistic"}.get(str(params.get("act", "relu")), str(params.get("act", "relu")))
    units = int(params.get("units", 64))
    model = MLPClassifier(
        hidden_layer_sizes=(units,) * int(params.get("layers", 1)),
        activation=act,
        learning_rate_init=float(params.get("lr", 1e-3)),
        batch_size=int(params.get("batch", 32)),
        max_iter=int(params.get("epochs", 10)),
        alpha=float(params.get("alpha", 1e-4)),
        random_state=None if context is None else context.seed,
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(x_train, y_train)
    accuracy = float(model.score(x_val, y_val))
    return {"value": 1.0 - accuracy, "accuracy": accuracy, "train_seconds": time.perf_counter() - start}
