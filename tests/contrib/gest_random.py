"""A small gest-api generator written to the standard, as a third party would: seeded random points,
``returns_id`` (each point carries ``_id`` and must come back with it)."""

from __future__ import annotations

import random

from gest_api import Generator
from gest_api.vocs import ContinuousVariable


class SeededRandom(Generator):
    returns_id = True
    last: "SeededRandom | None" = None

    def __init__(self, vocs, seed=None):
        super().__init__(vocs)
        self.vocs = vocs
        self.rng = random.Random(seed) if seed is not None else random  # unseeded: the global generator
        self.next_id = 0
        self.issued: set[int] = set()
        self.ingested_ids: list[int] = []
        self.unknown_ids: list[object] = []
        SeededRandom.last = self

    def _validate_vocs(self, vocs) -> None:
        if len(vocs.objectives) != 1:
            raise ValueError("SeededRandom needs exactly one objective")

    def suggest(self, num_points):
        points = []
        for _ in range(num_points or 1):
            point = {name: (self.rng.uniform(*var.domain) if isinstance(var, ContinuousVariable)
                            else self.rng.choice(sorted(var.values, key=repr)))
                     for name, var in self.vocs.variables.items()}
            point.update({name: c.value for name, c in self.vocs.constants.items()})
            point["_id"] = self.next_id
            self.issued.add(self.next_id)
            self.next_id += 1
            points.append(point)
        return points

    def ingest(self, results):
        for record in results:
            if "_id" in record:
                if record["_id"] not in self.issued:
                    self.unknown_ids.append(record["_id"])
                self.ingested_ids.append(record["_id"])
