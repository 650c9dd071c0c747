"""UQ ensembles: every point an optimizer proposes runs ``replicates`` times (``replicates: N``).

Replicate ``r`` of a point is the point plus ``replicate: r`` (0 .. N-1: the bootstrap index or
dropout seed a model derives its randomness from; each task also has its own ``ctx.seed``). Both
are recorded with the result, one row per replicate. The optimizer does not see replicates: a
:class:`ReplicatingEvaluator` stands in for the evaluator, takes one point and hands back one
result per point once all its replicates are done, with the mean objective over the replicates that
succeeded (``std``, ``min``, ``max`` and ``count`` among its metrics). The budget counts evaluations
(replicates): an optimizer sees ``budget // N`` points.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emews.core.direction import Direction
from emews.core.evaluator import BudgetExhausted, Evaluator, Room, own_count, room_count
from emews.core.results import Result, Status
from emews.core.space import Int, Space

#: the key a replicate's index travels under, in the point and in the stored results
REPLICATE = "replicate"


def replicated_space(space: Space, replicates: int) -> Space:
    """The space the tasks are checked against: ``space`` plus the replicate index."""
    if REPLICATE in space.dimensions:
        raise ValueError(f"{REPLICATE!r} is reserved for the replicate index; rename that parameter")
    return Space({**space.dimensions, REPLICATE: Int(0, replicates - 1)}, open=space.open)


def point_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """The point a replicate's parameters belong to (the replicate index left out)."""
    return {k: v for k, v in params.items() if k != REPLICATE}


def point_label(params: Mapping[str, Any]) -> str:
    """A key that is the same for every replicate of one point."""
    return json.dumps(point_of(params), sort_keys=True)


@dataclass(frozen=True)
class Aggregate:
    """What the replicates of one point gave: statistics over the successful ones."""

    count: int
    failed: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None

    @classmethod
    def of(cls, objectives: Iterable[float | None]) -> Aggregate:
        values = list(objectives)
        ok = [v for v in values if v is not None and math.isfinite(v)]
        if not ok:
            return cls(0, len(values), None, None, None, None)
        return cls(
            len(ok),
            len(values) - len(ok),
            statistics.fmean(ok),
            statistics.stdev(ok) if len(ok) > 1 else 0.0,
            min(ok),
            max(ok),
        )


@dataclass(frozen=True)
class PointResult:
    """One point and what its replicates gave."""

    point: dict[str, Any]
    stats: Aggregate
    task_ids: tuple[int, ...]


def group_points(rows: Iterable[tuple[int, float | None, Mapping[str, Any]]]) -> list[PointResult]:
    """The points of ``rows`` (task id, objective or ``None`` when it did not succeed, parameters
    with the replicate index), in the order of their first task, each with its statistics."""
    groups: dict[str, list[tuple[int, float | None, Mapping[str, Any]]]] = {}
    for row in rows:
        groups.setdefault(point_label(row[2]), []).append(row)
    return [
        PointResult(point_of(members[0][2]), Aggregate.of(m[1] for m in members), tuple(m[0] for m in members))
        for members in groups.values()
    ]


def group_results(rows: Iterable[tuple[int, str, float | None, Mapping[str, Any]]]) -> list[PointResult]:
    """:func:`group_points` of stored results (task id, status, objective, parameters): only a
    successful (``ok``) result's objective counts."""
    return group_points((i, objective if status == Status.OK.value else None, p) for i, status, objective, p in rows)


def best_point(points: Iterable[PointResult], direction: Direction) -> PointResult | None:
    """The point whose mean objective over its successful replicates is best (the result the
    optimizer saw for it); of equal means, the first. ``None``: no point has a success."""
    scored = [p for p in points if p.stats.mean is not None]
    return min(scored, key=lambda p: (direction.loss(p.stats.mean or 0.0), p.task_ids[0]), default=None)


@dataclass
class _Group:
    point: dict[str, Any]
    ids: list[int]
    results: dict[int, Result] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return len(self.results) == len(self.ids)

    def result(self, sign: float) -> Result:
        """One result for the point: the mean objective over the replicates that succeeded."""
        ordered = [self.results[i] for i in self.ids]
        stats = Aggregate.of(r.objective if r.ok else None for r in ordered)
        first = ordered[0]
        status = Status.OK if stats.mean is not None else first.status
        errors = [r.error for r in ordered if r.error]
        metrics = {
            "replicates": len(ordered),
            "count": stats.count,
            "std": stats.std,
            "min": stats.min,
            "max": stats.max,
            "replicate_ids": list(self.ids),
        }
        return Result(
            id=self.ids[0],
            params=self.point,
            status=status,
            objective=stats.mean,
            loss=sign * stats.mean if stats.mean is not None else math.inf,
            metrics=metrics,
            error=errors[0] if status is not Status.OK and errors else None,
            rank=first.rank,
            host=first.host,
            submitted=first.submitted,
            started=min((r.started for r in ordered if r.started), default=None),
            finished=max((r.finished for r in ordered if r.finished), default=None),
        )


