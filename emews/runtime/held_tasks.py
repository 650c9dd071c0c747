"""The tasks each worker holds and has not reported, in the order it runs them, at any width."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence


class HeldTasks:
    """Task ids by worker rank, in the order each worker runs them (the first runs now).

    Built for 100,000 workers that each hold one task: a worker holding one task keeps its id as
    a plain int, one holding more (prefetch) a deque of them, one holding none has no entry. A
    deque per worker cost about 760 bytes even while it held one task or none (76 MB at 100,000
    workers); an int in the map costs nothing beyond the task's own id.
    """

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[int, int | deque[int]] = {}  # a deque is never empty: its entry goes first

    def __len__(self) -> int:
        """Workers holding at least one task."""
        return len(self._ids)

    def __iter__(self) -> Iterator[int]:
        """The ranks of the workers holding tasks."""
        return iter(self._ids)

    def count(self, rank: int) -> int:
        """How many ids ``rank`` holds."""
        held = self._ids.get(rank)
        if held is None:
            return 0
        return 1 if isinstance(held, int) else len(held)

    def of(self, rank: int) -> list[int]:
        """The ids ``rank`` holds, in the order it runs them (none: empty)."""
        held = self._ids.get(rank)
        if held is None:
            return []
        return [held] if isinstance(held, int) else list(held)

    def add(self, rank: int, task_ids: Iterable[int]) -> None:
        """``rank`` holds ``task_ids`` too, after those it holds."""
        ids = self._ids
        held = ids.get(rank)
        if held is None:
            new = list(task_ids)
            if len(new) == 1:
                ids[rank] = new[0]
            elif new:
                ids[rank] = deque(new)
        elif isinstance(held, int):
            more = deque((held,))
            more.extend(task_ids)
            ids[rank] = more
        else:
            held.extend(task_ids)

    def forget(self, rank: int, task_ids: Sequence[int]) -> None:
        """``rank`` no longer holds ``task_ids`` (ended: the first it holds; given back: the last);
        an id it does not hold is passed over."""
        ids = self._ids
        held = ids.get(rank)
        if held is None:
            return
        if isinstance(held, int):
            if held in task_ids:
                del ids[rank]
            return
        for task_id in task_ids:
            if held[0] == task_id:
                held.popleft()
            elif task_id in held:
                held.remove(task_id)
            if not held:
                del ids[rank]
                return

    def pop(self, rank: int) -> list[int]:
        """The ids ``rank`` held, in order, which it holds no more (none: empty)."""
        held = self._ids.pop(rank, None)
        if held is None:
            return []
        return [held] if isinstance(held, int) else list(held)
