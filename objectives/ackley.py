"""The Ackley function over every parameter named ``x1``, ``x2``, ... (other parameters are ignored).

Global minimum 0 at the origin. A cheap, multimodal test objective.
"""

from __future__ import annotations

import math
from typing import Any, Mapping


def ackley(xs: list[float], a: float = 20.0, b: float = 0.2, c: float = 2 * math.pi) -> float:
    d = len(xs)
    if d == 0:
        raise ValueError("ackley needs at least one parameter named x1, x2, ...")
    sum_sq = sum(x * x for x in xs) / d
    sum_cos = sum(math.cos(c * x) for x in xs) / d
    return -a * math.exp(-b * math.sqrt(sum_sq)) - math.exp(sum_cos) + a + math.e


def run(params: Mapping[str, Any]) -> float:
    xs = [float(v) for k, v in sorted(params.items()) if k.startswith("x") and k[1:].isdigit()]
    return ackley(xs)