class ReplicatingEvaluator:
    """The optimizer's evaluator when each point runs ``replicates`` times (see the module docstring).

    Offers what :class:`~emews.core.evaluator.Evaluator` offers; a point's id is the task id of its first
    replicate. Earlier runs' results (``history``) are grouped by point; tasks an earlier run left
    running are run again but reach the optimizer only inside their point's group.
    """

    def __init__(self, inner: Evaluator, space: Space, replicates: int) -> None:
        if replicates < 1:
            raise ValueError("replicates must be at least 1")
        self.inner = inner
        self.space = space
        self.replicates = replicates
        self._sign = Direction.of(inner.direction).sign
        self._groups: dict[int, _Group] = {}
        self._group_of: dict[int, int] = {}
        self._ready: list[Result] = []
        self.history: tuple[Result, ...] = self._grouped_history(inner.history)
        self.requeued: tuple = ()

    # the evaluator's plain attributes, as the optimizer reads them
    workers = property(lambda self: self.inner.workers)
    direction = property(lambda self: self.inner.direction)
    seed = property(lambda self: self.inner.seed)
    exp_dir = property(lambda self: self.inner.exp_dir)
    observers = property(lambda self: self.inner.observers)

    @property
    def earlier_points(self) -> int:
        """Points earlier runs put (each took ``replicates`` consecutive ids)."""
        return -(-self.inner.earlier_points // self.replicates)

    @property
    def budget(self) -> int:
        """Points the budget allows (each costs ``replicates`` evaluations)."""
        return self.inner.budget // self.replicates

    @property
    def remaining(self) -> int:
        return self.inner.remaining // self.replicates

    @property
    def pending(self) -> int:
        return len(self._groups) + len(self._ready)

    @property
    def submitted(self) -> int:
        return self.inner.submitted // self.replicates

    @property
    def capacity(self) -> int:
        return max(self.inner.capacity // self.replicates, 1)

    def room(self, own: int | Callable[[], int]) -> Room:
        """:meth:`Evaluator.room` in points (each point ``replicates`` tasks)."""
        tasks = self.inner.room(lambda: own_count(own) * self.replicates)
        keep = -(-tasks.in_flight // self.replicates)
        return Room.of(max(tasks.capacity // self.replicates, 1), keep, self.pending, self.remaining)

    def cancel(self, ids: Iterable[int]) -> list[int]:
        """Not with replicates: a point is several tasks, some of which may have started, and a
        point whose replicates were partly cancelled could never be aggregated."""
        raise ValueError(
            f"evaluator.cancel is not available with replicates ({self.replicates} per point): "
            "run without replicates to cancel tasks"
        )

    def put(self, points: Iterable[Mapping[str, Any]], *, priority: float = 0.0) -> list[int]:
        points = [dict(p) for p in points]
        if len(points) > self.remaining:
            raise BudgetExhausted(
                f"{len(points)} points asked for, {self.remaining} left of a budget of "
                f"{self.budget} points ({self.replicates} replicates each)"
            )
        ids = []
        for point in points:
            if REPLICATE in point:
                raise ValueError(f"optimizer proposed {point!r}: {REPLICATE!r} is the replicate index, not a parameter")
            task_ids = self.inner.put([{**point, REPLICATE: r} for r in range(self.replicates)], priority=priority)
            group = _Group(point_of(self.space.validate(point)), task_ids)
            self._groups[task_ids[0]] = group
            self._group_of.update((i, task_ids[0]) for i in task_ids)
            ids.append(task_ids[0])
        return ids

    def get(self, n: int = 1, timeout: float | None = None, *, more_room: int | None = None) -> list[Result]:
        """Wait until ``n`` points have all their replicates done (or ``timeout``, or the
        :attr:`capacity` grew past ``more_room``: :meth:`Evaluator.get`); return the ready ones."""
        room = room_count(more_room)
        # the inner capacity at which this one (its whole multiples of replicates) is above room
        inner_room = None if room is None else (room + 1) * self.replicates - 1
        n = min(n, self.pending)
        if n <= 0:
            return []
        while len(self._ready) < n:
            arrived = self.inner.get(1, timeout, more_room=inner_room)
            if not arrived:
                break
            self._absorb(arrived)
        ready, self._ready = self._ready, []
        return ready

    def map(self, points: Sequence[Mapping[str, Any]]) -> list[Result]:
        """Evaluate ``points`` (each ``replicates`` times); their aggregated results in the same order."""
        ids = self.put(points)
        wanted, found = set(ids), dict[int, Any]()
        while True:
            found.update((r.id, r) for r in self._ready if r.id in wanted)
            self._ready = [r for r in self._ready if r.id not in wanted]
            if len(found) == len(ids):
                return [found[i] for i in ids]
            self._absorb(self.inner.get(1))

    def _absorb(self, results: Sequence[Result]) -> None:
        for result in results:
            key = self._group_of.pop(result.id, None)
            if key is None:
                continue  # a task an earlier run left running: stored, counted in its point's history later
            group = self._groups[key]
            group.results[result.id] = result
            if group.done:
                del self._groups[key]
                self._ready.append(group.result(self._sign))

    def _grouped_history(self, history: Sequence[Result]) -> tuple[Result, ...]:
        groups: dict[str, _Group] = {}
        for result in history:
            label = point_label(result.params)
            group = groups.setdefault(label, _Group(point_of(result.params), []))
            group.ids.append(result.id)
            group.results[result.id] = result
        return tuple(g.result(self._sign) for g in groups.values())
