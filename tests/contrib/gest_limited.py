"""Two gest-api generators with the limits real ones have, written to the standard.

``NeedsData``: suggests nothing before it has ingested a result (Xopt's Bayesian generators raise
"no data contained in generator"). ``ContinuousOnly``: its ``_validate_vocs`` refuses discrete
variables (Xopt's CNSGA: "this generator does not support discrete variables").
"""

from __future__ import annotations

import random

from gest_api import Generator
from gest_api.vocs import ContinuousVariable


class NeedsData(Generator):
    def __init__(self, vocs, seed=None):
        super().__init__(vocs)
        self.vocs = vocs
        self.rng = random.Random(seed)
        self.ingested: list[dict] = []
        self.asked_without_data = 0

    def _validate_vocs(self, vocs) -> None:
        pass

    def suggest(self, num_points):
        if not self.ingested:
            self.asked_without_data += 1
            raise RuntimeError("no data contained in generator, call add_data method to add data")
        best = min(self.ingested, key=lambda r: r["f"] if r["f"] == r["f"] else float("inf"))
        points = []
        for _ in range(num_points or 1):
            point = {}
            for name, var in self.vocs.variables.items():
                if isinstance(var, ContinuousVariable):
                    low, high = var.domain
                    point[name] = min(max(best[name] + self.rng.gauss(0, (high - low) / 10), low), high)
                else:
                    point[name] = self.rng.choice(sorted(var.values, key=repr))
            point.update({name: c.value for name, c in self.vocs.constants.items()})
            points.append(point)
        return points

    def ingest(self, results):
        self.ingested.extend(results)


class ContinuousOnly(Generator):
    def __init__(self, vocs):
        super().__init__(vocs)
        self.vocs = vocs

    def _validate_vocs(self, vocs) -> None:
        discrete = [name for name, var in vocs.variables.items() if not isinstance(var, ContinuousVariable)]
        if discrete:
            raise ValueError(f"ContinuousOnly supports continuous variables only, not {discrete[0]}")

    def suggest(self, num_points):
        return [{name: sum(var.domain) / 2 for name, var in self.vocs.variables.items()}
                for _ in range(num_points or 1)]

    def ingest(self, results):
        pass
