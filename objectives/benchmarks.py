"""Standard test functions as objective modules (all minimized).

Each ``run_*`` takes a point dict; ``PROBLEMS`` describes spaces, optima and targets so that
benchmarks and tests share one definition. Use one as a workflow objective with
``objective: {module: objectives/benchmarks.py, function: branin}``.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from emews.core.space import Categorical, Float, Int, Ordered, Space

_H6_A = np.array([[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
                  [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]])
_H6_C = np.array([1.0, 1.2, 3.0, 3.2])
_H6_P = 1e-4 * np.array([[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
                         [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]])


def _xs(params: Mapping[str, Any]) -> list[float]:
    keys = sorted((k for k in params if k.startswith("x") and k[1:].isdigit()), key=lambda k: int(k[1:]))
    return [float(params[k]) for k in keys]


def branin(params: Mapping[str, Any]) -> float:
    """Branin on x1 in [-5, 10], x2 in [0, 15]; minimum 0.397887 (three optima)."""
    x1, x2 = float(params["x1"]), float(params["x2"])
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 ** 2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


def hartmann6(params: Mapping[str, Any]) -> float:
    """Hartmann-6 on [0, 1]^6; minimum -3.32237."""
    x = np.array(_xs(params))
    return float(-np.sum(_H6_C * np.exp(-np.sum(_H6_A * (x - _H6_P) ** 2, axis=1))))


def ackley5(params: Mapping[str, Any]) -> float:
    """Ackley on x1..x5 in [-32.768, 32.768]; minimum 0 at the origin."""
    xs = _xs(params)
    d = len(xs)
    s1 = sum(v * v for v in xs) / d
    s2 = sum(math.cos(2 * math.pi * v) for v in xs) / d
    return -20 * math.exp(-0.2 * math.sqrt(s1)) - math.exp(s2) + 20 + math.e


_MIXED_ACT = {"relu": 0.0, "tanh": 0.6, "sigmoid": 1.2}


def mixed(params: Mapping[str, Any]) -> float:
    """A mixed problem shaped like a hyperparameter search; minimum 0.

    lr (log float 1e-4..1, best 1e-2), layers (int 1..8, best 4), batch (ordered 16..512, best 64),
    activation (categorical, best relu), x (float -1..1, best 0.3).
    """
    lr = math.log10(float(params["lr"]))
    layers = int(params["layers"])
    batch = math.log2(int(params["batch"]))
    return ((lr + 2) ** 2 + 0.15 * (layers - 4) ** 2 + 0.3 * (batch - 6) ** 2
            + _MIXED_ACT[params["activation"]] + 2 * (float(params["x"]) - 0.3) ** 2)


run = branin  # the default objective function of this module

PROBLEMS: dict[str, dict[str, Any]] = {
    "branin": dict(function=branin, optimum=0.397887, target=0.5,
                   space=Space({"x1": Float(-5.0, 10.0), "x2": Float(0.0, 15.0)})),
    "hartmann6": dict(function=hartmann6, optimum=-3.32237, target=-3.0,
                      space=Space({f"x{i}": Float(0.0, 1.0) for i in range(1, 7)})),
    "ackley5": dict(function=ackley5, optimum=0.0, target=5.0,
                    space=Space({f"x{i}": Float(-32.768, 32.768) for i in range(1, 6)})),
    "mixed": dict(function=mixed, optimum=0.0, target=0.3,
                  space=Space({"lr": Float(1e-4, 1.0, log=True), "layers": Int(1, 8),
                               "batch": Ordered((16, 32, 64, 128, 256, 512)),
                               "activation": Categorical(("relu", "tanh", "sigmoid")),
                               "x": Float(-1.0, 1.0)})),
}
