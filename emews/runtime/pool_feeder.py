"""A pool's feeder: the optimizer side of an attached pool's distributor (docs/postgres.md, "Pools").

A pool's rank 0 runs today's :class:`~emews.runtime.distributor.Distributor` over a
:class:`PoolQueuePair` whose other end is not an optimizer but this feeder: it claims batches from
the experiment's shared queue (:class:`~emews.store.pool_queue.PoolQueue`) into the pair, writes
the outcomes the distributor delivers back to the store (one result per task id), and renews the
pool's leases by heartbeat while it works. It sleeps in one ``select`` on the store's socket (a
task was queued: ``LISTEN``) and the pair's pipe (a result came), never in a polling loop.
"""

from __future__ import annotations

import logging
import math
import os
import selectors
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from emews.core.lost_ranks import LostRank
from emews.core.queues import DistributorFailed, QueuePair
from emews.core.results import Result, Task
from emews.store.pool_queue import Claimed, PoolQueue, StoreLost
from emews.training.checkpoints import CHECKPOINTS_DIR, remove_temps_taken_over, trial_folder

log = logging.getLogger("emews")


@dataclass(frozen=True, slots=True)
class _HandedOut:
    """Tasks handed to a worker (told from the distributor's thread): handed back, they count an attempt."""

    ids: Sequence[int]

    def apply(self, started: set[int]) -> None:
        started.update(self.ids)


@dataclass(frozen=True, slots=True)
class _GivenBack:
    """Tasks a worker gave back or stopped holding without starting them: they keep their attempt count."""

    ids: Sequence[int]

    def apply(self, started: set[int]) -> None:
        started.difference_update(self.ids)


class PoolQueuePair(QueuePair):
    """A queue pair whose deliveries also make a pipe readable, so the feeder can wait for the
    distributor's results and the store's notifications in one ``select``."""

    def __init__(self) -> None:
        super().__init__()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def deliver(self, results: list[Result]) -> None:
        super().deliver(results)
        self.poke()

    def fail(self, error: BaseException) -> None:
        """The distributor cannot go on (a task found the disk full, say): the feeder is woken to
        stop at once, not at its next heartbeat."""
        super().fail(error)
        self.poke()

    def poke(self) -> None:
        """Wake the feeder (a result came, or it should look at the time)."""
        try:
            os.write(self._write, b"\0")
        except BlockingIOError:  # the pipe is full: the feeder is awake already
            pass

    def fileno(self) -> int:
        return self._read

    def drain(self) -> None:
        """Forget the wake-ups read so far."""
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        for fd in (self._read, self._write):
            os.close(fd)


#: seconds between two of a pool's "ranks busy" writes at most (what ``emews status`` reads)
BUSY_EVERY = 1.0


