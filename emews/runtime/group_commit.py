"""Group commit: results (and long-running tasks) reach the store in batches, then the optimizer."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping

from emews.core.queues import QueuePair
from emews.core.results import Result, Task
from emews.runtime.fail_fast import FailFast
from emews.runtime.progress import Progress
from emews.store import Store


class GroupCommit:
    """Results received and tasks dispatched, on their way to the store in groups.

    Results are stored, then delivered (what the optimizer sees is on disk), in batches of at
    most :attr:`rows` rows or :attr:`interval` seconds (a share of a task's run time while tasks
    are long: :meth:`pace`), and at once when the workers wait for the optimizer or nothing runs. A task is recorded in the store's tasks table once it has run
    :attr:`record_after` seconds, so short tasks cost one row, not two; a task dispatched less
    than this before a kill -9 is not re-run by ``emews resume`` (a stop signal records every
    running task). A training trial is recorded earlier, with its first report (``TrialService``).
    """

    rows = 256
    #: seconds the oldest result waits for others at most: ``interval_min``, or while tasks
    #: are long ``interval_share`` of their mean run time, up to ``interval_max`` (:meth:`pace`)
    interval_min = 1e-3
    interval = interval_min
    interval_share = 5e-4
    interval_max = 20e-3
    record_after = 0.5

    def __init__(
        self,
        queues: QueuePair,
        progress: Progress,
        workers: int,
        *,
        store: Store | None = None,
        fail_fast: FailFast | None = None,
    ) -> None:
        self._queues = queues
        self._progress = progress
        self._workers = workers
        self._store = store
        self._fail_fast = fail_fast  # stops the run when its first results all failed alike
        #: received, not yet stored nor delivered (the distributor appends to it)
        self.results: list[Result] = []
        self._dispatched: deque[tuple[float, Task]] = deque()  # (when, task) not yet recorded
        self._first = 0.0  # when the oldest result not yet committed was seen
        self._starving_wait = 0.0  # how long that may be while the workers wait for the optimizer (``pace``)

    @property
    def pending(self) -> bool:
        """Something waits to be stored: results, or tasks not yet recorded."""
        return bool(self.results or self._dispatched)

    def started(self, tasks: Iterable[Task], now: float) -> None:
        """``tasks`` were dispatched at ``now`` (``time.perf_counter``); a retry is recorded already."""
        dispatched = self._dispatched
        for task in tasks:
            if not task.attempt:
                dispatched.append((now, task))

    def pace(self, mean_run: float | None) -> None:
        """Gather results for up to :attr:`interval_share` of a task's mean run time (``None``: not
        known), within :attr:`interval_min` and :attr:`interval_max`: at 100,000 workers on 60 s
        tasks, 20 ms of results (about 30) per transaction and per hand-off to the optimizer, not
        one or two. While tasks are that long (the share above the minimum), results wait so even
        when the workers wait for the optimizer (20 ms of a 60 s task); shorter ones go at once then."""
        share = 0.0 if mean_run is None else mean_run * self.interval_share
        self.interval = min(self.interval_max, max(self.interval_min, share))
        self._starving_wait = self.interval if share > self.interval_min else 0.0

    def due(self, *, starving: bool, running: int) -> bool:
        """Whether to commit now: nothing runs, a full batch, the oldest result waited
        :attr:`interval` (or, when the workers wait for the optimizer's next points, what
        :meth:`pace` allows: at once unless tasks are long), or a task has run
        :attr:`record_after` seconds unrecorded."""
        clock = time.perf_counter
        results = self.results
        if results:
            if not self._first:
                self._first = clock()
            if not running or len(results) >= self.rows:
                return True
            waited = clock() - self._first
            if waited >= self.interval or (starving and waited >= self._starving_wait):
                return True
        return bool(self._dispatched) and clock() - self._dispatched[0][0] >= self.record_after

    def commit(self, in_flight: Mapping[int, Task], busy: int, *, closing: bool, every_task: bool = False) -> None:
        """Store the results received (with the tasks that have run :attr:`record_after` seconds,
        or all running ones when ``every_task``), then hand them to the optimizer."""
        results, self.results = self.results, []
        self._first = 0.0
        running = self._running(in_flight, every_task)
        if self._store is not None:
            self._store.commit(running, results)
        if results:
            self._progress.record(results, min(busy, self._workers))
            if self._fail_fast is not None and not closing:
                self._fail_fast.see(results)  # FailedFast: stored, not delivered; the run stops
            self._queues.deliver(results)

    def record(self, tasks: list[Task]) -> None:
        """Record these tasks as dispatched, at once (not in the next group): ``emews resume`` runs them."""
        if self._store is not None and tasks:
            self._store.commit(tasks)

    def attempted(self, tasks: list[Task]) -> None:
        """Count one more attempt of these recorded tasks, at once (they run again)."""
        if self._store is not None and tasks:
            self._store.mark_attempted([t.id for t in tasks])

    def _running(self, in_flight: Mapping[int, Task], every_task: bool) -> list[Task]:
        """Tasks dispatched about ``record_after`` seconds ago (all when ``every_task``) that still run."""
        dispatched, out = self._dispatched, []
        # half the age: a commit takes a quarter-second's worth of tasks at once, not one
        # task per loop as each reaches the age
        horizon = time.perf_counter() - self.record_after / 2
        while dispatched and (every_task or dispatched[0][0] <= horizon):
            task = dispatched.popleft()[1]
            if task.id in in_flight:
                out.append(task)
        return out
