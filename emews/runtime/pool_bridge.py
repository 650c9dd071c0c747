"""The optimizer's end of an experiment run through pools (docs/postgres.md, "Pools").

With pools the optimizer's queue pair is not drained by a distributor on the same rank: this bridge
puts the tasks the optimizer submits into the experiment's shared queue
(:meth:`~emews.store.pool_queue.PoolQueue.enqueue`) and hands back the results any pool stores, as
the store announces them (``LISTEN``): two threads, each blocked on its own event (new tasks; a
notification), never polling. A notification carries the results it announces (those that fit;
the others are read by id). When nothing was announced for ``recheck_s`` it reads the results of
the tasks it still waits for (a notification lost with a connection is then only late) and the
workers of the pools alive (the evaluator's capacity). Each result is handed back once. A time
budget (``budget.time``) is watched here too: once spent, nothing more is queued, what no pool
claimed is cancelled, and when the claimed tasks' results are in, the optimizer's next wait ends
the run (:class:`~emews.runtime.compute_budget.BudgetReached`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from emews.core.queues import QueuePair
from emews.core.results import Result
from emews.runtime.compute_budget import BudgetReached, ComputeBudget
from emews.store.pool_queue import Announced, PoolQueue

log = logging.getLogger("emews")

_NOTHING = Announced({}, [])
_GONE = object()  # not waited for (any more)


class PooledQueuePair(QueuePair):
    """The optimizer's queue pair when its tasks go to pools: a task already in the shared queue
    is cancelled there (if no pool has claimed it yet) by :attr:`bridge`."""

    def __init__(self) -> None:
        super().__init__()
        self.bridge: PoolBridge | None = None

    def keep_in_flight(self, own: int, capacity: int) -> int:
        """``own``, or ``capacity`` if that is more: pools join and leave while the optimizer runs,
        and what they hold is workers it keeps busy (a pool that joins gets work at once)."""
        return max(own, capacity)

    def cancel(self, ids: Iterable[int]) -> list[int]:
        wanted = list(ids)
        taken = super().cancel(wanted)
        rest = sorted(set(wanted) - set(taken))
        return taken + (self.bridge.cancel(rest) if rest and self.bridge is not None else [])


class PoolBridge:
    """Moves tasks from ``queues`` to the shared queue (through ``submitter``'s connection) and the
    stored results back (through ``listener``'s); ``record`` sees each batch of results."""

    def __init__(
        self,
        queues: QueuePair,
        submitter: PoolQueue,
        listener: PoolQueue,
        *,
        record: Callable[[Sequence[Result]], None] = lambda results: None,
        recheck_s: float = 5.0,
        lease_s: float = 60.0,
        budget: ComputeBudget | None = None,
    ) -> None:
        self._queues = queues
        self._submitter = submitter
        self._listener = listener
        self._record = record
        self._recheck = recheck_s
        self._lease = lease_s
        self._budget = budget if budget is not None and budget.limited else None
        #: the line saying the time budget is spent (then nothing more is queued)
        self.budget_reached: str | None = None
        self._ended = False  # the optimizer was told (BudgetReached)
        self._waiting: dict[int, Mapping[str, Any]] = {}  # submitted, result not handed back yet: its point
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.error: BaseException | None = None
        if isinstance(queues, PooledQueuePair):
            queues.bridge = self
        self._threads = [
            threading.Thread(target=self._guard, args=(self._forward,), name="emews-pool-submit", daemon=True),
            threading.Thread(target=self._guard, args=(self._receive,), name="emews-pool-receive", daemon=True),
        ]

    def start(self) -> PoolBridge:
        self._listener.listen()  # before the first task is queued: no result goes unannounced
        # before the optimizer's first proposal, which is made with it (else with its workers: 1 under emews serve)
        self._queues.capacity = self._submitter_capacity()
        for thread in self._threads:
            thread.start()
        return self

    @property
    def waiting(self) -> int:
        """Tasks queued whose result has not come back yet."""
        with self._lock:
            return len(self._waiting)

    def _guard(self, loop: Callable[[], None]) -> None:
        try:
            loop()
        except BaseException as exc:  # the optimizer must not wait for results that cannot come
            if not self._closing.is_set():
                log.exception("the pools' bridge failed")
                self.error = exc
                self._queues.fail(exc)

    def _forward(self) -> None:
        while not self._closing.is_set():
            self._queues.new_tasks.wait()
            self._queues.new_tasks.clear()
            with self._lock:  # a task is in the deque or in the shared queue for cancel(), never between
                tasks = []
                while self._queues.tasks:
                    tasks.append(self._queues.tasks.popleft())
                if tasks and self.budget_reached is None:  # once the budget is spent nothing is queued
                    self._waiting.update((t.id, t.params) for t in tasks)
                    self._submitter.enqueue(tasks)

    def _receive(self) -> None:
        rechecked = time.monotonic()
        while True:
            closing = self._closing.is_set()
            announced = _NOTHING if closing else self._listener.receive(self._receive_timeout())
            closing = closing or self._closing.is_set()
            # closing: one last read of every task still waited for, so that a result stored (and
            # announced) before the bridge closed is handed back, whether or not its notification
            # was read before close() woke this thread
            due = closing or time.monotonic() - rechecked >= self._recheck  # even while announcements keep coming
            with self._lock:
                carried = {i: self._waiting[i] for i in announced.rows if i in self._waiting}
            if carried:  # the notifications carried these results: no read
                self._hand_back(self._listener.carried(announced, carried))
            nothing = not announced.rows and not announced.ids  # a timeout, or the workers changed
            with self._lock:
                if not nothing and not due:
                    points = {i: self._waiting[i] for i in announced.ids if i in self._waiting}
                else:  # every result still waited for: one whose notification was lost comes back now
                    points = dict(self._waiting)
            if not closing and (nothing or due):
                self._queues.capacity = self._submitter_capacity()
                rechecked = time.monotonic()
            if points:
                self._hand_back(self._listener.results(list(points), points))
            if closing:
                return
            self._watch_budget()

    def _receive_timeout(self) -> float:
        """How long to wait for a notification: until the next recheck, or the time budget's end."""
        if self._budget is None or self._budget.seconds is None or self.budget_reached is not None:
            return self._recheck
        return max(0.0, min(self._recheck, self._budget.seconds - self._budget.seconds_spent))

    def _watch_budget(self) -> None:
        """Once the time budget is spent: drop what the optimizer has not queued yet and cancel what
        no pool claimed (the claimed tasks run to their end); once their results are handed back,
        tell the optimizer (:class:`BudgetReached` in its next wait, after those results)."""
        if self._budget is None or self._ended:
            return
        if self.budget_reached is None:
            reached = self._budget.reached()
            if reached is None:
                return
            with self._lock:
                self.budget_reached = reached
                self._queues.tasks.clear()
                unclaimed = list(self._waiting)
            if unclaimed:
                self.cancel(unclaimed)
        if not self.waiting:
            self._ended = True
            self._queues.end(BudgetReached(self.budget_reached))

    def _hand_back(self, results: list[Result]) -> None:
        """Deliver the results still waited for, each once (one announced twice, or carried and
        read again, is not handed back a second time)."""
        with self._lock:
            fresh = [r for r in results if self._waiting.pop(r.id, _GONE) is not _GONE]
        if fresh:
            self._record(fresh)
            self._queues.deliver(fresh)

    def cancel(self, ids: Sequence[int]) -> list[int]:
        """Cancel the tasks among ``ids`` still queued (no pool claimed them); their ids."""
        with self._lock:
            cancelled = [i for i in self._submitter.cancel(ids) if i in self._waiting]  # each id once
            for i in cancelled:
                del self._waiting[i]
        return cancelled

    def _submitter_capacity(self) -> int:
        """The evaluator's capacity: the tasks the pools that heartbeat within a lease hold at
        most, and as many again as the largest of them holds queued ahead, so that a pool that
        joins, or one that turned over all it held, finds work in the shared queue at once instead
        of after the optimizer's next proposal."""
        total, largest = self._listener.live_holds(self._lease)
        return total + largest

    def close(self, *, finished: bool) -> None:
        """Stop both threads; ``finished``: the optimizer is done, so pools stop once they hold
        nothing and tasks still queued are cancelled (an interrupted optimizer leaves its queue to
        the pools and to ``emews resume``)."""
        self._closing.set()
        self._queues.new_tasks.set()
        self._threads[0].join(timeout=self._recheck + 5.0)  # the submitter's connection is free then
        # the receiving thread waits for a notification: one comes now, tried once (closing never
        # waits for a lost connection to come back: the thread wakes at its next recheck anyway)
        self._submitter.wake()
        self._threads[1].join(timeout=self._recheck + 5.0)
        if finished:
            self._submitter.finish()
