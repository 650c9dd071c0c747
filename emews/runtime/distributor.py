"""The distributor thread: the only code on the optimizer rank that talks to workers."""

from __future__ import annotations

import threading
import time
from typing import Sequence

from emews.queues import QueuePair
from emews.results import Outcome, Result, Task
from emews.runtime.backoff import Backoff
from emews.runtime.progress import Progress
from emews.runtime.slots import WorkerSlots
from emews.runtime.store import ResultsStore
from emews.runtime.transport import Tag, Transport


class Distributor:
    """Moves tasks from the queue pair to idle workers and results back, storing each result.

    Dynamic load balancing: a worker that returns a result is handed the next
    queued task in the same pass. When there is nothing to do the thread
    spins briefly, then sleeps with back-off (woken early by new tasks); while tasks
    run, its sleeps stay under a small share of their run time, so a result is
    answered with the next task promptly.
    """

    #: seconds to wait for workers to confirm a stop (they may run teardown) / an abort
    stop_grace = 60.0
    abort_grace = 5.0
    #: most tasks a worker may hold while tasks are short (see WorkerSlots)
    prefetch = 8
    #: group commit: results are stored (then delivered) in batches of at most this many
    #: rows or this many seconds, and at once when a worker waits for the optimizer
    commit_rows = 256
    commit_interval = 1e-3
    #: while tasks run, results are looked for at least every ``poll_latency_share`` of a
    #: task's mean run time, within these bounds (seconds): short tasks get a prompt answer,
    #: long ones cost the optimizer rank almost no CPU
    poll_latency_share = 0.0025
    poll_latency_min = 100e-6
    poll_latency_max = 1e-3

    def __init__(self, transport: Transport, queues: QueuePair, worker_ranks: Sequence[int], *,
                 sign: float, progress: Progress, store: ResultsStore | None = None) -> None:
        self._transport = transport
        self._queues = queues
        self._workers = list(worker_ranks)
        self._sign = sign
        self._progress = progress
        self._store = store
        self._closing = False
        self._abort = False
        self._thread = threading.Thread(target=self._run, name="emews-distributor", daemon=True)
        self.error: BaseException | None = None
        self.stopped_workers: set[int] = set()

    def start(self) -> "Distributor":
        self._thread.start()
        return self

    @property
    def all_stopped(self) -> bool:
        """Whether every worker confirmed that it finished."""
        return self.stopped_workers.issuperset(self._workers)

    def close(self, *, abort: bool = False, timeout: float | None = None) -> None:
        """Finish: drain submitted work (or drop it when ``abort``), stop the workers, join."""
        self._abort = self._abort or abort
        self._closing = True
        self._queues.new_tasks.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as exc:  # surfaced to the optimizer through the queue pair
            self.error = exc
            self._queues.fail(exc)
            self._abort = True
        finally:
            self._stop_workers()

    def _stop_workers(self) -> None:
        """Tell every worker to stop and wait (bounded) for each to confirm."""
        for rank in self._workers:
            self._transport.send(self._abort, rank, Tag.STOP)
        deadline = time.monotonic() + (self.abort_grace if self._abort else self.stop_grace)
        backoff = Backoff()
        while not self.all_stopped and time.monotonic() < deadline:
            msg = self._transport.poll()
            if msg is None:
                backoff.idle()
            elif msg.tag is Tag.STOPPED:
                self.stopped_workers.add(msg.source)

    def _loop(self) -> None:
        transport, queues, tasks = self._transport, self._queues, self._queues.tasks
        wakeup = queues.new_tasks
        slots = WorkerSlots(self._workers, prefetch=self.prefetch)
        in_flight: dict[int, Task] = {}
        received: list[Result] = []  # not yet stored nor delivered
        first_received = 0.0
        backoff = Backoff(sleep=wakeup.wait)
        clock = time.perf_counter
        while True:
            wakeup.clear()
            progressed = False
            while (msg := transport.poll()) is not None:
                if msg.tag is Tag.OUTCOME:
                    if not received:
                        first_received = clock()
                    outcome: Outcome
                    for outcome in msg.payload:
                        received.append(Result.from_outcome(in_flight.pop(outcome.task_id), outcome, self._sign))
                        ran = None if outcome.started is None else (outcome.finished or 0.0) - outcome.started
                        slots.release(msg.source, ran)
                    progressed = True
            queues.capacity = slots.capacity
            while slots and tasks and not self._abort:
                rank, count = slots.take(len(tasks))
                batch = [tasks.popleft() for _ in range(count)]
                for task in batch:
                    in_flight[task.id] = task
                transport.send(batch, rank, Tag.TASK)
                progressed = True
            self._progress.busy = min(len(in_flight), len(self._workers))
            starving = bool(slots) and not tasks  # workers wait for the optimizer's next points
            if received and (starving or not in_flight or len(received) >= self.commit_rows
                             or clock() - first_received >= self.commit_interval):
                self._commit(received, len(in_flight))
                received = []
                progressed = True
            if progressed:
                backoff.reset()
                continue
            if self._closing and (self._abort or (not in_flight and not tasks)):
                return
            backoff.max_delay = self._poll_interval(slots.mean_run) if in_flight else self.poll_latency_max
            backoff.idle()

    @classmethod
    def _poll_interval(cls, mean_run: float | None) -> float:
        """Longest sleep between polls while tasks run: a small fraction of a task's run time
        (a result waits at most that long to be seen and answered), within 100 us and 1 ms."""
        if mean_run is None:
            return cls.poll_latency_max
        return min(cls.poll_latency_max, max(cls.poll_latency_min, mean_run * cls.poll_latency_share))

    def _commit(self, results: list[Result], busy: int) -> None:
        """Store a batch durably, then hand it to the optimizer: what it sees is on disk."""
        if self._store is not None:
            self._store.add(results)
        self._progress.record(results, min(busy, len(self._workers)))
        self._queues.deliver(results)
