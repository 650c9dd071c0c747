"""The distributor thread: the only code on the optimizer rank that talks to workers."""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from typing import Callable, Mapping, Sequence

from emews.core.errors import EmewsError
from emews.core.queues import QueuePair
from emews.core.results import Outcome, Result, Task
from emews.runtime.backoff import Backoff
from emews.runtime.compute_budget import BudgetReached, ComputeBudget
from emews.runtime.fail_fast import FailFast
from emews.runtime.progress import Progress
from emews.runtime.slots import WorkerSlots
from emews.store import Store
from emews.runtime.teams import TeamDispatch, TeamEvent
from emews.runtime.transport import Message, Tag, Transport
from emews.runtime.trial_reports import Afterwards, TrialService, WaitingTrial
from emews.runtime.worker import WorkerStopped


class Distributor:
    """Moves tasks from the queue pair to idle workers and results back, storing each result.

    Dynamic load balancing: a worker that returns a result is handed the next
    queued task in the same pass. When there is nothing to do the thread
    spins briefly, then sleeps with back-off (woken early by new tasks); while tasks
    run, its sleeps stay under a small share of their run time, so a result is
    answered with the next task promptly.

    With ``gang`` (tasks may need several ranks, ``task.ranks``) tasks are placed by a
    :class:`~emews.runtime.teams.TeamDispatch` over the workers' ``nodes`` (rank -> host) instead:
    one task per rank at a time, node-aligned, EASY backfill; single-rank runs keep the slots.
    """

    #: seconds to wait for workers to confirm a stop (they may run teardown) / an abort
    stop_grace = 60.0
    abort_grace = 5.0
    #: most tasks a worker may hold while tasks are very short (see WorkerSlots: a worker holds
    #: about 5 ms of work, so this bound only applies to tasks shorter than 20 us). Deep enough
    #: that a worker on an oversubscribed node, which sleeps when idle rather than polling,
    #: still has work queued when it wakes: 32 halved the no-op throughput of ``emews launch``
    prefetch = 256
    #: group commit: results are stored (then delivered) in batches of at most this many
    #: rows or this many seconds, and at once when a worker waits for the optimizer
    commit_rows = 256
    commit_interval = 1e-3
    #: while tasks run, results are looked for at least every ``poll_latency_share`` of a
    #: task's mean run time, within these bounds (seconds): short tasks get a prompt answer,
    #: long ones cost the optimizer rank almost no CPU
    #: a task is recorded in the store's tasks table once it has run this long (seconds), so
    #: short tasks cost one row, not two; a task dispatched less than this before a kill -9 is
    #: not re-run by ``emews resume`` (a stop signal records every running task). A training
    #: trial is recorded earlier, with its first report (``TrialService``)
    record_after = 0.5
    poll_latency_share = 0.0025
    poll_latency_min = 100e-6
    poll_latency_max = 1e-3

    def __init__(self, transport: Transport, queues: QueuePair, worker_ranks: Sequence[int], *,
                 sign: float, progress: Progress, store: Store | None = None,
                 fail_fast: FailFast | None = None,
                 trials: TrialService | None = None, gang: bool = False,
                 nodes: Mapping[int, str] | None = None, waiting: Sequence[WaitingTrial] = (),
                 inline_timeout: float | None = None, budget: ComputeBudget | None = None) -> None:
        self._transport = transport
        self._queues = queues
        self._workers = list(worker_ranks)
        self._sign = sign
        self._progress = progress
        self._store = store
        self._fail_fast = fail_fast  # stops the run when its first results all failed alike
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
        self._in_flight: dict[int, Task] = {}
        self._received: list[Result] = []   # not yet stored nor delivered
        self._dispatched: deque[tuple[float, Task]] = deque()  # (when, task) not yet recorded
        #: trials paused by their scheduler, waiting for a promotion: task id -> (task, outcome so far)
        self._waiting: dict[int, tuple[Task, Outcome]] = {}
        for trial in waiting:  # an earlier run's (``emews resume``)
            self._waiting[trial.task.id] = (trial.task, trial.outcome)
            self._trials.hold(trial.task.id, trial.step)
        # training trials are long, and a promotion must not queue behind a prefetched task
        # (and under a step or time budget: a prefetched task would start after the budget is spent)
        self._slots = WorkerSlots(self._workers,
                                  prefetch=1 if self._trials.scheduler or self._budget else self.prefetch)
        host = socket.gethostname()
        # ``inline_timeout``: members run in the worker ranks with this timeout; a team that cannot end ends the job
        self._teams = TeamDispatch({r: (nodes or {}).get(r, host) for r in self._workers},
                                   inline_timeout=inline_timeout) if gang else None
        self.error: BaseException | None = None
        self.stopped_workers: set[int] = set()
        #: shutdown problems reported by workers (teardown errors), by rank
        self.worker_errors: dict[int, str] = {}

    def start(self) -> "Distributor":
        self._thread.start()
        return self

    @property
    def budget_reached(self) -> str | None:
        """The line saying the compute budget (steps, time) ended the run; ``None`` if it did not."""
        return self._budget.reached() if self._budget is not None and self._spent else None

    @property
    def all_stopped(self) -> bool:
        """Whether every worker confirmed that it finished."""
        return self.stopped_workers.issuperset(self._workers)

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
        for step in (self._loop, self._stop_workers, self._flush_received):
            self._noting(step)

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
        deadline = time.monotonic() + (self.abort_grace if self._abort else self.stop_grace)
        backoff = Backoff()
        while not self.all_stopped and time.monotonic() < deadline:
            msg = self._transport.poll()
            if msg is None:
                backoff.idle()
            else:
                self._noting(self._handle, msg)
        self._noting(self._flush_received)
        while self._transport.sending and time.monotonic() < deadline:  # let the STOPs be taken
            backoff.idle()

    def _flush_received(self) -> None:
        """Store everything that arrived and every task still running (``emews resume`` reruns those).
        Trials still waiting for a promotion stay waiting (a stop: ``emews resume`` holds them again;
        at the end of the budget the loop has released them)."""
        if self._received or self._dispatched:
            received, self._received = self._received, []
            self._commit(received, 0, every_task=True)

    def _handle(self, msg: Message) -> bool:
        """Take one message from a worker; whether it carried results."""
        if self._teams is not None:
            if msg.tag is Tag.OUTCOME:
                for outcome in msg.payload:
                    self._team_event(self._teams.member_done(msg.source, outcome))
                return True
            if msg.tag is Tag.STOPPED and not self._closing:
                self._team_worker_stopped(msg.source, msg.payload)
                return False
        if msg.tag is Tag.OUTCOME:
            in_flight, received, slots = self._in_flight, self._received, self._slots
            intercepts = self._trials.intercepts
            outcome: Outcome
            for outcome in msg.payload:
                task = in_flight.pop(outcome.task_id)
                ran = None if outcome.started is None else (outcome.finished or 0.0) - outcome.started
                slots.release(msg.source, ran)
                if intercepts and self._set_aside(task, outcome):
                    continue
                received.append(Result.from_outcome(task, outcome, self._sign))
            return True
        if msg.tag is Tag.STOPPED:
            self.stopped_workers.add(msg.source)
            stopped: WorkerStopped = msg.payload
            if stopped.error:
                self.worker_errors[msg.source] = stopped.error
            # a worker that stopped on its own (a signal) gets no more tasks; its unfinished ones
            # are recorded (``emews resume`` runs them) and, unless the run is closing, go to the others
            self._slots.retire(msg.source)
            dropped = [self._in_flight.pop(i) for i in stopped.unfinished if i in self._in_flight]
            if self._store is not None:
                self._store.commit([t for t in dropped if not t.attempt])
            if not self._closing:
                self._queues.tasks.extendleft(reversed(dropped))
        elif msg.tag is Tag.TRIAL:
            reply = self._trials.handle(msg.payload, self._in_flight.get(msg.payload.trial))
            if reply is not None and not self._stops_sent:
                self._transport.send(reply, msg.source, Tag.TRIAL_REPLY)
        return False

    def _team_worker_stopped(self, rank: int, stopped: WorkerStopped) -> None:
        """Gang mode: a worker stopped on its own; its team's task runs again, queued tasks now
        too large for the ranks left fail."""
        teams = self._teams
        assert teams is not None
        self.stopped_workers.add(rank)
        if stopped.error:
            self.worker_errors[rank] = stopped.error
        events, too_large = teams.stopped(rank)
        for event in events:
            self._team_event(event)
        for outcome in too_large:
            self._received.append(Result.from_outcome(teams.task(outcome.task_id), outcome, self._sign))

    def _team_event(self, event: TeamEvent | None) -> None:
        """Cancel a failing team's other members; record (or requeue) a task all members ended."""
        if event is None:
            return
        for rank in event.cancel if not self._stops_sent else ():
            self._transport.send(event.task_id, rank, Tag.CANCEL)
        if event.outcome is None:
            return
        task = self._in_flight.pop(event.task_id)
        if event.requeue:  # recorded as dispatched (``emews resume`` reruns it), then queued again
            if self._store is not None and not task.attempt:
                self._store.commit([task])
            self._queues.tasks.appendleft(task)
        elif not (self._trials.intercepts and self._set_aside(task, event.outcome)):
            self._received.append(Result.from_outcome(task, event.outcome, self._sign))

    def _set_aside(self, task: Task, outcome: Outcome) -> bool:
        """A retried task goes back to the queue's front; a paused one is recorded as unfinished
        (``emews resume`` continues it). Whether ``outcome`` was set aside (it is no result)."""
        afterwards = self._trials.intercept(task, outcome)
        if afterwards is Afterwards.RETRY:
            self._queues.tasks.appendleft(task)
        elif afterwards is Afterwards.PAUSED and self._store is not None:
            self._store.commit([task])
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
            self._received.append(Result.from_outcome(task, outcome, self._sign))
            if not every:
                return

    @property
    def idle(self) -> bool:
        """No task runs, none waits to be dispatched and no trial waits for a promotion (once trials
        pause, waiting trials do not count: they wait across the stop)."""
        return not self._in_flight and not self._queues.tasks and not (self._teams and self._teams.waiting) \
            and (not self._waiting or self._trials.clock.due())

    def _stopping(self) -> bool:
        """A stop signal or the walltime: waiting trials are neither promoted nor released (they stay
        waiting for ``emews resume``); only the end of the budget ends them."""
        return self._drain_until is not None or self._abort or self._trials.clock.due()

    def _loop(self) -> None:
        transport, queues, tasks = self._transport, self._queues, self._queues.tasks
        in_flight, slots, teams = self._in_flight, self._slots, self._teams
        wakeup = queues.new_tasks
        first_pending = 0.0  # when the oldest row not yet committed arrived
        backoff = Backoff(sleep=wakeup.wait)
        clock = time.perf_counter
        while True:
            wakeup.clear()
            progressed = False
            while (msg := transport.poll()) is not None:
                if self._handle(msg):
                    progressed = True
            if self._budget is not None and self._spend():
                progressed = True
            if self._waiting and progressed and not self._stopping():
                self._promote()
            if self._waiting and not in_flight and not tasks and not self._stopping() and not self._promote() \
                    and (self._closing or (queues.optimizer_waits and not self._received)):
                self._release(every=self._closing)
                progressed = True
            if teams is not None and self._drain_until is None:
                progressed = self._dispatch_teams(tasks) or progressed
            queues.capacity = slots.capacity
            # ``_spent`` again: the optimizer may have queued a task since ``_spend`` dropped them
            while slots and tasks and not self._abort and self._drain_until is None and not self._spent \
                    and teams is None:
                rank, count = slots.take(len(tasks))
                batch = [tasks.popleft() for _ in range(count)]
                now = clock()
                for task in batch:
                    in_flight[task.id] = task
                    if not task.attempt:
                        self._dispatched.append((now, task))
                transport.send(batch, rank, Tag.TASK)
                progressed = True
            self._progress.busy = min(len(in_flight), len(self._workers)) if teams is None else teams.busy
            received = self._received
            if received and not first_pending:
                first_pending = clock()
            starving = (bool(slots) if teams is None else teams.busy < len(self._workers)) \
                and not tasks  # workers wait for the optimizer's next points
            if (received and (starving or not in_flight or len(received) >= self.commit_rows
                              or clock() - first_pending >= self.commit_interval)) \
                    or (self._dispatched and clock() - self._dispatched[0][0] >= self.record_after):
                self._received = []
                self._commit(received, len(in_flight))
                first_pending = 0.0
                progressed = True
            if progressed:
                backoff.reset()
                continue
            queued = bool(tasks) or bool(teams and teams.waiting)
            if self._closing and (self._abort or (not in_flight and (not queued or self._drain_until is not None
                                                                       or self._spent))):
                return
            if self._drain_until is not None and time.monotonic() >= self._drain_until:
                self._abort = True  # the grace of a stop signal is over: what still runs is aborted
                continue
            if self.all_stopped:
                raise WorkersGone(f"every worker stopped with {len(in_flight)} tasks in flight")
            backoff.max_delay = self._poll_interval(slots.mean_run) if in_flight else self.poll_latency_max
            backoff.idle()

    def _dispatch_teams(self, tasks: deque[Task]) -> bool:
        """Gang mode: queued tasks to the scheduler, and what may start now to its ranks. An inline
        team stranded past its timeout is recorded, then ends the job (:class:`TeamStranded`)."""
        teams = self._teams
        assert teams is not None
        events, stranded = teams.stranded()
        for event in events:
            self._team_event(event)
        if stranded is not None:
            raise stranded
        progressed = False
        if tasks:
            for outcome in teams.take(tasks):
                self._received.append(Result.from_outcome(teams.task(outcome.task_id), outcome, self._sign))
            progressed = True
        if self._abort or self._spent:
            return progressed
        send = self._transport.send
        now = time.perf_counter()
        for task in teams.dispatch(lambda payload, rank: send(payload, rank, Tag.TASK)):
            self._in_flight[task.id] = task
            if not task.attempt:
                self._dispatched.append((now, task))
            progressed = True
        return progressed

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
        if self._in_flight or self._received:
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

    def _commit(self, results: list[Result], busy: int, every_task: bool = False) -> None:
        """Store a batch durably (with the tasks that have run ``record_after`` seconds, or all
        running ones when ``every_task``), then hand it to the optimizer: what it sees is on disk."""
        running = self._running_tasks(every_task)
        if self._store is not None:
            self._store.commit(running, results)
        if results:
            self._progress.record(results, min(busy, len(self._workers)))
            if self._fail_fast is not None and not self._closing:
                self._fail_fast.see(results)  # FailedFast: stored, not delivered; the run stops
            self._queues.deliver(results)


    def _running_tasks(self, every_task: bool) -> list[Task]:
        """Tasks dispatched about ``record_after`` seconds ago (all when ``every_task``) that still run."""
        dispatched, in_flight, out = self._dispatched, self._in_flight, []
        # half the age: a commit takes a quarter-second's worth of tasks at once, not one
        # task per loop as each reaches the age
        horizon = time.perf_counter() - self.record_after / 2
        while dispatched and (every_task or dispatched[0][0] <= horizon):
            task = dispatched.popleft()[1]
            if task.id in in_flight:
                out.append(task)
        return out


class WorkersGone(EmewsError, RuntimeError):
    """Every worker stopped on its own (signals) while the run still had work."""
