"""The optimizer rank's side of training trials: store each report, ask the scheduler, answer.

Runs on the distributor thread (it is called from the distributor's message handler): a
report is stored first (the ``reports`` table), then the scheduler decides. A PBT exploit
is turned into a lineage row and the running task's new parameters, provided the trial it
clones has a durable checkpoint of its own since its last clone (otherwise the trial simply
continues, and the scheduler is told). A trial the scheduler
pauses (ASHA's promotion rule) ends its task and *waits*: the distributor holds its outcome
until the scheduler promotes it (it runs again, from its checkpoint) or releases it. A waiting
trial stays waiting across a stop (walltime, stop signal, ``kill -9``): its outcome is stored
(``waits``) and ``emews resume`` holds it again (:meth:`TrialService.resumed_wait`).
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from emews.core.direction import Direction
from emews.core.results import Outcome, Status, StoredReport, Task, reports_before_ends
from emews.objective.function import outcome_from_return
from emews.runtime.compute_budget import ComputeBudget
from emews.runtime.walltime_pause import PauseClock
from emews.store import DURABLE, Store
from emews.training.checkpoints import remove_inside
from emews.training.messages import CONTINUE, Action, CheckpointsDurable, Decision, Reply, Report, RestoreRequest
from emews.training.retention import Retainer, Retention
from emews.training.schedulers import TrialScheduler

log = logging.getLogger("emews")


class Afterwards(Enum):
    """What becomes of a task whose outcome is not a result."""

    RETRY = "retry"  # crashed or timed out: it runs again, from its checkpoint
    PAUSED = "paused"  # paused at a report: it stays unfinished, for ``emews resume``
    WAITS = "waits"  # paused by the scheduler: it waits for a promotion (or its release)
    DROPPED = "dropped"  # its pool lost the task's lease: another pool runs it, no result here


PAUSE = Decision(Action.PAUSE)
STOP = Decision(Action.STOP)
#: the default retention: every checkpoint is kept
KEEP_ALL = Retention()


@dataclass(slots=True)
class WaitingTrial:
    """A trial of an earlier run that waits for a promotion: its task, the outcome its task ended
    with (its result if it is never promoted) and the step it paused at."""

    task: Task
    outcome: Outcome
    step: int


class TrialService:
    """Answers the trial messages of running tasks (``store`` ``None``: nothing is kept)."""

    def __init__(
        self,
        store: Store | None,
        scheduler: TrialScheduler | None = None,
        *,
        metric: str = "value",
        direction: str | Direction = Direction.MINIMIZE,
        retention: Retention = KEEP_ALL,
        retries: int = 0,
        clock: PauseClock | None = None,
        budget: ComputeBudget | None = None,
    ) -> None:
        self.store = store
        self.budget = budget  # counts the steps reported; once it is spent, every trial stops
        self.retention = retention
        self.retries = retries
        self.clock = clock or PauseClock(None)
        self.paused: dict[int, int] = {}  # task -> the step it paused at (walltime, stop signal)
        self.waiting: dict[int, int] = {}  # task -> the step its scheduler paused it at
        self._held: dict[int, int] = {}  # trials that wait on the optimizer rank -> their step
        self.scheduler = scheduler
        self._objective_metric = metric
        self._recorded: set[int] = set()  # tasks this run wrote to ``tasks`` with a report
        self._waited: set[int] = set()  # trials the rebuilt scheduler has waiting for a promotion
        self._metric = scheduler.metric if scheduler is not None and scheduler.metric else metric
        #: the workflow key that names the metric reports are ranked by (said when a report lacks it)
        self._metric_key = "trial_scheduler.options.metric" if self._metric != metric else "objective.metric"
        self._said_missing = False
        self._sign = Direction.of(scheduler.mode if scheduler is not None and scheduler.mode else direction).sign
        self._attempts: dict[int, int] = {}  # task id -> failed attempts kept
        #: trial -> the stop or complete it was answered first: its later reports (an objective that
        #: did not wait, or did not break) reach no scheduler and get that answer again
        self._ends: dict[int, Decision] = {}
        self._said_unwritten = False  # a checkpoint that could not be written was said on stderr
        self.rebuilt_seq = 0  # the seq of the last report :meth:`rebuild` replayed
        self._retainer: Retainer | None = None
        #: trials with a checkpoint staged in this run: when their task's run ends, those never written are lost
        self._staging: set[int] = set()
        self._handlers: dict[type, Callable[[Any, Task | None], Reply | None]] = {
            Report: self._report,
            RestoreRequest: self._restore,
            CheckpointsDurable: self._durable,
        }

    def rebuild(self) -> int:
        """Replay the stored reports into the scheduler (``emews resume``), each trial with the
        parameters it started with, but none a trial made after it was answered stop or complete
        (the run gave those to no scheduler); how many were replayed."""
        if self.store is None or self.scheduler is None:
            return 0
        reports = self.store.reports()
        self.rebuilt_seq = reports[-1].seq if reports else 0  # the last report the scheduler took in
        ends = self.store.first_ends()
        self._ends = {trial: Decision(Action(end.action)) for trial, end in ends.items()}
        reports = reports_before_ends(reports, ends)
        exploits = {
            row["report"]: Decision(Action.EXPLOIT, row["new_params"], row["donor"]) for row in self.store.lineage()
        }  # PBT replays them as they were made
        params = self.store.started_params()
        undecided = self._undecided(reports)
        if undecided is None:
            self.scheduler.rebuild(reports, params, self.store.promotions(), self.store.ended(), exploits)
        else:  # the same calls, in the same order, the last report's decision kept
            self.scheduler.rebuild(reports[:-1], params, exploits=exploits)
            self._decide_again(undecided, params.get(undecided.trial, {}))
            self.scheduler.rebuild((), params, self.store.promotions(), self.store.ended())
        self._waited = set(self.scheduler.waiting())
        return len(reports)

    def _undecided(self, reports: list[StoredReport]) -> StoredReport | None:
        """The run's last report, when it may have been stored and never decided (``kill -9`` between
        the two; a report answered continue stores no decision either): its trial answered nothing
        there. Only where the replay of a report is :meth:`~TrialScheduler.on_report` (a scheduler that
        exploits replays the exploit stored, and draws none)."""
        scheduler = self.scheduler
        if not reports or reports[-1].seq != self.rebuilt_seq or scheduler is None or scheduler.exploits:
            return None
        if type(scheduler).replay is not TrialScheduler.replay:
            return None
        assert self.store is not None
        state = self.store.trial_state(reports[-1].trial)
        return reports[-1] if state is not None and not state.action else None

    def _decide_again(self, report: StoredReport, params: Any) -> None:
        """Replay the last report keeping its decision, which the run was making when it was killed
        (the scheduler had taken in the same reports): a stop or complete is the trial's end, stored as
        if answered then, so its task, run again, is told the same at its first report. Was: the replay's
        decision was dropped, and the report of that step again found the trial in its rung (ASHA let
        it go on). A decision the run made is replayed to the same one: continue stores nothing."""
        assert self.scheduler is not None and self.store is not None
        if self.scheduler.diverged(report.metrics):
            decision = STOP  # as take_in: the run stopped it without asking the scheduler
        else:
            decision = self.scheduler.on_report(report.trial, report.step, report.metrics, params)
        if decision.action in (Action.STOP, Action.COMPLETE):
            self._ends[report.trial] = decision
            self.store.add_decision(report.trial, report.step, decision.action.value, report.seq)
            log.info(
                "trial %s: its report of step %s is answered %s on resume",
                report.trial,
                report.step,
                decision.action.value,
            )

    def resumed_wait(self, task: Task) -> WaitingTrial | None:
        """Whether ``task``, unfinished in the store, waits for a promotion (the rebuilt scheduler has
        it paused): then it is held again, not run. Its outcome is the one its task ended with, or,
        when the run stopped before that arrived, its last report's metrics as a ``run`` that returns
        nothing has them (a NaN or infinite metric is a failure, never ``ok``)."""
        if self.store is None or task.id not in self._waited:
            return None
        reports = self.store.reports(task.id)
        if not reports:
            return None
        last, stored = reports[-1], self.store.last_wait(task.id)
        if stored is not None and stored[0] >= last.step:
            return WaitingTrial(task, stored[1], stored[0])
        # as a ``run`` that returns nothing: its last report is its result (a NaN one no success)
        outcome = outcome_from_return(task.id, dict(last.metrics), self._objective_metric)
        if outcome.status is not Status.OK:
            outcome.error = f"the run stopped as this trial paused; its last report as its result: {outcome.error}"
        # stored as if its task had ended there: never promoted, it ended stopped early (results.csv)
        self.store.add_wait(task.id, last.step, outcome)
        return WaitingTrial(task, outcome, last.step)

    def hold(self, trial: int, step: int) -> None:
        """``trial`` (of an earlier run) waits for a promotion since ``step``, its task held by the distributor."""
        self._held[trial] = step

    #: how an attempt may end and still be run again (``task.retries``)
    RETRYABLE = (Status.CRASHED, Status.TIMEOUT)

    @property
    def intercepts(self) -> bool:
        """Whether outcomes are to be seen here: some may not be results (retries configured, trials
        paused), or a scheduler is told which trials ended."""
        return bool(self.retries or self.paused or self.waiting or self._staging or self.scheduler is not None)

    def intercept(self, task: Task, outcome: Outcome) -> Afterwards | None:
        """``None``: the outcome is the task's result; else what happens to the task instead."""
        self.settle(task.id)
        waits = self.waiting.pop(task.id, None)
        step = self.paused.pop(task.id, None)
        if step is not None:
            if self.store is not None:
                self.store.add_pause(task.id, step)
            return Afterwards.PAUSED
        if waits is not None and outcome.status is Status.OK:
            self._held[task.id] = waits
            if self.store is not None:
                self.store.add_wait(task.id, waits, outcome)
            return Afterwards.WAITS
        if self.retries and self._retry(task, outcome, self.retries):
            return Afterwards.RETRY
        if self.scheduler is not None:
            self.scheduler.ended(task.id)
        return None

    def settle(self, trial: int) -> None:
        """``trial``'s task ended this run of it (its checkpoints flushed, or its process dead): its
        staged checkpoints whose file is not there will never be written (lost: not restored, not
        listed by ``emews checkpoints``, which counts them in a note)."""
        if trial in self._staging and self.store is not None:
            self._staging.discard(trial)
            if lost := self.store.mark_lost([trial]):
                log.info("trial %s: %s checkpoint(s) never written (its task ended first)", trial, lost)

    def _retry(self, task: Task, outcome: Outcome, limit: int) -> bool:
        """Whether ``task`` runs again after ``outcome`` (crashed or timed out, fewer than ``limit``
        retries so far); the failed attempt is kept in the store. Its ``ctx.restore()`` then
        returns its newest durable checkpoint."""
        if outcome.status not in self.RETRYABLE:
            return False
        done = self._attempts.get(task.id)
        if done is None:
            done = 0 if self.store is None else self.store.attempts(task.id)
        if done >= limit:
            return False
        self._attempts[task.id] = done + 1
        if self.store is not None:
            self.store.add_attempt(task, done + 1, outcome)
        return True

    def handle(self, message: Any, task: Task | None) -> Reply | None:
        """The reply to send back (``None``: the message wants none)."""
        return self._handlers[type(message)](message, task)

    def _report(self, report: Report, task: Task | None) -> Reply:
        if report.failed:
            self._say_unwritten(report.trial, report.failed)
        seq = self._store_report(report, task)
        if self.budget is not None:
            self.budget.count(report.trial, report.step)
        decision = self._ends.get(report.trial)
        if decision is None:
            decision = self._decide(report, task, seq)
            if decision.action in (Action.STOP, Action.COMPLETE):
                self._ends[report.trial] = decision
        if decision.action is not Action.CONTINUE and self.store is not None:
            self.store.add_decision(report.trial, report.step, decision.action.value, seq)
        return Reply(report.session, decision)

    def _store_report(self, report: Report, task: Task | None) -> int:
        """Store ``report`` (and its newly durable checkpoints); its sequence number (0: no store)."""
        if not self._said_missing and self._metric not in report.metrics:
            self._say_missing(report)
        if self.store is None:
            return 0
        metric = report.metrics.get(self._metric)
        value = float(metric) if isinstance(metric, (int, float)) and not isinstance(metric, bool) else None
        # a NaN or an infinity (a diverged model) ranks no checkpoint: not the best (load_best, retention)
        loss = self._sign * value if value is not None and math.isfinite(value) else None
        # a task not yet in ``tasks`` is recorded with its first report: its id is taken from now on
        record = task if task is not None and not task.attempt and task.id not in self._recorded else None
        seq = self._add_report(report, value, loss, record)
        if record is not None:
            self._recorded.add(record.id)
        if report.checkpoint is not None:
            self._staging.add(report.trial)
        if report.durable:
            self._retain(report.durable)
        return seq

    def _say_unwritten(self, trial: int, failed: tuple[str, ...]) -> None:
        """Checkpoints of ``trial`` that could not be written (a full disk, a quota): in the log, and the
        first of the run on stderr too, with what it means and what to do (the trial trains on)."""
        for failure in failed:
            log.warning("trial %s: checkpoint not written: %s", trial, failure)
        if self._said_unwritten:
            return
        self._said_unwritten = True
        print(
            f"emews: trial {trial}: checkpoint not written: {failed[0]}; the trial trains on, but a retry or "
            "emews resume continues it from its newest checkpoint written: free space where the experiment is "
            "(or raise the quota, or the file size limit: ulimit -f); later failures: emews.log",
            file=sys.stderr,
            flush=True,
        )

    def _add_report(self, report: Report, metric: float | None, loss: float | None, record: Task | None) -> int:
        """The store's :meth:`~emews.store.base.Store.add_report` (a pool's service adds its lease check)."""
        assert self.store is not None
        return self.store.add_report(report, metric, loss, record)

    def _say_missing(self, report: Report) -> None:
        """Once a run: a report without the metric (a misspelt name ranks nothing, silently)."""
        self._said_missing = True
        line = (
            f"emews: trial {report.trial} reported step {report.step} without the metric {self._metric!r} "
            f"({self._metric_key}; it reported {', '.join(sorted(map(str, report.metrics))) or 'no metrics'}): "
            "reports without it are not ranked ("
            + ("the trial scheduler lets the trial go on, " if self.scheduler is not None else "")
            + "its checkpoint has no metric for load_best and keep_best)"
        )
        log.warning(line)
        print(line, file=sys.stderr, flush=True)

    def _decide(self, report: Report, task: Task | None, seq: int) -> Decision:
        """The scheduler's decision on ``report``, overruled by a spent budget or the walltime."""
        decision = CONTINUE
        if self.scheduler is not None and self.scheduler.diverged(report.metrics):
            return STOP  # a NaN or an infinity: the model diverged, no rule can make more of it
        if self.scheduler is not None:
            decision = self.scheduler.on_report(
                report.trial, report.step, report.metrics, {} if task is None else task.params
            )
        exploits = decision.action is Action.EXPLOIT
        if (
            self.budget is not None
            and self.budget.reached() is not None
            and decision.action in (Action.CONTINUE, Action.EXPLOIT, Action.PAUSE)
        ):
            decision = STOP  # the run's compute budget is spent: the trial ends with its result so far
        elif decision.action is Action.PAUSE:  # waits for a promotion, across a stop too
            self.waiting[report.trial] = report.step
        elif self.clock.due() and decision.action in (Action.CONTINUE, Action.EXPLOIT):
            # the allocation ends soon: the task stays unfinished and ``emews resume`` continues it
            self.paused[report.trial] = report.step
            decision = PAUSE
        elif decision.action is Action.EXPLOIT:
            decision = self._exploit(report, decision, task, seq)
        if exploits and decision.action is not Action.EXPLOIT and self.scheduler is not None:
            self.scheduler.exploit_dropped(report.trial)  # no lineage row: as a rebuild replays it
        return decision

    # -- trials that wait for a promotion (the distributor holds their tasks) -----
    def promotable(self) -> list[int]:
        """Held trials the scheduler promotes now, the first to run first."""
        if self.scheduler is None or not self._held:
            return []
        return [t for t in self.scheduler.promotable() if t in self._held]

    def promote(self, task: Task) -> None:
        """``task`` runs again from its checkpoint; with the scheduler's ``resource`` its
        parameter is raised to what the promotion gives it."""
        assert self.scheduler is not None
        step = self._held.pop(task.id)
        resource = self.scheduler.promote(task.id)
        name = self.scheduler.resource
        raised: dict[str, Any] | None = None  # the new parameters, when the promotion changed them
        if name is not None and resource is not None:
            task.params = raised = {**task.params, name: resource}
        if self.store is not None:
            self.store.add_promotion(task.id, step, resource, raised)

    def least_promising(self) -> int:
        """The held trial to end first when nothing else can run."""
        assert self.scheduler is not None
        return self.scheduler.least_promising(self._held)

    def release(self, trial: int) -> None:
        """``trial`` ends where it paused: its outcome becomes its result."""
        self._held.pop(trial, None)
        if self.scheduler is not None:
            self.scheduler.release(trial)

    def _exploit(self, report: Report, decision: Decision, task: Task | None, seq: int) -> Decision:
        """The exploit made (its lineage row stored), or ``CONTINUE`` where it cannot be: the donor
        has no durable checkpoint of its own since its last clone that it trained past. Its newest
        restorable one would then be the checkpoint it was cloned from, another trial's (the
        exploiting trial's own, when it was the donor's donor): never cloned. A checkpoint of the
        donor's latest report may be its final one (its task may return before its result reaches
        this rank): a clone of it would have nothing left to train."""
        donor = decision.clone_from
        if self.store is None or donor is None or donor == report.trial or task is None or decision.params is None:
            return CONTINUE
        checkpoint = self.store.latest_durable(donor, trained_past=True)
        if checkpoint is None or checkpoint.trial != donor:
            return CONTINUE
        self.store.add_lineage(report.trial, report.step, donor, checkpoint.id, task.params, decision.params, seq)
        task.params = dict(decision.params)
        return decision

    def _restore(self, request: RestoreRequest, task: Task | None) -> Reply:
        if self.store is None:
            return Reply(request.session)
        self.store.mark_durable(request.durable)
        if request.durable:
            self._retain(request.durable)
        return Reply(request.session, candidates=self.store.candidates(request.trial))

    def _durable(self, message: CheckpointsDurable, task: Task | None) -> None:
        if message.failed:
            self._say_unwritten(message.trial, message.failed)
        if self.store is not None and message.durable:
            self.store.mark_durable(message.durable)
            self._retain(message.durable)
        return None

    def _retain(self, paths: Sequence[str]) -> None:
        """Delete the durable checkpoints the retention policy no longer keeps, looking at the newly
        durable ``paths`` (and, the first time, at what earlier runs left)."""
        if self.retention.keeps_all or self.store is None:
            return
        if self._retainer is None:
            self._retainer = Retainer(self.retention)
            rows = self.store.checkpoints((DURABLE,))
        else:
            rows = self.store.durable_at(paths)
        self._delete(self._retainer.add(rows, self.store.pinned()))

    def _delete(self, ids: Iterable[int]) -> None:
        """Delete the files of the checkpoints ``ids`` (inside the experiment only) and mark them deleted."""
        doomed = set(ids)
        if not doomed or self.store is None:
            return
        for row in self.store.checkpoints_by_id(doomed):
            if self.store.root is None or not remove_inside(row.path, self.store.root):
                log.warning(
                    "retention: not deleting %s: outside the experiment directory %s", row.path, self.store.root
                )
        self.store.mark_deleted(sorted(doomed))
