"""Single-rank tasks: which workers can take tasks now, with prefetch that adapts to task length."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence

from emews.core.results import Outcome, Status, Task
from emews.runtime.dispatch import Dispatch, Ended, Event, Send, Started, Unfinished, moving_mean, outcome_seconds
from emews.runtime.transport import Tag


class WorkerSlots:
    """Free task slots per worker, most recently active worker first.

    Each worker starts with one slot: pure dynamic load balancing, a task
    never waits behind another. When tasks are short (moving average of run
    time well below ``short_task`` seconds) each worker may hold up to
    ``prefetch`` tasks, so its next task is already there when it finishes
    one; as tasks grow long the extra slots are withdrawn again. A failed task's
    run time only ever lengthens the estimate: a failure that ends at once says
    nothing about how long the tasks run (a run of instant failures made one worker
    take every task ahead, slow ones included, while the others had none). Work goes
    to the worker that reported last, which is still polling rather than asleep.
    """

    def __init__(self, ranks: Sequence[int], *, prefetch: int = 32, short_task: float = 0.005) -> None:
        self._ranks = dict.fromkeys(ranks)  # an ordered set: membership in O(1) at any width
        self._free: OrderedDict[int, int] = OrderedDict((r, 1) for r in reversed(self._ranks))
        self._prefetch = max(1, prefetch)
        self._short_task = short_task
        self._depth = 1
        self._debt: dict[int, int] = {}
        self._mean_run: float | None = None

    def __bool__(self) -> bool:
        return bool(self._free)

    @property
    def depth(self) -> int:
        """Tasks each worker may hold at present."""
        return self._depth

    @property
    def mean_run(self) -> float | None:
        """Moving average of task run time in seconds (``None`` before the first result)."""
        return self._mean_run

    @property
    def capacity(self) -> int:
        """Tasks the workers may hold together at present."""
        return self._depth * len(self._ranks)

    def take(self, limit: int = 1) -> tuple[int, int]:
        """Claim up to ``limit`` slots of the most recently active worker: ``(rank, count)``."""
        rank = next(reversed(self._free))
        free = self._free[rank]
        count = min(free, max(1, limit))
        if count == free:
            del self._free[rank]
        else:
            self._free[rank] = free - count
        return rank, count

    def retire(self, rank: int) -> None:
        """``rank`` takes no more tasks (it stopped)."""
        self._free.pop(rank, None)
        self._ranks.pop(rank, None)
        self._debt.pop(rank, None)

    def release(self, rank: int, run_seconds: float | None, failed: bool = False) -> None:
        """``rank`` finished a task that ran ``run_seconds``: its slot is free again. A task
        that ``failed`` counts only where it ran longer than the mean (not before one is known)."""
        if rank not in self._ranks:
            return
        if self._debt.get(rank):
            self._debt[rank] -= 1
        else:
            self._free[rank] = self._free.get(rank, 0) + 1
            self._free.move_to_end(rank)
        if run_seconds is not None and not (failed and (self._mean_run is None or run_seconds <= self._mean_run)):
            self._observe(run_seconds)

    def _observe(self, run_seconds: float) -> None:
        mean = moving_mean(self._mean_run, run_seconds)
        self._mean_run = mean
        target = min(self._prefetch, max(1, int(self._short_task / max(mean, 1e-9))))
        while self._depth < target:
            for rank in self._ranks:
                if rank in self._free:
                    self._free[rank] += 1
                else:  # a busy worker's new slot goes behind the idle ones
                    self._free[rank] = 1
                    self._free.move_to_end(rank, last=False)
            self._depth += 1
        while self._depth > target:
            for rank in self._ranks:
                self._withdraw(rank)
            self._depth -= 1

    def _withdraw(self, rank: int) -> None:
        free = self._free.get(rank, 0)
        if free > 1:
            self._free[rank] = free - 1
        elif free == 1:
            del self._free[rank]
        else:
            self._debt[rank] = self._debt.get(rank, 0) + 1


class SlotDispatch(Dispatch):
    """Single-rank tasks over :class:`WorkerSlots`: dynamic load balancing, each free slot of the
    most recently active worker filled from the queue's front, batches of several tasks per
    worker while tasks are short (``prefetch`` at most)."""

    watches_running = False  # nothing of its own: queued tasks are all it places

    def __init__(self, ranks: Sequence[int], *, prefetch: int) -> None:
        self._slots = WorkerSlots(ranks, prefetch=prefetch)
        self._workers = len(ranks)

    @property
    def capacity(self) -> int:
        return self._slots.capacity

    @property
    def has_room(self) -> bool:
        return bool(self._slots)

    @property
    def mean_run(self) -> float | None:
        return self._slots.mean_run

    def busy(self, in_flight: int) -> int:
        return min(in_flight, self._workers)

    def place(self, tasks: deque[Task], *, start: bool) -> list[Event]:
        slots = self._slots
        events: list[Event] = []
        while start and slots and tasks:
            rank, count = slots.take(len(tasks))
            batch = [tasks.popleft() for _ in range(count)]
            events.append(Started(batch))
            events.append(Send(rank, Tag.TASK, batch))
        return events

    def ended(self, rank: int, outcomes: Sequence[Outcome]) -> list[Event]:
        release, ok = self._slots.release, Status.OK
        for outcome in outcomes:
            release(rank, outcome_seconds(outcome), outcome.status is not ok)
        return [Ended(outcomes)]

    def stopped(self, rank: int, unfinished: Sequence[int], *, closing: bool) -> list[Event]:
        self._slots.retire(rank)  # it gets no more tasks; what it held runs elsewhere
        return [Unfinished(unfinished)]
