"""Single-rank tasks: which workers can take tasks now, with prefetch that adapts to task length."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

from emews.core.results import Outcome, Status, Task
from emews.core.wording import counted
from emews.runtime.dispatch import (
    Dispatch,
    Ended,
    Event,
    Fatal,
    Lost,
    Returned,
    Send,
    Started,
    Stranded,
    Unfinished,
    moving_mean,
    outcome_seconds,
)
from emews.runtime.held_tasks import HeldTasks
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

    def __contains__(self, rank: object) -> bool:
        """Whether ``rank`` takes tasks (admitted, not retired)."""
        return rank in self._ranks

    @property
    def workers(self) -> int:
        """Workers that take tasks."""
        return len(self._ranks)

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

    def admit(self, rank: int) -> None:
        """``rank`` takes tasks from now on (it said it is ready): the slots each worker has now, first."""
        self._ranks[rank] = None
        self._free[rank] = self._depth
        self._free.move_to_end(rank)

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

    def overran(self, seconds: float) -> None:
        """A task has run ``seconds`` and not ended yet (a worker holding tasks ahead went quiet):
        a sample of the estimate, the least the task takes, which withdraws the slots no longer due."""
        self._observe(seconds)

    def _withdraw(self, rank: int) -> None:
        free = self._free.get(rank, 0)
        if free > 1:
            self._free[rank] = free - 1
        elif free == 1:
            del self._free[rank]
        else:
            self._debt[rank] = self._debt.get(rank, 0) + 1


#: how the line about a worker the run stops waiting for ends: the run goes on, the job ends for
#: want of workers (the last one), or the run was ending anyway
GOES_ON, LAST, CLOSING = "so the run goes on without it", "so the job ends", "so the job ends without it"


class WorkerStalled(Stranded):
    """A worker rank held tasks far past their timeout without a word: it is stopped (``SIGSTOP``,
    a debugger) or blocked where its own timer cannot interrupt it (an inline objective in C code).
    The run goes on without it, unless it was the last worker (then the job ends)."""

    def __init__(self, rank: int, held: int, quiet: float, timeout: float | None, ending: str = GOES_ON) -> None:
        then = {
            GOES_ON: " (its tasks run on the other workers)",
            LAST: " (no other worker is left); its tasks run again on resume",
        }.get(ending, "")
        #: why, in short (``emews status``, summary.json's lost ranks)
        self.reason = f"has not answered for {quiet:.0f} s, holding {counted(held, 'task')}, past the task timeout of {timeout:g} s"
        super().__init__(
            f"worker rank {rank} has not answered for {quiet:.0f} s, holding {counted(held, 'task')}, "
            f"past the task timeout of {timeout:g} s: it is stopped (SIGSTOP, a debugger) or blocked "
            f"where its timer cannot interrupt it (an inline objective in C code), {ending}{then}"
        )


class WorkerNotReady(Stranded):
    """A worker rank never said it was ready (``Tag.READY``) within its setup's bound and a grace: it
    is stopped, or blocked where its setup's timer cannot interrupt it. The run goes on without it,
    unless no worker is ready (then the job ends)."""

    def __init__(self, rank: int, waited: float, ending: str = GOES_ON) -> None:
        #: why, in short (``emews status``, summary.json's lost ranks)
        self.reason = f"did not say it was ready within {waited:.0f} s (EMEWS_SETUP_TIMEOUT and EMEWS_STRANDED_GRACE)"
        super().__init__(
            f"worker rank {rank} did not say it was ready within {waited:.0f} s (its setup's bound and a "
            "grace: EMEWS_SETUP_TIMEOUT, EMEWS_STRANDED_GRACE): it is stopped (SIGSTOP, a debugger) or blocked "
            f"where its setup's timer cannot interrupt it, {ending}"
            + (" (no worker is ready); what is queued runs on resume" if ending == LAST else "")
        )


class SlotDispatch(Dispatch):
    """Single-rank tasks over :class:`WorkerSlots`: dynamic load balancing, each free slot of the
    most recently active worker filled from the queue's front, batches of several tasks per
    worker while tasks are short (``prefetch`` at most).

    Tasks handed out ahead were placed on an estimate, and the next ones may run far longer (fast
    tasks first, slow ones after them). So when a worker has nothing while nothing is queued, and
    another holds tasks ahead and has not been heard from for :attr:`recall_after` seconds, that
    one is asked for the tasks it has not started (``Tag.RECALL``): it gives them back
    (``Tag.RETURNED``, :meth:`returned`) and they are queued again, first, for the idle workers.
    The time it was quiet counts as a sample of the run-time estimate (its task has run at least
    that long), which takes prefetch down to one task per worker. The worker decides which tasks
    it has not started, so none runs twice."""

    watches_running = False  # nothing of its own: queued tasks are all it places
    rebalances = True
    #: seconds a worker holding tasks ahead may go without reporting before they are taken back
    #: for an idle worker: 20 times the most work prefetch hands a worker (5 ms), so short tasks
    #: on a busy node are left alone (and a sample that long ends prefetch at once)
    recall_after = 0.1

    def __init__(
        self,
        ranks: Sequence[int],
        *,
        prefetch: int,
        clock: Callable[[], float] = time.perf_counter,
        stall_after: float | None = None,
        task_timeout: float | None = None,
        ready_within: float | None = None,
    ) -> None:
        """``stall_after``: seconds a worker may hold tasks without a word before it is
        :class:`WorkerStalled` (``None``: never; the task timeout, the setup's bound and a grace).
        ``ready_within``: tasks go only to workers that said they are ready, and one that has not
        within these seconds is :class:`WorkerNotReady` (``None``: every worker takes tasks at once)."""
        self._unready: dict[int, None] = dict.fromkeys(ranks) if ready_within is not None else {}
        self._slots = WorkerSlots([r for r in ranks if r not in self._unready], prefetch=prefetch)
        self._stall_after = stall_after
        self._task_timeout = task_timeout
        self._ready_within = ready_within
        self._clock = clock
        self._ready_by = clock() + (ready_within or 0.0)
        self._heard_at: dict[int, float] = {}  # when each worker holding tasks last reported (or got its first)
        self._next_check = 0.0
        self._workers = len(ranks)
        #: tasks each live worker (one in ``_slots``) has not reported, by id in the order it runs
        #: them (the first runs now); a live worker with no entry is idle
        self._holding = HeldTasks()
        #: workers that hold two tasks or more (not being recalled), by when each was last heard from
        #: (or came to hold them), the longest quiet first
        self._ahead: OrderedDict[int, float] = OrderedDict()
        self._recalling: set[int] = set()

    @property
    def capacity(self) -> int:
        return self._slots.capacity + self._slots.depth * len(self._unready)

    @property
    def has_room(self) -> bool:
        return bool(self._slots)

    @property
    def mean_run(self) -> float | None:
        return self._slots.mean_run

    def busy(self, in_flight: int) -> int:
        return min(in_flight, self._workers)

    def place(self, tasks: deque[Task], *, start: bool) -> list[Event]:
        slots, holding, ahead = self._slots, self._holding, self._ahead
        events: list[Event] = []
        while start and slots and tasks:
            rank, count = slots.take(len(tasks))
            batch = [tasks.popleft() for _ in range(count)]
            events.append(Started(batch))
            events.append(Send(rank, Tag.TASK, batch))
            before = holding.count(rank)
            holding.add(rank, [t.id for t in batch])
            if not before and self._stall_after is not None:  # read only to find a stalled worker
                self._heard_at[rank] = self._clock()
            if before + count > 1 and rank not in ahead and rank not in self._recalling:
                ahead[rank] = self._clock()
        return events

    def ended(self, rank: int, outcomes: Sequence[Outcome]) -> list[Event]:
        release, ok = self._slots.release, Status.OK
        for outcome in outcomes:
            release(rank, outcome_seconds(outcome), outcome.status is not ok)
        self._heard(rank, [o.task_id for o in outcomes])
        return [Ended(outcomes)]

    def _heard(self, rank: int, reported: Sequence[int]) -> None:
        """``rank`` reported the tasks ``reported`` (ended, or given back)."""
        if rank not in self._slots:  # it stopped meanwhile
            return
        self._holding.forget(rank, reported)
        held = self._holding.count(rank)
        if reported and self._stall_after is not None:
            self._heard_at[rank] = self._clock()
        if held > 1:
            if rank not in self._recalling:
                self._ahead[rank] = self._clock()
                self._ahead.move_to_end(rank)
        else:
            self._ahead.pop(rank, None)

    def stopped(self, rank: int, unfinished: Sequence[int], *, closing: bool) -> list[Event]:
        """It gets no more tasks; what it held runs elsewhere: the tasks it named and those sent to
        it after it stopped (they reach it after its STOPPED left, and it never starts them)."""
        named = set(unfinished)
        late = [i for i in self._retire(rank) if i not in named]
        return [Unfinished((*unfinished, *late))]

    def _retire(self, rank: int) -> list[int]:
        """``rank`` takes no more tasks; the ids of those it held, in order."""
        self._slots.retire(rank)
        self._drop_unready(rank)
        self._ahead.pop(rank, None)
        self._recalling.discard(rank)
        return self._holding.pop(rank)

    def _drop_unready(self, rank: int) -> None:
        """``rank`` is no longer waited for to say it is ready (it did, or it is gone)."""
        unready = self._unready
        if rank in unready:
            del unready[rank]
            if not unready:
                self._unready = {}  # an emptied dict keeps its table: 5 MB at 100,000 workers

    def ready(self, rank: int) -> list[Event]:
        if rank in self._unready:  # else: it is gone already (stopped, or not ready in time)
            self._drop_unready(rank)
            self._slots.admit(rank)
        return []

    def stalled(self, *, closing: bool = False) -> list[Event]:
        """:class:`Lost` for each worker that has held tasks for ``stall_after`` seconds without
        reporting one or has not said it is ready within ``ready_within``; :class:`Fatal` instead for
        the last worker, unless ``closing`` (the run waits for the workers' stops: it ends without
        that one). Looked at once a second at most."""
        if self._stall_after is None and not self._unready:
            return []
        now = self._clock()
        if now < self._next_check:
            return []
        self._next_check = now + min(1.0, (self._stall_after or self._ready_within or 10.0) / 10)
        ending = CLOSING if closing else GOES_ON
        if self._unready and now >= self._ready_by:
            waited = now - self._ready_by + (self._ready_within or 0.0)
            unready = list(self._unready)
            if not self._slots.workers and not closing:  # no worker is ready: nothing could run what is queued
                return [Fatal(WorkerNotReady(unready[0], waited, LAST))]
            return [Lost(rank, WorkerNotReady(rank, waited, ending), None, self._retire(rank)) for rank in unready]
        if self._stall_after is None:
            return []
        heard_at, due, holding = self._heard_at, now - self._stall_after, self._holding
        for rank in holding:
            if heard_at.get(rank, now) < due:
                held = holding.count(rank)
                last = not closing and self._slots.workers + len(self._unready) == 1
                stalled = WorkerStalled(rank, held, now - heard_at[rank], self._task_timeout, LAST if last else ending)
                if last:
                    return [Fatal(stalled)]
                ids = self._retire(rank)
                return [Lost(rank, stalled, ids[0] if ids else None, ids[1:])]
        return []

    def rebalance(self) -> list[Event]:
        ahead = self._ahead
        if not ahead or len(self._holding) == self._slots.workers:  # no live worker is idle
            return []
        rank, since = next(iter(ahead.items()))
        quiet = self._clock() - since
        if quiet < self.recall_after:
            return []
        del ahead[rank]
        self._recalling.add(rank)
        self._slots.overran(quiet)  # one task per worker from now on, until results say otherwise
        return [Send(rank, Tag.RECALL, None)]

    def returned(self, rank: int, task_ids: Sequence[int]) -> list[Event]:
        self._recalling.discard(rank)
        if rank in self._slots:
            for _ in task_ids:
                self._slots.release(rank, None)
        self._heard(rank, task_ids)
        return [Returned(task_ids)] if task_ids else []