class PoolFeeder:
    """Keeps up to :attr:`hold` claimed tasks in the distributor's queue or running, stores their
    results, and heartbeats every third of ``lease_s`` (when idle it wakes for that, too, and then
    claims again: a task another pool lost comes back to the queue when its lease ends, unannounced).

    ``busy`` (the distributor's worker ranks running a task) is told to the store when it changed,
    at most every :data:`BUSY_EVERY` seconds (:meth:`~emews.store.pool_queue.PoolQueue.say_busy`).
    ``lost_ranks`` (the worker ranks the distributor went on without) at its next round when one
    more is lost (:meth:`~emews.store.pool_queue.PoolQueue.say_lost`).

    ``hold`` is where it starts; with ``max_hold`` above it, the read-ahead doubles whenever the
    pool turned over everything it held, its workers then found the distributor's queue empty and
    its tasks ran shorter than a claim's round trip (their recorded times), up to ``max_hold``, and the store is told
    (:meth:`~emews.store.pool_queue.PoolQueue.set_hold`: the optimizer keeps that many in flight)."""

    def __init__(
        self,
        queue: PoolQueue,
        queues: PoolQueuePair,
        pool: int,
        *,
        hold: int,
        lease_s: float,
        max_hold: int | None = None,
        fits: int = 2**31 - 1,
        busy: Callable[[], int] | None = None,
        lost_ranks: Callable[[], Sequence[LostRank]] | None = None,
    ) -> None:
        if hold < 1 or lease_s <= 0:
            raise ValueError(f"a pool holds at least one task under a positive lease (hold={hold}, lease_s={lease_s})")
        self._queue = queue
        self._queues = queues
        self.pool = pool
        self.hold = hold
        self._base_hold = hold
        self._max_hold = max(hold, max_hold or hold)
        self._fits = fits  # the largest task (in ranks) this pool's workers can run
        self._turned_over = 0  # results stored since the hold last grew
        self._lease = lease_s
        self._held: set[int] = set()  # claimed, result not yet stored
        self._lost: deque[int] = deque()  # held tasks whose lease was lost, ended here without a result
        #: from the distributor's thread, in its order (a task may go out, back, and out again)
        self._starting: deque[_HandedOut | _GivenBack] = deque()
        self._started: set[int] = set()  # held tasks a worker started: handed back, they count an attempt
        self._renewed = time.monotonic()
        self._busy = busy
        self._busy_said: int | None = None
        self._busy_at = -math.inf
        self._lost_ranks = lost_ranks
        self._lost_said = 0
        #: task ids whose result this pool stored / sent too late (another pool's stood)
        self.stored: list[int] = []
        self.late: list[int] = []
        self._stopping = threading.Event()
        #: whether :meth:`run` began (it records the pool's end as it ends)
        self.ran = False
        queue.listen_tasks()

    @property
    def held(self) -> int:
        """Tasks claimed by this pool whose result it has not stored yet."""
        return len(self._held)

    def step(self) -> bool:
        """One round: heartbeat if due, store the results that came, claim what fits; whether
        anything happened (else the caller may :meth:`sleep`)."""
        self._take_news()
        self._say_lost()  # before the results: the rerun of a lost rank's task is stored after its loss
        if time.monotonic() - self._renewed >= self._lease / 3:
            self._queue.renew(self.pool, self._lease, sorted(self._held))
            self._renewed = time.monotonic()
            self._shrink()
        results = self._queues.collect(timeout=0)
        # what fits once these are stored (without copying the held set each round)
        wanted = self.hold - len(self._held) + len({r.id for r in results} & self._held)
        claimed: list[Claimed] = []
        if results:  # the results and the next claim in one round trip
            sent = time.monotonic()
            stored_now, claimed = self._queue.complete_and_claim(self.pool, results, wanted, self._lease, self._fits)
            round_trip = time.monotonic() - sent
            self._settle(results, stored_now)
            self._turned_over += len(results)
            self._grow(results, round_trip)
        elif wanted > 0:
            claimed = self._queue.claim(self.pool, wanted, self._lease, self._fits)
        # a task of its own whose lease ended while the store was away is still running here: not twice
        claimed = [c for c in claimed if c.task.id not in self._held]
        if claimed:
            self._held.update(c.task.id for c in claimed)
            self._clear_taken_over([c.task.id for c in claimed if c.attempt > 0])
            self._queues.submit([c.task for c in claimed])
        if self._busy is not None and self._busy_unsaid() and time.monotonic() - self._busy_at >= BUSY_EVERY:
            ranks = self._busy()
            self._queue.say_busy(self.pool, ranks)
            self._busy_said, self._busy_at = ranks, time.monotonic()
        return bool(results or claimed)

    def _clear_taken_over(self, tasks: list[int]) -> None:
        """What earlier runs of ``tasks`` left, cleared before they run here (the pool that ran each
        let it go: dead, cut off past its lease, or stopped; a start's :func:`~emews.job.wiring.
        dead_pools_cleared` skips a trial a live pool holds again): the temporary files of their
        checkpoint writers (:func:`~emews.training.checkpoints.remove_temps_taken_over`) and their staged
        checkpoints never written, ``lost``. A problem is logged: the next start clears them."""
        store = self._queue.store
        if not tasks or store.root is None:
            return
        try:
            removed = sum(remove_temps_taken_over(trial_folder(store.root / CHECKPOINTS_DIR, t)) for t in tasks)
            lost = store.mark_lost(tasks)
        except Exception as exc:  # best effort: the task runs all the same
            log.warning("pool %s: cannot clear what earlier runs of tasks %s left: %s", self.pool, tasks, exc)
            return
        if removed or lost:
            log.info(
                "pool %s took over tasks %s: %s temporary file(s) of their earlier writers removed, "
                "%s checkpoint(s) never written",
                self.pool,
                tasks,
                removed,
                lost,
            )

    def _say_lost(self) -> None:
        """Tell the store the worker ranks the distributor went on without, when there are more."""
        if self._lost_ranks is not None and len(lost := list(self._lost_ranks())) > self._lost_said:
            self._queue.say_lost(self.pool, lost)
            self._lost_said = len(lost)

    def _settle(self, results: Sequence[Result], stored_now: Sequence[int]) -> None:
        """``results`` were sent to the store, which kept ``stored_now``: no longer held here."""
        stored = set(stored_now)
        for result in results:
            self._held.discard(result.id)
            self._started.discard(result.id)
            (self.stored if result.id in stored else self.late).append(result.id)

    def _take_news(self) -> None:
        """What the distributor's thread said since the last round: tasks lost, tasks started."""
        while self._lost:
            task = self._lost.popleft()
            self._held.discard(task)
            self._started.discard(task)
        while self._starting:
            self._starting.popleft().apply(self._started)

    def _busy_unsaid(self) -> bool:
        """Whether the ranks running a task changed since the store was last told."""
        return self._busy is not None and self._busy() != self._busy_said

    def _grow(self, results: Sequence[Result], round_trip: float) -> None:
        """Double the read-ahead when the workers drained it: everything held turned over, nothing
        waits in the distributor's queue, and the tasks ran shorter than this claim's round trip
        (the queue is empty after a result of a long task too: its worker took the next task at
        once, and a pool of 3 s tasks doubled its hold at every turn-over)."""
        ran = sorted(r.finished - r.started for r in results if r.started is not None and r.finished is not None)
        if ran and ran[len(ran) // 2] >= round_trip:
            return
        if self.hold < self._max_hold and self._turned_over >= self.hold and not self._queues.tasks:
            self.hold = min(2 * self.hold, self._max_hold)
            self._turned_over = 0
            self._queue.set_hold(self.pool, self.hold)

    def _shrink(self) -> None:
        """Halve the read-ahead (not below where it started) when, at a heartbeat, more tasks wait
        in the distributor's queue than it started with: tasks got longer, and other pools should
        find them in the shared queue instead."""
        if self.hold > self._base_hold and len(self._queues.tasks) > self._base_hold:
            self.hold = max(self._base_hold, self.hold // 2)
            self._queue.set_hold(self.pool, self.hold)

    def sleep(self) -> None:
        """Wait until a task is queued, a result comes, or the next heartbeat is due."""
        if self._queue.pending():  # notifications read while the last statements ran
            return
        due = self._renewed + self._lease / 3 - time.monotonic()
        if self._busy is not None and (self._held or self._busy_said):  # tasks out: they start and end
            unsaid = self._busy_unsaid()
            due = min(due, self._busy_at + BUSY_EVERY - time.monotonic() if unsaid else BUSY_EVERY)
        with selectors.DefaultSelector() as waiting:  # not select(): descriptors past 1023 too
            waiting.register(self._queue.fileno(), selectors.EVENT_READ)
            waiting.register(self._queues.fileno(), selectors.EVENT_READ)
            waiting.select(max(due, 0.0))
        self._queues.drain()

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        """Feed until :meth:`stop` is called or ``until()`` (asked when idle) says so, then record
        that the pool ended (what it still holds is handed back once its workers stopped:
        :meth:`hand_back`)."""
        lost = False
        self.ran = True
        try:
            while not self._stopping.is_set():
                if not self.step():
                    if until():
                        break
                    self.sleep()
        except StoreLost:
            lost = True  # nothing can be recorded any more; the leases end by themselves
            raise
        finally:
            if not lost:
                self._say_lost()
                self._queue.stop(self.pool)

    def hand_back(self) -> list[int]:
        """Return what this pool holds without a result stored to the shared queue at once (after
        :meth:`run` ended and the workers stopped: nothing of it runs here any more), so another
        pool takes it now rather than when its lease ends; the ids handed back. Only the tasks a
        worker started (:meth:`started`, not :meth:`unstarted` since) count one more attempt: one
        only taken ahead (by this pool, or by a worker behind its running task) was not run.

        The results the workers delivered since :meth:`run` ended (tasks that ended while the pool
        stopped) are stored first, each tried once (a stopping pool does not wait for a lost
        connection): a finished evaluation is not run again elsewhere."""
        self._take_news()
        results = self._delivered()
        if results:
            self._settle(results, self._queue.complete_once(self.pool, results))
        if not self._held:
            return []
        released = self._queue.release(self.pool, sorted(self._held), sorted(self._started & self._held))
        self._held.clear()
        self._started.clear()
        return released

    def _delivered(self) -> list[Result]:
        """The results the distributor delivered and this feeder has not stored (none when it failed)."""
        try:
            return self._queues.collect(timeout=0)
        except DistributorFailed:
            return []

    def started(self, tasks: Sequence[Task]) -> None:
        """``tasks`` were handed to a worker (from the distributor's thread): handed back, they
        count one more attempt, unless :meth:`unstarted` says the worker did not start them."""
        self._starting.append(_HandedOut([t.id for t in tasks]))

    def unstarted(self, ids: Sequence[int]) -> None:
        """The tasks ``ids`` came back from a worker that never started them (a recall, or a worker
        that stopped holding them ahead; from the distributor's thread): handed back, they keep
        their attempt count, until a worker gets them again (:meth:`started`)."""
        self._starting.append(_GivenBack(list(ids)))

    def drop(self, task: int) -> None:
        """Forget ``task`` (from the distributor's thread): its lease was lost to another pool and
        it ended here without a result."""
        self._lost.append(task)
        self._queues.poke()

    def stop(self) -> None:
        """End :meth:`run` (from another thread) at its next wake-up, which this causes."""
        self._stopping.set()
        self._queues.poke()
