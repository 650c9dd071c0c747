"""The queue pair: the single hand-off point between optimizer and distributor.

The optimizer thread appends tasks and collects results; the distributor
thread (the only code that talks MPI) takes tasks and delivers results.
Nothing else crosses between the two threads.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable

from emews.core.errors import EmewsError
from emews.core.results import Result, Task


class DistributorFailed(EmewsError, RuntimeError):
    """The task-distribution layer stopped; the optimizer cannot go on."""


class QueuePair:
    """A task deque (optimizer -> distributor) and a result deque (distributor -> optimizer)."""

    def __init__(self) -> None:
        self.tasks: deque[Task] = deque()
        self.new_tasks = threading.Event()
        self._results: deque[Result] = deque()
        self._arrived = threading.Condition(threading.Lock())
        self._failure: BaseException | None = None
        self._end: BaseException | None = None  # nothing more will run: raised once the results are taken
        self._capacity = 0  # tasks the workers can hold at present (:attr:`capacity`)
        self._waiting = 0  # optimizer threads blocked in ``collect``

    # optimizer side -------------------------------------------------------
    def submit(self, tasks: Iterable[Task]) -> None:
        """Queue ``tasks``: higher ``priority`` first, in the order submitted within a priority.

        Tasks of one priority (the usual case) are appended in one deque operation. A task that
        outranks the tail is inserted before the first lower one; the distributor may take tasks
        from the head meanwhile (every deque call is atomic), which at worst places it one
        position late, never twice or lost."""
        batch = list(tasks)
        if batch and self._in_order(batch):
            self.tasks.extend(batch)
        else:
            for task in batch:
                self._insert(task)
        self.new_tasks.set()

    def _in_order(self, batch: list[Task]) -> bool:
        """Whether appending ``batch`` keeps the queue ordered by priority."""
        try:
            tail = self.tasks[-1].priority
        except IndexError:
            tail = float("inf")
        return (
            all(a.priority >= b.priority for a, b in zip(batch, batch[1:], strict=False)) and batch[0].priority <= tail
        )

    def _insert(self, task: Task) -> None:
        position = len(self.tasks)
        while position > 0:
            try:
                if self.tasks[position - 1].priority >= task.priority:
                    break
            except IndexError:  # the distributor took tasks meanwhile
                position = min(position, len(self.tasks))
                continue
            position -= 1
        self.tasks.insert(position, task)

    def cancel(self, ids: Iterable[int]) -> list[int]:
        """Take back the tasks among ``ids`` that no worker has been given yet; their ids (the
        others run to their end). Each removal is one atomic deque operation: a task the
        distributor takes meanwhile is simply not among them."""
        wanted = set(ids)
        taken = []
        for task in [t for t in list(self.tasks) if t.id in wanted]:
            try:
                self.tasks.remove(task)
            except ValueError:  # given to a worker meanwhile
                continue
            taken.append(task.id)
        return taken

    def keep_in_flight(self, own: int, capacity: int) -> int:
        """How many evaluations an optimizer whose own rule says ``own`` keeps outstanding, the
        workers holding ``capacity`` (``Evaluator.room``): ``own``. A job's workers are fixed, and
        the capacity its distributor writes is prefetch, not more workers."""
        return own

    @property
    def capacity(self) -> int:
        """Tasks the workers can hold at present (written by the distributor, or by a pooled run's
        bridge as pools join and leave)."""
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        if value == self._capacity:  # the distributor's passes set it often: no lock when unchanged
            return
        with self._arrived:
            grew = value > self._capacity
            self._capacity = value
            if grew:  # an optimizer waiting for results or more room (``collect(room_above=...)``) proposes
                self._arrived.notify_all()

    def collect(self, timeout: float | None = None, *, room_above: int | None = None) -> list[Result]:
        """Wait until at least one result is there (or ``timeout``), then take them all; with
        ``room_above``, also stop waiting once :attr:`capacity` is above it (then maybe with none)."""
        with self._arrived:
            self._waiting += 1
            try:
                self._arrived.wait_for(
                    lambda: (
                        self._results
                        or self._failure is not None
                        or self._end is not None
                        or (room_above is not None and self._capacity > room_above)
                    ),
                    timeout,
                )
            finally:
                self._waiting -= 1
            if self._failure is not None and not self._results:
                raise DistributorFailed(str(self._failure)) from self._failure
            if self._end is not None and not self._results:
                raise self._end
            taken = list(self._results)
            self._results.clear()
        return taken

    # distributor side -----------------------------------------------------
    @property
    def optimizer_waits(self) -> bool:
        """The optimizer is blocked waiting for a result and none is on its way to it."""
        with self._arrived:
            return self._waiting > 0 and not self._results

    def deliver(self, results: list[Result]) -> None:
        with self._arrived:
            self._results.extend(results)
            self._arrived.notify()

    def end(self, reason: BaseException) -> None:
        """Nothing more will run (the compute budget is spent): ``collect`` raises ``reason`` once
        the results delivered so far are taken."""
        with self._arrived:
            self._end = reason
            self._arrived.notify_all()

    def fail(self, error: BaseException) -> None:
        """Wake the optimizer with ``error``: the distributor cannot continue."""
        with self._arrived:
            self._failure = error
            self._arrived.notify_all()
