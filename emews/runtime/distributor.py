"""The distributor thread: the only code on the optimizer rank that talks to workers."""

from __future__ import annotations

import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from emews.core.errors import EmewsError, TaskOutOfSpace
from emews.core.lost_ranks import LostRank
from emews.core.queues import QueuePair
from emews.core.results import Outcome, Result, Status, Task
from emews.runtime.backoff import Backoff
from emews.runtime.compute_budget import BudgetReached, ComputeBudget
from emews.runtime.dispatch import (
    Dispatch,
    Ended,
    Event,
    Fatal,
    Lost,
    Refused,
    Requeue,
    Returned,
    Send,
    Started,
    Unfinished,
)
from emews.runtime.distributor_gc import WideCollector
from emews.runtime.env_seconds import seconds_from_environment
from emews.runtime.fail_fast import FailFast
from emews.runtime.full_disk import FullDisk
from emews.runtime.group_commit import GroupCommit
from emews.runtime.progress import Progress
from emews.runtime.setup_bound import setup_bound
from emews.runtime.slots import SlotDispatch
from emews.runtime.teams import TeamDispatch, stranded_grace
from emews.runtime.transport import Message, Tag, Transport
from emews.runtime.trial_reports import Afterwards, TrialService, WaitingTrial
from emews.runtime.worker import WorkerStopped
from emews.store import Store

log = logging.getLogger("emews")

#: a task whose worker stopped answering while it ran is run again on another worker if it had run
#: fewer times than this before (as ``emews resume`` runs a task again once after its run was lost)
STALLED_RERUNS = 1

#: seconds the optimizer rank waits for the workers to confirm an abort (a worker that cannot, such
#: as a member of a stranded inline team, costs the whole wait): the default
ABORT_GRACE = 5.0
#: the environment variable that sets another wait for a job (the tests use a fraction of a second)
ABORT_GRACE_VARIABLE = "EMEWS_ABORT_GRACE"


def abort_grace(environ: Mapping[str, str] = os.environ) -> float:
    """This job's abort grace: ``EMEWS_ABORT_GRACE`` seconds where it is set (a number >= 0), else
    :data:`ABORT_GRACE`; anything else is a :class:`ConfigError` naming the variable."""
    return seconds_from_environment(ABORT_GRACE_VARIABLE, ABORT_GRACE, environ)


