"""Sweeps: a full grid over the space, or a file of points (CANDLE "UPF": one JSON object per line)."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from emews.core.errors import KeyedValueError, OptionError
from emews.core.optimizer import AskTellOptimizer
from emews.core.results import Result
from emews.core.space import Space
from emews.core.wording import counted

#: the key of a text UPF's points: the line, as Swift/T's ``file_lines(upf)`` passed it to the model
TEXT_KEY = "params"


class Sweep(AskTellOptimizer):
    """Evaluates every point of a grid (``levels`` per numeric parameter) or of a points file.

    Options (workflow ``optimizer.options``): ``levels`` (5: the grid's values per numeric
    parameter; categorical and ordered ones take each of their values), ``file`` (a points file,
    one JSON point per line, CANDLE's UPF, instead of the grid; relative to the current or the
    workflow's folder), ``lines`` (``json``: each line a JSON object, CANDLE's UPF; ``text``: each
    line the point ``{"params": LINE}``, an EMEWS UPF whose lines the model script gets whole, as
    ``file_lines(upf)`` gave them to it) and ``backlog`` (2: points kept queued, in times the
    workers' capacity).

    Points come in order; the budget caps how many are evaluated. A resumed sweep skips
    the points an earlier run evaluated or left running (each earlier evaluation cancels
    one occurrence of its point) and finishes the rest.
    """

    def __init__(
        self, levels: int = 5, file: Path | None = None, backlog: int = 2, lines: Literal["json", "text"] = "json"
    ) -> None:
        if levels < 1:
            raise OptionError("levels", f"must be at least 1, not {levels!r}")
        if file is not None and not Path(file).is_file():
            raise OptionError("file", f"points file {file} does not exist")
        if file is not None and not _has_a_line(Path(file)):
            raise OptionError("file", f"points file {file} has no points (it is empty or blank)", _FILE_ALLOWED)
        self.levels = levels
        self.file = None if file is None else Path(file)
        self.backlog = backlog
        self.lines = lines
        self._points: Iterator[dict[str, Any]] = iter(())
        self._done: Counter[tuple] = Counter()
        self._requeued: set[int] = set()

    @classmethod
    def takes_open_points(cls, options: Mapping[str, Any]) -> bool:
        """A points file is run as Supervisor runs a UPF: lines may leave out parameters and carry
        others (the space, optional, checks and types what it lists)."""
        return options.get("file") is not None

    @classmethod
    def point_keys(cls, options: Mapping[str, Any]) -> frozenset[str] | None:
        """A text UPF's points are ``{"params": LINE}``; a JSON one's keys are known per line only."""
        return frozenset({TEXT_KEY}) if options.get("file") is not None and options.get("lines") == "text" else None

    @classmethod
    def planned_evaluations(cls, options: Mapping[str, Any], space: Space) -> int | None:
        """The points file's points, or the grid's (the budget when the workflow gives none)."""
        file = options.get("file")
        if file is not None:
            return sum(1 for _ in read_points_file(Path(file), space, options.get("lines", "json")))
        levels = options.get("levels", 5)
        return math.prod(len(space[name].grid(levels)) for name in space.names)

    @classmethod
    def describe_plan(cls, options: Mapping[str, Any], space: Space) -> str | None:
        """A points file's points and the keys they set (those only some lines set, apart), or the
        grid's points over the space's parameters."""
        file = options.get("file")
        if file is None:
            grid = cls.planned_evaluations(options, space) or 0
            return f"{counted(len(space), 'parameter')} on a grid of {counted(grid, 'point')}"
        lines = options.get("lines", "json")
        points = list(read_points_file(Path(file), space, lines))
        if lines == "text":
            return f"{counted(len(points), 'point')} from {file}, each line the point's {TEXT_KEY}"
        return f"{counted(len(points), 'point')} from {file}{_keys_text(points)}"

    def check(self, space: Space) -> None:
        """Read the whole points file: the first bad line raises ``ValueError`` ("file:line: ..."), keyed
        to the ``file`` option."""
        if self.file is not None:
            try:
                for _ in read_points_file(self.file, space, self.lines):
                    pass
            except ValueError as exc:
                raise KeyedValueError("optimizer.options.file", str(exc)) from None

    def written_points(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """A JSON points file's lines as written, each with ``FILE:LINE`` (a text UPF's lines are
        the model's own strings: none)."""
        if self.file is not None and self.lines == "json":
            for lineno, point in numbered_points(self.file):
                yield f"{self.file}:{lineno}", point

    def start(self, space: Space, workers: int) -> None:
        super().start(space, workers)
        self._points = read_points_file(self.file, space, self.lines) if self.file else grid_points(space, self.levels)

    def run(self, evaluator: Any) -> None:
        self._done = Counter(point_key(evaluator.space, t.params) for t in evaluator.requeued)
        self._requeued = {t.id for t in evaluator.requeued}
        super().run(evaluator)

    def target_in_flight(self, evaluator: Any) -> int:
        """Keep ``backlog`` times what the workers can hold queued: points are cheap."""
        return self.backlog * evaluator.capacity

    def suggest(self, n: int) -> list[dict[str, Any]]:
        return list(itertools.islice(self._fresh(), n))

    def ingest(self, results: Sequence[Result]) -> None:
        """A sweep does not adapt; earlier runs' results mark their points done."""
        asked = getattr(self, "task_points", {})
        for r in results:
            if r.id not in asked and r.id not in self._requeued:
                self._done[point_key(self.space, r.params)] += 1

    def _fresh(self) -> Iterator[dict[str, Any]]:
        for point in self._points:
            key = point_key(self.space, point)
            if self._done[key] > 0:
                self._done[key] -= 1
                continue
            yield point


def point_key(space: Space, point: Mapping[str, Any]) -> tuple:
    """The point as the space sees it: each value encoded (categoricals by index) as a float (``2 == 2.0``);
    in an open space, every key and value of the point."""
    if space.open:
        return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in point.items()))
    key: list[float | str] = []
    for name, dim in space.free.items():
        value = point.get(name)
        try:
            key.append(float(dim.encode(value)))
        except (TypeError, ValueError):
            key.append(repr(value))
    return tuple(key)


