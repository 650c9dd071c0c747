"""Sweeps: a full grid over the space, or a file of points (CANDLE "UPF": one JSON object per line)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Iterator, Sequence

from emews.optimizer import AskTellOptimizer
from emews.results import Result
from emews.space import Constant, Space


class Sweep(AskTellOptimizer):
    """Evaluates every point of a grid (``levels`` per numeric parameter) or of a points file.

    Points come in order; the budget caps how many are evaluated.
    """

    def __init__(self, levels: int = 5, file: str | None = None, backlog: int = 2) -> None:
        if levels < 1:
            raise ValueError("levels must be at least 1")
        if file is not None and not Path(file).is_file():
            raise ValueError(f"points file {file} does not exist")
        self.levels = levels
        self.file = file
        self.backlog = backlog
        self._points: Iterator[dict[str, Any]] = iter(())

    def start(self, space: Space, workers: int) -> None:
        super().start(space, workers)
        self._points = read_points_file(Path(self.file), space) if self.file else grid_points(space, self.levels)

    def target_in_flight(self, evaluator: Any) -> int:
        """Keep ``backlog`` times what the workers can hold queued: points are cheap."""
        return self.backlog * evaluator.capacity

    def suggest(self, n: int) -> list[dict[str, Any]]:
        return list(itertools.islice(self._points, n))

    def ingest(self, results: Sequence[Result]) -> None:
        """A sweep does not adapt."""


def grid_points(space: Space, levels: int) -> Iterator[dict[str, Any]]:
    """The cartesian product of each dimension's grid, in row-major order."""
    names = space.names
    axes = [space[name].grid(levels) for name in names]
    for combo in itertools.product(*axes):
        yield dict(zip(names, combo))


def read_points_file(path: Path, space: Space) -> Iterator[dict[str, Any]]:
    """Yield the points of a JSON-lines file; constants of the space fill keys a line leaves out."""
    constants = {k: d.value for k, d in space.dimensions.items() if isinstance(d, Constant)}
    with path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                point = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not a JSON object: {exc.msg}") from None
            if not isinstance(point, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(point).__name__}")
            try:
                yield space.validate({**constants, **point})
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: {exc}") from None
