"""The bounded training set of a surrogate model: the best observations plus the most recent."""

from __future__ import annotations

import numpy as np


def window(X: np.ndarray, y: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``size // 2`` observations plus the most recent ones, ``size`` in all."""
    best = np.argsort(y, kind="stable")[: size // 2]
    keep = set(best.tolist())
    for i in range(len(y) - 1, -1, -1):
        if len(keep) >= size:
            break
        keep.add(i)
    idx = np.array(sorted(keep))
    return X[idx], y[idx]
