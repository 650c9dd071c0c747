"""The optimizer's view of the task-distribution layer."""

from __future__ import annotations

import json
import time
from typing import Any, Iterable, Mapping, Sequence

from emews.queues import QueuePair
from emews.results import Result, Task
from emews.space import Space, SpaceError


def point_key(params: Mapping[str, Any]) -> str:
    """A canonical text form of a point (JSON with sorted keys), to recognise it again."""
    return json.dumps(dict(params), sort_keys=True)


class BudgetExhausted(RuntimeError):
    """More evaluations were asked for than the budget has left.

    Raised out of ``Optimizer.run`` it ends the run normally.
    """


class Evaluator:
    """Submit points and collect results; the budget is enforced here.

    ``put`` never blocks; ``get`` blocks until results arrive; ``map``
    evaluates a batch and returns its results in order (the seam that
    DEAP's ``toolbox.map`` plugs into).
    """

    def __init__(self, queues: QueuePair, space: Space, *, workers: int, budget: int,
                 direction: str = "minimize", seed: int = 0, first_id: int = 0,
                 replay: Iterable[Result] = ()) -> None:
        self.space = space
        self.workers = workers
        self.budget = budget
        self.direction = direction
        self.seed = seed
        self._queues = queues
        self._next_id = first_id
        self._submitted = 0
        self._handed_out = 0
        self._ready: dict[int, Result] = {}
        self._replay: dict[str, list[Result]] = {}
        for result in replay:
            self._replay.setdefault(point_key(result.params), []).append(result)
            self._next_id = max(self._next_id, result.id + 1)
        self.replayed = 0

    @property
    def remaining(self) -> int:
        """Evaluations the budget still allows to be submitted."""
        return self.budget - self._submitted

    @property
    def pending(self) -> int:
        """Submitted evaluations whose results the optimizer has not yet received."""
        return self._submitted - self._handed_out

    @property
    def capacity(self) -> int:
        """Tasks the workers can hold right now: ``workers`` for long tasks, more when
        tasks are short and each worker gets its next ones ahead (prefetch)."""
        return max(self._queues.capacity, self.workers)

    @property
    def submitted(self) -> int:
        return self._submitted

    def put(self, points: Iterable[Mapping[str, Any]]) -> list[int]:
        """Queue ``points`` for evaluation; return their task ids.

        When the run resumes an experiment, a point that was already evaluated
        there is answered from the results store instead of being run again.
        """
        points = list(points)
        if len(points) > self.remaining:
            raise BudgetExhausted(
                f"{len(points)} evaluations asked for, {self.remaining} left of a budget of {self.budget}")
        tasks, ids = [], []
        now = time.time()
        for point in points:
            try:
                params = self.space.validate(point)
            except SpaceError as exc:
                raise ValueError(f"optimizer proposed an invalid point {dict(point)!r}: {exc}") from None
            earlier = self._replay.get(point_key(params)) if self._replay else None
            if earlier:
                result = earlier.pop()
                self._ready[result.id] = result
                self.replayed += 1
                ids.append(result.id)
                continue
            tasks.append(Task(self._next_id, params, self._task_seed(self._next_id), now))
            ids.append(self._next_id)
            self._next_id += 1
        self._submitted += len(points)
        if tasks:
            self._queues.submit(tasks)
        return ids

    def get(self, n: int = 1, timeout: float | None = None) -> list[Result]:
        """Wait until ``n`` results are ready (or ``timeout``), then return all ready ones.

        Returns at least ``min(n, pending)`` results unless the timeout passes first;
        returns ``[]`` at once when nothing is pending.
        """
        n = min(n, self.pending)
        if n <= 0:
            return []
        self._wait(lambda: len(self._ready) >= n, timeout)
        results = list(self._ready.values())
        self._ready.clear()
        self._handed_out += len(results)
        return results

    def map(self, points: Sequence[Mapping[str, Any]]) -> list[Result]:
        """Evaluate ``points`` and return their results in the same order."""
        ids = self.put(points)
        self._wait(lambda: all(i in self._ready for i in ids), None)
        self._handed_out += len(ids)
        return [self._ready.pop(i) for i in ids]

    def _wait(self, done: Any, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            for result in self._queues.collect(left):
                self._ready[result.id] = result

    def _task_seed(self, task_id: int) -> int:
        return (self.seed * 1_000_003 + task_id) % (2**31 - 1)
