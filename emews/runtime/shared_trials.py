"""A pool's trial service: its scheduler decides with every pool's reports (docs/postgres.md, "Pools").

Each pool's distributor answers its own trials' reports (no round trip to the optimizer's node);
before deciding on one, the scheduler takes in, in the store's order, the reports other pools
stored since it last looked (:meth:`~emews.training.schedulers.TrialScheduler.replay`, as a
resumed run does), so a rung holds every pool's trials. A scheduler whose decisions depend on
more than the reports (promotions, PBT's exploits) does not span pools
(:attr:`~emews.training.schedulers.TrialScheduler.spans_pools`).

Once told its pool (:meth:`SharedTrials.lease_to`), it stores a report only while that pool still
holds the task in the shared queue (checked in the report's own transaction, the task's row
locked: :meth:`~emews.store.base.Store.add_report`'s ``holder``): a pool that lost the lease
(frozen, or cut off, past ``store.lease``; another pool took the task) has its report answered
stop, not stored, and the task's outcome dropped (no result), so the trial trains on one pool
only. The checkpoint files its refused reports wrote are deleted once the trial ended (no row
names them: a restore never sees them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from emews.core.results import Outcome, Task
from emews.runtime.trial_reports import STOP, Afterwards, TrialService
from emews.store.base import LeaseLost
from emews.training.checkpoints import remove_inside
from emews.training.messages import CheckpointsDurable, Decision, Reply, Report

log = logging.getLogger("emews")


class SharedTrials(TrialService):
    """A :class:`TrialService` on the shared store whose scheduler also learns other pools' reports."""

    #: a missing seq this far below the newest is taken as an insert rolled back, not one in flight
    GAP_PATIENCE = 1000
    #: retention looks again at the trials of this many checkpoints ranked just below the best K
    PUSHED_OUT = 8

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._low = 0  # every report with a seq up to this one is in the scheduler
        self._known: set[int] = set()  # seqs above ``_low`` in the scheduler (a gap: one not committed yet)
        self._params: dict[int, Any] = {}  # trial -> the parameters it started with (other pools' trials)
        self._pool: int | None = None  # the pool whose leases a report needs (None: not checked)
        self._dropped: Callable[[int], None] = lambda task: None
        self._lost: set[int] = set()  # tasks whose lease this pool lost: answered stop, no result
        self._refused: dict[int, set[str]] = {}  # lost task -> the checkpoint paths of its refused reports

    def lease_to(self, pool: int, dropped: Callable[[int], None]) -> None:
        """Store reports only of tasks ``pool`` still holds; ``dropped(task)`` is called when a
        task whose lease it lost ended here (its outcome is no result)."""
        self._pool, self._dropped = pool, dropped

    @property
    def intercepts(self) -> bool:
        return bool(self._lost) or super().intercepts

    def intercept(self, task: Task, outcome: Outcome) -> Afterwards | None:
        if task.id not in self._lost:
            return super().intercept(task, outcome)
        self._lost.discard(task.id)
        self.settle(task.id)
        self.paused.pop(task.id, None)
        self.waiting.pop(task.id, None)
        self._remove_refused(task.id)  # the trial ended: its checkpoint writes are done
        self._dropped(task.id)
        return Afterwards.DROPPED

    def _report(self, report: Report, task: Task | None) -> Reply:
        if report.trial not in self._lost:
            try:
                return super()._report(report, task)
            except LeaseLost:
                self._lose(report.trial)
        if report.checkpoint is not None:
            self._refused.setdefault(report.trial, set()).add(report.checkpoint.path)
        return Reply(report.session, STOP)

    def _add_report(self, report: Report, metric: float | None, loss: float | None, record: Task | None) -> int:
        assert self.store is not None
        return self.store.add_report(report, metric, loss, record, holder=self._pool)

    def _lose(self, trial: int) -> None:
        """``trial``'s task is another pool's now: its reports are refused from now on (said once)."""
        self._lost.add(trial)
        log.warning(
            "pool %s lost the lease of task %s (another pool runs it): its report is not stored, "
            "the trial stops and the pool drops the task without a result",
            self._pool,
            trial,
        )

    def _durable(self, message: CheckpointsDurable, task: Task | None) -> None:
        refused = self._refused.get(message.trial, set())
        kept = tuple(p for p in message.durable if p not in refused)
        return super()._durable(CheckpointsDurable(message.trial, message.session, kept), task)

    def _retain(self, paths: Sequence[str]) -> None:
        """Retention over every pool's checkpoints, read from the store at each pass (a pool's own
        view misses what other pools wrote: a trial that moved here from another pool kept that
        pool's checkpoints, and each pool kept its own best K): the durable checkpoints of the
        trials of the newly durable ``paths``, and of the trials whose checkpoints rank just
        below the experiment's best K (one of them was pushed out now, by this pass or by another
        pool's at the same moment: :attr:`PUSHED_OUT`), with the best K."""
        if self.retention.keeps_all or self.store is None:
            return
        top = self.retention.keep_best_experiment or 0
        best = self.store.best_durable(top + self.PUSHED_OUT if top else 0)
        trials = {row.trial for row in self.store.durable_at(paths)} | {row.trial for row in best[top:]}
        rows = {row.id: row for row in [*self.store.durable_of(trials), *best[:top]]}
        # a trial seen only through the best K has only its best K here: those are kept, nothing else of it judged
        self._delete(self.retention.to_delete(rows.values(), self.store.pinned()))

    def _remove_refused(self, trial: int) -> None:
        """Delete the checkpoint files ``trial``'s refused reports wrote, but none a stored row
        names (another pool's checkpoint of the same step and serial, written at the same path)."""
        paths = self._refused.pop(trial, set())
        if not paths or self.store is None or self.store.root is None:
            return
        named = {Path(row.path) for row in self.store.checkpoints_at(sorted(paths))}
        for path in sorted(paths):
            if Path(path) not in named and not remove_inside(path, self.store.root):
                log.warning("not deleting %s: outside the experiment directory %s", path, self.store.root)

    def rebuild(self) -> int:
        count = super().rebuild()
        self._low = self.rebuilt_seq  # from the same read (a report committed after it comes by catching up)
        return count

    def _decide(self, report: Report, task: Task | None, seq: int) -> Decision:
        self._catch_up(seq)
        decision = super()._decide(report, task, seq)
        self._mark(seq)
        return decision

    def _catch_up(self, upto: int) -> None:
        """Replay the reports other pools stored before ``upto`` that the scheduler has not seen:
        those after the last seq it saw, and any that were not yet committed when it last looked."""
        if self.store is None or self.scheduler is None:
            return
        foreign = [r for r in self.store.reports_between(self._low, upto) if r.seq not in self._known]
        unknown = sorted({r.trial for r in foreign} - self._params.keys())
        if unknown:
            self._params.update(self.store.task_params(unknown))
        ends = self.store.first_ends() if foreign else {}
        for stored in foreign:
            end = ends.get(stored.trial)
            if end is None or end.took_in(stored):  # after its stop or complete it reached no scheduler
                self.scheduler.take_in(stored, self._params.get(stored.trial, {}), None)
            self._mark(stored.seq)
        if upto - self._low > self.GAP_PATIENCE:  # long-missing seqs were rolled back
            self._known = {s for s in self._known if s > upto - self.GAP_PATIENCE}
            self._low = upto - self.GAP_PATIENCE

    def _mark(self, seq: int) -> None:
        """``seq`` is in the scheduler; move the low-water mark over every seq known in a row."""
        self._known.add(seq)
        while self._low + 1 in self._known:
            self._low += 1
            self._known.discard(self._low)