class Distributor:
    """Moves tasks from the queue pair to idle workers and results back, storing each result.

    Dynamic load balancing: a worker that returns a result is handed the next
    queued task in the same pass. When there is nothing to do the thread
    spins briefly, then sleeps with back-off (woken early by new tasks); while tasks
    run, its sleeps stay under a small share of their run time, so a result is
    answered with the next task promptly, and while they are long it sleeps without
    spinning and commits larger groups (:meth:`_pace`).

    Where tasks run is the :class:`~emews.runtime.dispatch.Dispatch`'s to decide: free slots per
    worker (:class:`~emews.runtime.slots.SlotDispatch`), or with ``gang`` (tasks may need several
    ranks, ``task.ranks``) a :class:`~emews.runtime.teams.TeamDispatch` over the workers' ``nodes``
    (rank -> host): one task per rank at a time, node-aligned, EASY backfill. It returns events,
    which the distributor carries out; results reach the store and the optimizer through a
    :class:`~emews.runtime.group_commit.GroupCommit`.
    """

    #: seconds to wait for workers to confirm a stop (they may run teardown); an abort waits
    #: ``_abort_grace`` (:func:`abort_grace`: ``EMEWS_ABORT_GRACE`` where set, read when the distributor is made)
    stop_grace = 60.0
    #: most tasks a worker may hold while tasks are very short (see WorkerSlots: a worker holds
    #: about 5 ms of work, so this bound only applies to tasks shorter than 20 us). Deep enough
    #: that a worker on an oversubscribed node, which sleeps when idle rather than polling,
    #: still has work queued when it wakes: 32 halved the no-op throughput of ``emews launch``
    prefetch = 256
    #: while tasks run, results are looked for at least every ``poll_latency_share`` of a
    #: task's mean run time, within these bounds (seconds): short tasks get a prompt answer,
    #: long ones cost the optimizer rank almost no CPU
    poll_latency_share = 0.0025
    poll_latency_min = 100e-6
    poll_latency_max = 1e-3

    def __init__(
        self,
        transport: Transport,
        queues: QueuePair,
        worker_ranks: Sequence[int],
        *,
        sign: float,
        progress: Progress,
        store: Store | None = None,
        fail_fast: FailFast | None = None,
        trials: TrialService | None = None,
        gang: bool = False,
        nodes: Mapping[int, str] | None = None,
        waiting: Sequence[WaitingTrial] = (),
        inline_timeout: float | None = None,
        budget: ComputeBudget | None = None,
        on_start: Callable[[Sequence[Task]], None] | None = None,
        on_unstarted: Callable[[Sequence[int]], None] | None = None,
        task_timeout: float | None = None,
        full_disk: FullDisk | None = None,
    ) -> None:
        self._abort_grace = abort_grace()
        #: tells a task that failed for want of disk space: the run stops, the task is left to resume
        self._full_disk = full_disk
        #: told the tasks handed to a worker (a pool's feeder: a stopping pool counts an attempt for those only)
        self._on_start = on_start
        #: ... and, in the same order, those a worker gave back or stopped holding without starting them
        self._on_unstarted = on_unstarted
        self._gang = gang
        self._transport = transport
        self._queues = queues
        self._workers = list(worker_ranks)
        self._sign = sign
        self._progress = progress
        #: answers training trials' reports and restore requests (Tag.TRIAL)
        self._trials = trials or TrialService(None)
        self._closing = False
        self._abort = False
        #: STOP is the last message a worker reads: one sent after it stays unmatched, and MPI_Finalize
        #: fails on it (mpiexec then kills the job); a report that arrives meanwhile is stored, not answered
        self._stops_sent = False
        self._drain_until: float | None = None  # a stop signal: no new dispatch, running trials pause
        self._budget = budget if budget is not None and budget.limited else None  # steps, time
        self._spent = False  # the compute budget is spent: nothing new is dispatched
        self._ended = False  # ... and the optimizer was told
        self._thread = threading.Thread(target=self._run, name="emews-distributor", daemon=True)
        #: no full garbage collections over the tasks in flight at width (engaged while the loop runs)
        self.collector: WideCollector | None = None
        self._in_flight: dict[int, Task] = {}
        #: results on their way to the store, then the optimizer; tasks on their way to the store
        self._group = GroupCommit(queues, progress, len(self._workers), store=store, fail_fast=fail_fast)
        #: trials paused by their scheduler, waiting for a promotion: task id -> (task, outcome so far)
        self._waiting: dict[int, tuple[Task, Outcome]] = {}
        for trial in waiting:  # an earlier run's (``emews resume``)
            self._waiting[trial.task.id] = (trial.task, trial.outcome)
            self._trials.hold(trial.task.id, trial.step)
        self._dispatch = self._placement(gang, nodes, inline_timeout, task_timeout)
        self._handlers: dict[Tag, Callable[[int, Any], bool]] = {
            Tag.OUTCOME: self._on_outcome,
            Tag.STOPPED: self._on_stopped,
            Tag.TRIAL: self._on_trial,
            Tag.RETURNED: self._on_returned,
            Tag.READY: self._on_ready,
        }
        self._effects: dict[type, Callable[[Any], None]] = {
            Send: self._send,
            Started: self._started,
            Ended: self._ended_tasks,
            Refused: self._refused,
            Requeue: self._requeue,
            Unfinished: self._unfinished,
            Returned: self._returned,
            Lost: self._lost,
            Fatal: self._fatal,
        }
        self.error: BaseException | None = None
        self.stopped_workers: set[int] = set()
        #: workers the run went on without (stopped answering): their messages are dropped from then on
        self.lost_workers: set[int] = set()
        self._revived: set[int] = set()  # ... those heard from again since
        self._rerun: set[int] = set()  # tasks a lost worker began, queued again: their attempt is stored as they start
        #: the workers the run went on without, when and why, and what became of their tasks (summary.json)
        self.lost_ranks: list[LostRank] = []
        #: shutdown problems reported by workers (teardown errors), by rank
        self.worker_errors: dict[int, str] = {}

    def _placement(
        self,
        gang: bool,
        nodes: Mapping[int, str] | None,
        inline_timeout: float | None,
        task_timeout: float | None,
    ) -> Dispatch:
        """Teams for tasks of any size (``gang``), else slots. Training trials are long, and a
        promotion must not queue behind a prefetched task (and under a step or time budget: a
        prefetched task would start after the budget is spent). ``inline_timeout``: members run
        in the worker ranks with this timeout; a team that cannot end ends the job. ``task_timeout``:
        a worker silent past it, its setup's bound and the stranded grace is run without from then
        on (:class:`~emews.runtime.dispatch.Lost`), as is one that has not said it is ready within
        its setup's bound and the grace; the last one ends the job."""
        if gang:
            host = socket.gethostname()
            return TeamDispatch({r: (nodes or {}).get(r, host) for r in self._workers}, inline_timeout=inline_timeout)
        prefetch = 1 if self._trials.scheduler or self._budget else self.prefetch
        stall_after = None
        grace = stranded_grace()
        if task_timeout is not None and math.isfinite(task_timeout) and task_timeout > 0:
            stall_after = task_timeout + setup_bound(task_timeout) + grace
        return SlotDispatch(
            self._workers,
            prefetch=prefetch,
            stall_after=stall_after,
            task_timeout=task_timeout,
            ready_within=setup_bound(task_timeout) + grace,
        )

    def start(self) -> Distributor:
        self._thread.start()
        return self

    @property
    def budget_reached(self) -> str | None:
        """The line saying the compute budget (steps, time) ended the run; ``None`` if it did not."""
        return self._budget.reached() if self._budget is not None and self._spent else None

    @property
    def unjoined(self) -> set[int]:
        """Workers the run went on without that have not confirmed a stop since (the job cannot
        end with them: MPI_Finalize waits for every rank, so rank 0 aborts it once its outputs are written)."""
        return self.lost_workers - self.stopped_workers

    @property
    def settled(self) -> int:
        """Workers the stop no longer waits for: those that confirmed it, and those the run went on
        without that have not answered since (a count over the lost ones, which are few: a union with
        every stopped worker on each pass of the stop cost 4 s at 100,000 workers)."""
        lost = self.lost_workers
        stopped = len(self.stopped_workers)
        return stopped + len(lost - self._revived - self.stopped_workers) if lost else stopped

    @property
    def all_stopped(self) -> bool:
        """Whether every worker confirmed that it finished (only worker ranks send STOPPED: a
        count, not a set comparison, on every idle pass at any width)."""
        return len(self.stopped_workers) >= len(self._workers)

    def close(self, *, abort: bool = False, timeout: float | None = None, pause: float | None = None) -> None:
        """Finish: drain submitted work (or drop it when ``abort``), stop the workers, join.

        ``pause`` (a stop signal): dispatch nothing more and give the running tasks that many
        seconds to end (training trials pause at their next report), then abort the rest."""
        if pause is not None:
            self._drain_until = time.monotonic() + pause
        self._abort = self._abort or abort
        self._closing = True
        self._queues.new_tasks.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        """Serve, then stop the workers and store what arrived: each step runs whatever the one
        before raised, and no error escapes the thread (the first is :attr:`error`, for the run's
        summary; a full disk, for one, is reported there in one line, not as a thread traceback)."""
        self.collector = WideCollector(len(self._workers))
        try:
            for step in (self._loop, self._stop_workers, self._flush):
                self._noting(step)
        finally:
            self.collector.close()

    def _noting(self, step: Callable[..., object], *args: object) -> None:
        """Run ``step``; an error it raises becomes :attr:`error` (the first one), reaches the
        optimizer through the queue pair, and aborts what still runs."""
        try:
            step(*args)
        except BaseException as exc:
            if self.error is None:
                self.error = exc
                self._queues.fail(exc)
            self._abort = True

    def _stop_workers(self) -> None:
        """Tell every worker to stop and wait (bounded) for each to confirm.

        Results that arrive meanwhile (tasks that ended before the stop reached
        their worker) are still stored; a message that cannot be (the disk is full) does not
        keep the others from being taken, nor the stops from being sent.
        """
        for rank in self._workers:
            self._transport.send(self._abort, rank, Tag.STOP)
        self._stops_sent = True
        deadline = time.monotonic() + (self._abort_grace if self._abort else self.stop_grace)
        backoff = Backoff()
        workers = len(self._workers)
        while self.settled < workers and time.monotonic() < deadline:
            msg = self._transport.poll()
            if msg is None:
                if not self._abort:  # a worker that stops answering, or never said it was ready, is not waited for
                    self._noting(self._apply, self._dispatch.stalled(closing=True))
                backoff.idle()
            else:
                self._noting(self._handle, msg)
        self._noting(self._flush)
        # let the STOPs be taken (not with a rank the run went on without: the job is aborted, and
        # what was sent to it may never be)
        while self._transport.sending and not self.unjoined and time.monotonic() < deadline:
            backoff.idle()

    def _flush(self) -> None:
        """Store everything that arrived and every task still running (``emews resume`` reruns those).
        Trials still waiting for a promotion stay waiting (a stop: ``emews resume`` holds them again;
        at the end of the budget the loop has released them)."""
        if self._group.pending:
            self._group.commit(self._in_flight, 0, closing=self._closing, every_task=True)

    # -- messages from the workers: one handler per tag -------------------------
    def _handle(self, msg: Message) -> bool:
        """Take one message from a worker; whether it carried results (or a worker came to take tasks).
        A worker the run went on without is heard only when it stops (it was sent STOP as all are)."""
        if self.lost_workers and msg.source in self.lost_workers:
            if msg.source not in self._revived:  # it runs again (SIGCONT): its stop is waited for, it can be joined
                self._revived.add(msg.source)
                log.info("worker rank %d answers again: it gets no more tasks and leaves with the others", msg.source)
            if msg.tag is Tag.STOPPED:
                self.stopped_workers.add(msg.source)
            return False
        handler = self._handlers.get(msg.tag)
        return handler(msg.source, msg.payload) if handler is not None else False

    def _on_outcome(self, rank: int, outcomes: Sequence[Outcome]) -> bool:
        self._apply(self._dispatch.ended(rank, outcomes))
        return True

    def _on_stopped(self, rank: int, stopped: WorkerStopped) -> bool:
        """A worker stopped: asked to (the run closes, or failed and sent the stops before it closed),
        or on its own (a signal); then it gets no more tasks and the tasks it held run again (see
        the dispatch's ``stopped``)."""
        self.stopped_workers.add(rank)
        if stopped.error:
            self.worker_errors[rank] = stopped.error
        if stopped.warning:  # lost no work: said, not a failure
            log.warning("%s", stopped.warning)
            print(f"emews: warning: {stopped.warning}", file=sys.stderr, flush=True)
        asked = self._closing or self._stops_sent
        events = self._dispatch.stopped(rank, stopped.unfinished, closing=asked)
        # a team's member may not have started what another did: only a single-rank worker's count
        if self._on_unstarted is not None and not self._gang:  # those it named, and those sent after its stop
            held = [i for event in events if isinstance(event, Unfinished) for i in event.task_ids]
            self._on_unstarted([i for i in held if i != stopped.began])
        self._apply(events)
        return False

    def _on_ready(self, rank: int, _: None) -> bool:
        """A worker is set up and takes tasks from now on."""
        self._apply(self._dispatch.ready(rank))
        return True

    def _on_returned(self, rank: int, task_ids: Sequence[int]) -> bool:
        """A busy worker answered a recall with the tasks it had not started (see the dispatch's
        ``rebalance``)."""
        self._apply(self._dispatch.returned(rank, task_ids))
        return False

    def _on_trial(self, rank: int, message: Any) -> bool:
        reply = self._trials.handle(message, self._in_flight.get(message.trial))
        if reply is not None and not self._stops_sent:
            self._transport.send(reply, rank, Tag.TRIAL_REPLY)
        return False

    # -- what the dispatch decided: one effect per event ------------------------
    def _apply(self, events: list[Event]) -> None:
        effects = self._effects
        for event in events:
            effects[type(event)](event)

    def _send(self, event: Send) -> None:
        if not self._stops_sent:  # nothing may follow a STOP (a cancel for a team still ending)
            self._transport.send(event.payload, event.rank, event.tag)

    def _started(self, event: Started) -> None:
        in_flight = self._in_flight
        for task in event.tasks:
            in_flight[task.id] = task
        if self._rerun:  # a lost worker's task runs again: its attempt counts from now
            again = [t for t in event.tasks if t.id in self._rerun]
            self._rerun.difference_update(t.id for t in again)
            self._group.attempted(again)
        self._group.started(event.tasks, time.perf_counter())
        if self._on_start is not None:
            self._on_start(event.tasks)

    def _ended_tasks(self, event: Ended) -> None:
        in_flight, results, sign = self._in_flight, self._group.results, self._sign
        intercepts, full_disk = self._trials.intercepts, self._full_disk
        no_room: list[tuple[Task, str]] = []
        for outcome in event.outcomes:
            task = in_flight.pop(outcome.task_id)
            if full_disk is not None and outcome.status is not Status.OK and (why := full_disk.why(outcome)):
                no_room.append((task, why))  # the disk's failure, not the point's: no result, no retry
                continue
            if intercepts and self._set_aside(task, outcome):
                continue
            results.append(Result.from_outcome(task, outcome, sign))
        if no_room:
            self._out_of_space(no_room)

    def _out_of_space(self, no_room: list[tuple[Task, str]]) -> None:
        """Tasks that failed because the disk was full are recorded as unfinished (``emews resume``
        runs them again once there is room), and the run stops with the first one's cause
        (:class:`TaskOutOfSpace`) instead of failing every evaluation after it alike."""
        self._group.record([task for task, _ in no_room if not task.attempt])
        for task, why in no_room:
            log.error("task %d failed for want of disk space, left for emews resume: %s", task.id, why)
        first, why = no_room[0]
        raise TaskOutOfSpace(first.id, why)

    def _refused(self, event: Refused) -> None:
        self._group.results.append(Result.from_outcome(event.task, event.outcome, self._sign))

    def _requeue(self, event: Requeue) -> None:
        """Recorded as dispatched (``emews resume`` reruns it), then queued again, first."""
        task = self._in_flight.pop(event.task_id)
        if not task.attempt:
            self._group.record([task])
        self._queues.tasks.appendleft(task)

    def _unfinished(self, event: Unfinished) -> None:
        """A stopped worker's tasks are recorded (``emews resume`` runs them) and, unless the run is
        closing, go to the others."""
        dropped = [self._in_flight.pop(i) for i in event.task_ids if i in self._in_flight]
        self._group.record([t for t in dropped if not t.attempt])
        if not self._closing:
            self._queues.tasks.extendleft(reversed(dropped))

    def _returned(self, event: Returned) -> None:
        """Tasks a worker gave back unstarted are recorded (``emews resume`` runs them) and queued
        again, first and in order, for the idle workers (also while closing: the run drains them)."""
        returned = [self._in_flight.pop(i) for i in event.task_ids if i in self._in_flight]
        if self._on_unstarted is not None:
            self._on_unstarted([t.id for t in returned])
        self._group.record([t for t in returned if not t.attempt])
        self._queues.tasks.extendleft(reversed(returned))

    def _lost(self, event: Lost) -> None:
        """The run goes on without a worker that stopped answering (said in one line): what it held
        runs on the others, first; the task it began counts an attempt, and one that had run before
        (:data:`STALLED_RERUNS`) ends as a timeout instead (it may be what stops its workers)."""
        self.lost_workers.add(event.rank)
        log.warning("%s", event.why)
        print(f"emews: {event.why}", file=sys.stderr, flush=True)
        in_flight = self._in_flight
        held = [in_flight.pop(i) for i in (event.began, *event.unstarted) if i is not None and i in in_flight]
        began = held[0] if held and held[0].id == event.began else None
        if self._on_unstarted is not None:
            self._on_unstarted([t.id for t in held if t is not began])
        self._group.record([t for t in held if not t.attempt])
        if began is not None and began.attempt >= STALLED_RERUNS:
            held.remove(began)
            error = (
                f"its worker (rank {event.rank}) stopped answering while it ran, and it had run before; not run again"
            )
            outcome = Outcome(began.id, Status.TIMEOUT, error=error, rank=event.rank, finished=time.time())
            self._group.results.append(Result.from_outcome(began, outcome, self._sign))
        elif began is not None:
            began.attempt += 1  # stored once it runs again: a stop before that leaves it to resume as it was
            self._rerun.add(began.id)
        self._queues.tasks.extendleft(reversed(held))
        reason = getattr(event.why, "reason", None) or str(event.why)
        rerun = began is not None and began in held
        unstarted = tuple(t.id for t in held if t is not began)
        task = None if began is None else began.id
        self.lost_ranks.append(LostRank(event.rank, time.time(), reason, str(event.why), task, rerun, unstarted))

    def _fatal(self, event: Fatal) -> None:
        raise event.error

    # -- training trials that wait for a promotion ------------------------------
    def _set_aside(self, task: Task, outcome: Outcome) -> bool:
        """A retried task goes back to the queue's front; a paused one is recorded as unfinished
        (``emews resume`` continues it). Whether ``outcome`` was set aside (it is no result)."""
        afterwards = self._trials.intercept(task, outcome)
        if afterwards is Afterwards.RETRY:
            self._queues.tasks.appendleft(task)
        elif afterwards is Afterwards.PAUSED:
            self._group.record([task])
        elif afterwards is Afterwards.WAITS:
            self._waiting[task.id] = (task, outcome)
        return afterwards is not None

    def _promote(self) -> bool:
        """Waiting trials the scheduler promotes go to the front of the queue (ASHA's ``get_job``:
        a promotion before a new point; none once the compute budget is spent); whether there were any."""
        if self._spent:
            return False
        promoted = self._trials.promotable()
        for trial in reversed(promoted):
            task, _ = self._waiting.pop(trial)
            self._trials.promote(task)
            self._queues.tasks.appendleft(task)
        return bool(promoted)

    def _release(self, every: bool) -> None:
        """End waiting trials with their results so far: the least promising one (the optimizer
        waits for a result and nothing else can give it one), or ``every`` one (closing)."""
        while self._waiting:
            trial = self._trials.least_promising()
            task, outcome = self._waiting.pop(trial)
            self._trials.release(trial)
            self._group.results.append(Result.from_outcome(task, outcome, self._sign))
            if not every:
                return

    def _serve_waiting(self, progressed: bool) -> bool:
        """Promote waiting trials after progress; when nothing runs nor is queued and none can be
        promoted, release one (the optimizer waits and nothing else can give it a result) or all
        (closing). Whether one was released."""
        if self._stopping():
            return False
        if progressed:
            self._promote()
        if self._in_flight or self._queues.tasks or self._promote():
            return False
        if not (self._closing or (self._queues.optimizer_waits and not self._group.results)):
            return False
        self._release(every=self._closing)
        return True

    @property
    def idle(self) -> bool:
        """No task runs, none waits to be dispatched and no trial waits for a promotion. Once trials
        pause (the walltime margin, a stop signal) only running tasks count: nothing queued starts
        any more and waiting trials wait across the stop."""
        if self._in_flight:
            return False
        if self._trials.clock.due():
            return True
        return not self._queues.tasks and not self._dispatch.waiting and not self._waiting

    def _stopping(self) -> bool:
        """A stop signal or the walltime: waiting trials are neither promoted nor released (they stay
        waiting for ``emews resume``); only the end of the budget ends them."""
        return self._drain_until is not None or self._abort or self._trials.clock.due()

    # -- the loop --------------------------------------------------------------
    def _loop(self) -> None:
        wakeup = self._queues.new_tasks
        backoff = Backoff(sleep=wakeup.wait)
        spin, first_sleep = backoff.spin, backoff.min_delay  # while tasks are short (or not yet known)
        self._queues.capacity = self._dispatch.capacity  # then kept up to date by the passes that change it
        while True:
            wakeup.clear()
            if self._step():
                backoff.reset()
                continue
            if self._finished():
                return
            if self._drain_until is not None and time.monotonic() >= self._drain_until:
                self._abort = True  # the grace of a stop signal is over: what still runs is aborted
                continue
            if self.all_stopped:
                raise WorkersGone(f"every worker stopped with {len(self._in_flight)} tasks in flight")
            if (self._in_flight or self._queues.tasks) and (stalled := self._dispatch.stalled()):
                self._apply(stalled)  # Lost: the run goes on without a worker; Fatal (the last one): the job ends
            self._pace(backoff, spin, first_sleep)
            backoff.idle()

    def _pace(self, backoff: Backoff, spin: float, first_sleep: float) -> None:
        """How the idle loop waits for the next message, from the tasks' mean run time.

        Short tasks (or none known): spin ``spin`` seconds, then sleep from ``first_sleep``
        doubling up to :meth:`_poll_interval`, so that a round trip is answered at once. Long
        tasks (the interval at :attr:`poll_latency_max`: a mean of 0.4 s or more): sleep that
        interval at once, without spinning (at 100,000 workers a result comes every 0.6 ms,
        so a spin never ended and took a core; a result waits at most 1 ms, 0.25% of its task).
        Group commits gather up to a share of a task's run time (:meth:`GroupCommit.pace`)."""
        mean = self._dispatch.mean_run if self._in_flight else None
        interval = self._poll_interval(mean)
        steady = mean is not None and interval >= self.poll_latency_max
        backoff.max_delay = interval
        backoff.min_delay = interval if steady else first_sleep
        backoff.spin = 0.0 if steady else spin
        self._group.pace(mean)

    def _step(self) -> bool:
        """One pass: take the workers' messages, watch the budget, serve waiting trials, place
        queued tasks, commit a group when due. Whether anything happened."""
        progressed = False
        while (msg := self._transport.poll()) is not None:
            if self._handle(msg):
                progressed = True
        if self._budget is not None and self._spend():
            progressed = True
        if self._waiting and self._serve_waiting(progressed):
            progressed = True
        dispatch, in_flight, tasks, group = self._dispatch, self._in_flight, self._queues.tasks, self._group
        if (tasks or dispatch.watches_running) and self._drain_until is None and self._place():
            progressed = True
        elif not tasks and dispatch.rebalances and self._rebalance():
            progressed = True
        if progressed:  # what the workers hold changed
            self._queues.capacity = dispatch.capacity
            self._progress.busy = dispatch.busy(len(in_flight))
        # ``pending`` first: a pass with nothing received and nothing unrecorded stays cheap
        if group.pending and group.due(starving=dispatch.has_room and not tasks, running=len(in_flight)):
            group.commit(in_flight, len(in_flight), closing=self._closing)
            progressed = True
        return progressed

    def _place(self) -> bool:
        """Queued tasks to the dispatch, and what it starts to the workers (nothing new starts
        once aborting, the compute budget is spent or trials pause: the walltime margin or a
        stop signal); whether anything moved."""
        tasks = self._queues.tasks
        queued = len(tasks)
        # ``_spent`` again: the optimizer may have queued a task since ``_spend`` dropped them
        start = not self._abort and not self._spent and not self._trials.clock.due()
        events = self._dispatch.place(tasks, start=start)
        if events:
            self._apply(events)
        return bool(events) or len(tasks) != queued

    def _rebalance(self) -> bool:
        """Nothing queued: where a worker idles while another holds tasks it has not started, ask
        for them back (not once the run stops dispatching); whether a recall went out."""
        if self._drain_until is not None or self._abort or self._spent:
            return False
        events = self._dispatch.rebalance()
        if events:
            self._apply(events)
        return bool(events)

    def _finished(self) -> bool:
        """Closing, and nothing is left to wait for: aborting, or nothing runs and nothing queued
        can start (a stop signal drains, a spent budget starts nothing)."""
        if not self._closing:
            return False
        if self._abort:
            return True
        queued = bool(self._queues.tasks) or bool(self._dispatch.waiting)
        return not self._in_flight and (not queued or self._drain_until is not None or self._spent)

    def _spend(self) -> bool:
        """Once the compute budget (steps, time) is spent: drop what is queued (nothing new is
        dispatched, no waiting trial promoted; running trials stop at their next report); once nothing
        runs, end the waiting trials with their results, then tell the optimizer (:class:`BudgetReached`
        in its next wait, after the results). Whether it did something."""
        budget = self._budget
        reached = None if budget is None or self._ended else budget.reached()
        if reached is None:
            return False
        self._spent = True
        self._queues.tasks.clear()
        if self._in_flight or self._group.results:
            return False
        if self._waiting:
            self._release(every=True)
        else:
            self._ended = True
            self._queues.end(BudgetReached(reached))
        return True

    @classmethod
    def _poll_interval(cls, mean_run: float | None) -> float:
        """Longest sleep between polls while tasks run: a small fraction of a task's run time
        (a result waits at most that long to be seen and answered), within 100 us and 1 ms."""
        if mean_run is None:
            return cls.poll_latency_max
        return min(cls.poll_latency_max, max(cls.poll_latency_min, mean_run * cls.poll_latency_share))


class WorkersGone(EmewsError, RuntimeError):
    """Every worker stopped on its own (signals) while the run still had work."""
