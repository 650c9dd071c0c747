"""What travels between the optimizer, the distributor and the workers.

Plain slotted dataclasses: they are built once per evaluation on the hot path,
where a frozen dataclass costs several times as much to create.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from operator import attrgetter
from typing import Any, TypeVar

_T = TypeVar("_T")


def _pickled_by_fields(cls: type[_T]) -> type[_T]:
    """Pickle ``cls`` as its constructor and field values: half the cost of the default for a
    slotted dataclass, and these cross between ranks once per evaluation. Fields marked
    ``metadata={"local": True}`` (last, with defaults) stay on the rank that made the object."""
    values = attrgetter(*(f.name for f in fields(cls) if not f.metadata.get("local")))  # type: ignore[arg-type]  # a dataclass by use

    def __reduce__(self: Any) -> tuple:
        return cls, values(self)

    cls.__reduce__ = __reduce__  # type: ignore[method-assign]
    return cls


class Status(str, Enum):
    """How an evaluation ended."""

    OK = "ok"
    FAILED = "failed"  # the objective raised, or returned NaN, inf or a non-number
    CRASHED = "crashed"  # the process running the objective died (segfault, OOM kill)
    TIMEOUT = "timeout"  # the objective ran past the task timeout and was killed


@_pickled_by_fields
@dataclass(slots=True)
class Task:
    """One evaluation to run: a point of the space and its bookkeeping."""

    id: int
    params: Mapping[str, Any]
    seed: int
    submitted: float
    attempt: int = 0  # > 0: re-run after the run that started it stopped (already in the store)
    #: worker ranks it runs on at once (emews.core.task_size); the distributor's alone: a member of a
    #: multi-rank task learns its team from a TeamTask, so the wire format of a task is unchanged
    ranks: int = field(default=1, metadata={"local": True})
    #: why it cannot run (its ``task.ranks`` gave no size): the distributor fails it with this cause
    refused: str | None = field(default=None, metadata={"local": True})
    #: higher first, in the order put within one priority (the pools' shared queue orders by it)
    priority: float = field(default=0.0, metadata={"local": True})


def utf8_text(text: str) -> str:
    """``text`` as UTF-8 holds it: a lone surrogate (a file name that is not UTF-8, as Python
    decodes it) as its ``\\udcXX`` escape; the store, the CSV and the terminal then take it."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


@_pickled_by_fields
@dataclass(slots=True)
class Outcome:
    """What a worker reports for one task (before the optimizer's view is added)."""

    task_id: int
    status: Status
    value: float | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    rank: int | None = None
    host: str | None = None
    started: float | None = None
    finished: float | None = None
    #: the world ranks a multi-rank task's team held, team rank 0 first (set by the distributor;
    #: ``None``: the task ran on ``rank`` alone)
    team: tuple[int, ...] | None = field(default=None, metadata={"local": True})

    def __post_init__(self) -> None:
        if self.error is not None:
            self.error = utf8_text(self.error)


def not_finite(value: float | None) -> str | None:
    """How a value no optimizer can rank as a loss is said (``NaN``, ``inf``, ``-inf``: a diverged
    model); ``None`` for a finite number or no value."""
    if value is None or math.isfinite(value):
        return None
    return "NaN" if math.isnan(value) else f"{value:g}"


@dataclass(slots=True)
class Result:
    """A finished evaluation as the optimizer sees it.

    ``objective`` is the metric as the objective returned it; ``loss`` is the
    same number signed so that smaller is always better (``inf`` when the
    evaluation did not succeed), which is what optimizers minimize.
    """

    id: int
    params: Mapping[str, Any]
    status: Status
    objective: float | None
    loss: float
    metrics: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None
    rank: int | None = None
    host: str | None = None
    submitted: float | None = None
    started: float | None = None
    finished: float | None = None
    team: tuple[int, ...] | None = None  # the ranks a multi-rank task's team held (``Outcome.team``)
    seed: int | None = None  # the task's ``ctx.seed`` (``Task.seed``; ``None``: not known)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def from_outcome(cls, task: Task, outcome: Outcome, sign: float) -> Result:
        """The result of ``task``'s ``outcome``; one said ok with a value that is not finite (a NaN, an
        infinity: no optimizer can rank it) is a failed result, on every path that ends a task."""
        status, error = outcome.status, outcome.error
        said = not_finite(outcome.value)
        if status is Status.OK and said is not None:
            status, error = Status.FAILED, error or f"objective returned {said}"
        ok = status is Status.OK and outcome.value is not None
        return cls(
            id=task.id,
            params=task.params,
            status=status,
            objective=outcome.value,
            loss=sign * outcome.value if ok and outcome.value is not None else math.inf,
            metrics=outcome.metrics,
            error=error,
            rank=outcome.rank,
            host=outcome.host,
            submitted=task.submitted,
            started=outcome.started,
            finished=outcome.finished,
            team=outcome.team,
            seed=task.seed,
        )


@dataclass(frozen=True, slots=True)
class StoredReport:
    """A report as the store keeps it (``evaluator.reports()``; what schedulers are rebuilt from)."""

    seq: int  # arrival order over the whole experiment
    trial: int
    step: int
    metrics: Mapping[str, Any]
    time: float


@dataclass(frozen=True, slots=True)
class TrialEnd:
    """The report a trial's scheduler first answered ``stop`` or ``complete``: its step, the action,
    and its seq (``report``; ``None`` in a store written before decisions named their report, where
    it is read as the trial's first report of ``step``)."""

    step: int
    action: str
    report: int | None = None

    def is_at(self, report: StoredReport) -> bool:
        """Whether ``report`` (of the trial) is the one that was answered."""
        return report.seq == self.report if self.report is not None else report.step == self.step

    def took_in(self, report: StoredReport) -> bool:
        """Whether the scheduler saw ``report`` (of the trial): it came no later than the end (by
        step in an older store: a retried step after it is then not told from the one answered)."""
        return report.seq <= self.report if self.report is not None else report.step <= self.step


def reports_before_ends(reports: Sequence[StoredReport], ends: Mapping[int, TrialEnd]) -> list[StoredReport]:
    """``reports`` without those a trial made after the report it was first answered stop or
    complete at (``ends``: trial -> that end): the run gave them to no scheduler."""
    kept, over = [], set()
    for report in reports:
        if report.trial in over:
            continue
        kept.append(report)
        end = ends.get(report.trial)
        if end is not None and end.is_at(report):
            over.add(report.trial)
    return kept