def _keys_text(points: Sequence[Mapping[str, Any]]) -> str:
    """`` (setting a, b; some also c)``: the keys of every point, in the order first written, then
    those of some points only (`` (each setting some of a, b)`` when no key is on every point);
    nothing for no points."""
    seen: Counter[str] = Counter(key for point in points for key in point)
    every = [key for key, n in seen.items() if n == len(points)]
    some = [key for key, n in seen.items() if n < len(points)]
    if not every:
        return f" (each setting some of {', '.join(some)})" if some else ""
    return f" (setting {', '.join(every)}" + (f"; some also {', '.join(some)})" if some else ")")


#: what the ``file`` option takes
_FILE_ALLOWED = "a file of one point per line, a JSON object (with lines: text, any text); no file: the grid"


def _has_a_line(path: Path) -> bool:
    """Whether the points file ``path`` has a line that is not blank (:func:`numbered_points` skips those)."""
    with path.open() as fh:
        return any(line.strip() for line in fh)


def grid_points(space: Space, levels: int) -> Iterator[dict[str, Any]]:
    """The cartesian product of each dimension's grid, in row-major order."""
    names = space.names
    axes = [space[name].grid(levels) for name in names]
    for combo in itertools.product(*axes):
        yield dict(zip(names, combo, strict=True))


def numbered_points(path: Path, lines: str = "json") -> Iterator[tuple[int, dict[str, Any]]]:
    """Each point of a points file as written, with its line number (blank lines skipped): a JSON
    object per line, or with ``lines: text`` the point ``{"params": LINE}``; a line that is not a
    JSON object raises ``ValueError`` ("file:line: ...")."""
    with Path(path).open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if lines == "text":
                yield lineno, {TEXT_KEY: line.rstrip("\r\n")}
                continue
            try:
                point = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{path}:{lineno}: not a JSON object: {exc.msg}; each line is one JSON object (CANDLE's UPF), "
                    f'or with lines: text the point {{"{TEXT_KEY}": LINE}} (an EMEWS UPF: each line passed whole '
                    f"to the model, {{{TEXT_KEY}}} in the command)"
                ) from None
            if not isinstance(point, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(point).__name__}")
            yield lineno, point


def read_points_file(path: Path, space: Space, lines: str = "json") -> Iterator[dict[str, Any]]:
    """Yield the points of a points file (:func:`numbered_points`); constants of the space fill keys
    a line leaves out."""
    constants = space.constants
    for lineno, point in numbered_points(path, lines):
        try:
            yield space.validate({**constants, **point})
        except ValueError as exc:
            raise ValueError(f"{path}:{lineno}: {exc}") from None
