"""The one interface of an experiment's store, what a backend implements (SQLite today:
:class:`~emews.store.results_store.ResultsStore`), and the plain rows it answers with.

Every SQL statement lives behind :class:`Store`: the engine writes results, tasks and the training
tables through it, and ``emews results``/``status``/``report``/``checkpoints`` and the compute
budget read through it. A backend keeps its own schema and migrations (:meth:`Store.verify`
checks them) and returns plain Python values: points and metrics decoded, times as floats (except
:meth:`Store.csv_rows`, which streams cells as ``results.csv`` writes them).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Collection, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from emews.core.build import Build, use_it
from emews.core.errors import ConfigError, EmewsError
from emews.core.results import Outcome, Result, Status, StoredReport, Task, TrialEnd
from emews.training.messages import Ending, Report, Restorable

#: how hard each commit waits for the disk (SQLite: ``PRAGMA synchronous``)
Durability = Literal["normal", "full", "off"]
#: a checkpoint's states: being written, complete on disk (only these are restored or cloned), removed,
#: never written (its run of the task ended, or the run was killed, before its writer wrote it)
STAGED, DURABLE, DELETED, LOST = "staged", "durable", "deleted", "lost"
#: the columns of a finished evaluation that ``emews report`` reads (:meth:`Store.report_results`)
RESULT_FIELDS = ("id", "status", "objective", "loss", "error", "rank", "host", "submitted", "started", "finished")
#: a row of ``results.csv`` as the store hands it over (:meth:`Store.csv_rows`)
CsvRow = tuple[Any, ...]


class StoreUnreadable(ConfigError):
    """The results store cannot be opened or is not a database."""


class StoreIncompatible(StoreUnreadable):
    """The store was written by a newer emews, or its tables lack what this version reads."""


class StoreNewer(StoreIncompatible):
    """The store's schema is past what this emews reads: a newer emews wrote it (``made_by``, when
    known). ``found`` and ``readable``: its schema version and the newest this one reads."""

    def __init__(self, found: int, readable: int, *, file: str | Path, made_by: Build | None = None) -> None:
        super().__init__(
            f"written by a newer emews (schema {found}; this one reads up to {readable}): {use_it(made_by)}",
            file=file,
        )
        self.found, self.readable, self.made_by = found, readable, made_by


class StoreCorrupt(StoreUnreadable):
    """A row of the store that this version cannot read (an unknown status, a point that is not JSON)."""


class LeaseLost(EmewsError):
    """A pool's report refused: the pool no longer holds the trial's task in the shared queue."""


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """One tracked checkpoint (``emews checkpoints``, retention, the load-best API)."""

    id: int
    trial: int
    step: int
    path: str
    size: int | None
    metric: float | None
    loss: float | None
    state: str


@dataclass(frozen=True, slots=True)
class TrialState:
    """Where a training trial stands: its last report, the answer that report got (``""``: continue),
    and the PBT clones it was made from (``(donor trial, step of the cloned checkpoint)``, in order);
    ``released``: it began to wait for a promotion at its last step and was never promoted."""

    trial: int
    step: int
    metrics: Mapping[str, Any]
    action: str
    clones: tuple[tuple[int, int], ...] = ()
    released: bool = False

    def ending(self, status: str) -> Ending | None:
        """How the trial ended, given its result's ``status`` (``None`` unless ``ok``)."""
        return Ending.after(self.action, self.released) if status == Status.OK.value else None

    @property
    def stopped_early(self) -> bool:
        """Whether its scheduler ended it early, whatever its result: the rule of :meth:`ending`."""
        return Ending.after(self.action, self.released) is Ending.STOPPED_EARLY

    @property
    def cloned(self) -> str:
        """The clones as ``results.csv`` writes them: ``DONOR@STEP`` each, space-separated."""
        return " ".join(f"{donor}@{step}" for donor, step in self.clones)


@dataclass(frozen=True, slots=True)
class ResultRow:
    """A finished evaluation as the per-point summary reads it."""

    id: int
    status: str
    objective: float | None
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TimedResultRow(ResultRow):
    """A finished evaluation with its metrics and times (the DeepHyper export)."""

    metrics: dict[str, Any]
    submitted: float | None
    started: float | None
    finished: float | None


@dataclass(frozen=True, slots=True)
class RunRow:
    """When a finished evaluation ran and on which worker ranks (``emews status``'s rate and
    workers): its times (seconds; ``None``: unknown), its attempt (0: its first run) and its rank
    and team (:class:`ResultTable`'s ``team_ranks``)."""

    submitted: float | None
    started: float | None
    finished: float | None
    attempt: int
    rank: int | None
    team_ranks: tuple[int, ...] | None


@dataclass(frozen=True)
class ResultTable:
    """Every finished evaluation as ``emews report`` reads it, in id order: each row holds
    :data:`RESULT_FIELDS`, then the point (a dict), the attempt (0: its first run), the world ranks
    its team held (a tuple, team rank 0 first; ``None`` for a task that ran on ``rank`` alone, or
    a store that does not record them) and, when ``checkpoints``, the path of its trial's latest
    (durable) checkpoint as stored."""

    rows: list[tuple[Any, ...]]
    checkpoints: bool


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One training report as ``emews report`` draws it."""

    trial: int
    step: int
    metrics: dict[str, Any]
    time: float | None


class Store(ABC):
    """An experiment's durable store: results and tasks, and the training tables (reports,
    checkpoints, PBT lineage, attempts, pauses, decisions, promotions, waits).

    Written by the distributor thread on the optimizer rank; read by any number of read-only
    openings beside a live run. Rows are only ever added (a colliding result id is an error), except
    a task's parameters (PBT, promotions), its attempt count and a checkpoint's state.
    """

    @property
    @abstractmethod
    def root(self) -> Path | None:
        """The experiment directory that checkpoint paths are kept relative to (``None``: as given),
        where it is now."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the store is (SQLite: its file), for messages and for ``open_store(location=...)``
        (a second, read-only connection: a reader thread, a child process)."""

    @abstractmethod
    def verify(self, *, writing: bool = False) -> None:
        """The schema and every row are readable by this version (before a command that reads them
        all, or writes): :class:`StoreIncompatible` or :class:`StoreCorrupt`, naming what is not."""

    def made(self) -> bool:
        """Whether the store's tables are there: the job that creates a store makes its file (or
        schema) a moment before them, and a read-only look in between finds none."""
        return True

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- results and tasks: writing (the distributor thread) -----------------------------------
    @abstractmethod
    def commit(self, tasks: Sequence[Task] = (), results: Sequence[Result] = ()) -> None:
        """Record dispatched ``tasks`` (kept once) and finished ``results`` in one transaction."""

    def add(self, results: Sequence[Result]) -> None:
        """Write ``results`` in one transaction."""
        self.commit(results=results)

    @abstractmethod
    def mark_attempted(self, ids: Sequence[int]) -> None:
        """Count one more attempt of each task in ``ids`` (they are being run again)."""

    # -- results and tasks: reading ----------------------------------------------------------
    @abstractmethod
    def __iter__(self) -> Iterator[Result]:
        """Every finished evaluation, by id."""

    @abstractmethod
    def results_by_id(self, ids: Sequence[int]) -> list[Result]:
        """The stored results among ``ids``, by id."""

    @abstractmethod
    def unfinished(self) -> list[tuple[Task, int]]:
        """Tasks dispatched without a result (with the ranks they ran on), and how often they were re-run."""

    @abstractmethod
    def next_id(self) -> int:
        """One more than the largest task id any table holds (an id is never issued twice)."""

    @abstractmethod
    def status_counts(self) -> dict[str, int]: ...

    @abstractmethod
    def best(self) -> Result | None:
        """The successful evaluation with the smallest loss (the lowest id among equals)."""

    @abstractmethod
    def metric_names(self) -> list[str]:
        """Every metric key of the results, in order of first appearance."""

    @abstractmethod
    def finished_ids(self) -> set[int]:
        """The ids of every finished evaluation."""

    @abstractmethod
    def failure_errors(self) -> Iterator[str | None]:
        """The error of each evaluation that did not succeed, by id."""

    @abstractmethod
    def param_keys(self) -> list[str]:
        """Every parameter name the stored points hold, in order of first appearance."""

    @abstractmethod
    def count_results(self, first_id: int = 0) -> int:
        """How many results have an id of ``first_id`` or more."""

    @abstractmethod
    def result_id_at(self, first_id: int, offset: int) -> int | None:
        """The id of the result ``offset`` places after the first one with an id of ``first_id`` or more."""

    @abstractmethod
    def csv_rows(self, first_id: int, end_id: int | None = None) -> Generator[CsvRow, None, None]:
        """The results with ``first_id <= id < end_id`` (no end: all), by id, streamed: ``(id, status,
        objective, params, metrics, error, rank, host, submitted, started, finished, seed)`` with the point
        and the metrics as JSON text (``"{}"``: no metrics), ``""`` for a missing error or host, the
        times in ISO 8601 UTC with milliseconds (``""``: unknown) and the task's ``ctx.seed`` (``None``:
        no task row). Close it when stopping early."""

    @abstractmethod
    def point_results(self) -> list[ResultRow]:
        """Every finished evaluation, by id (the per-point summary)."""

    @abstractmethod
    def results_by_completion(self) -> list[TimedResultRow]:
        """Every finished evaluation in the order it finished (submitted when it never started), then by id."""

    # -- training tables: writing (the distributor thread) ---------------------------------------
    @abstractmethod
    def add_report(
        self,
        report: Report,
        metric: float | None,
        loss: float | None,
        task: Task | None = None,
        *,
        holder: int | None = None,
    ) -> int:
        """Store ``report`` (stage its checkpoint, mark the durable ones, record ``task``, the
        reporting task not yet in ``tasks``) in one transaction; return its sequence number.
        ``holder``: the pool that must still hold the trial's task (:class:`LeaseLost` if not)."""

    @abstractmethod
    def mark_durable(self, paths: Sequence[str]) -> None:
        """The staged checkpoints at ``paths`` are complete on disk."""

    @abstractmethod
    def mark_deleted(self, ids: Sequence[int]) -> None:
        """Retention removed the checkpoints ``ids``."""

    #: the trial scheduler's full course (``max_t``) where a reader knows it: an answer ``stop``
    #: stored at or past it reads ``complete`` (an ASHA before f3134cc, 2026-11-26, said ``stop``)
    full_course: int | None

    @abstractmethod
    def complete_full_courses(self, full_course: int) -> None:
        """Store as ``complete`` the answers ``stop`` at or past ``full_course`` (the rule of
        :attr:`full_course`), for every later reader: a resumed run's, with its scheduler's."""

    @abstractmethod
    def mark_lost(self, trials: Iterable[int] | None = None, *, sparing: Collection[int] = ()) -> int:
        """The staged checkpoints (of ``trials``; ``None``: every trial's but those of the trials
        ``sparing``, still running) whose file is not in place were never written: their writer
        ended first (the task's process was killed, or the write failed). They are ``lost``; how
        many. One whose writer still says it is written is durable."""

    @abstractmethod
    def add_lineage(
        self,
        trial: int,
        step: int,
        donor: int,
        checkpoint: int,
        old: Mapping[str, Any],
        new: Mapping[str, Any],
        report: int,
    ) -> None:
        """A PBT exploit: ``trial`` cloned ``donor``'s ``checkpoint`` and now runs with ``new``."""

    @abstractmethod
    def add_attempt(self, task: Task, attempt: int, outcome: Outcome) -> None:
        """Keep a failed attempt of a task that is run again (``task.retries``), the task recorded."""

    @abstractmethod
    def add_pause(self, task: int, step: int | None) -> None:
        """``task`` paused (walltime, scheduler) at ``step``: ``emews resume`` continues it."""

    @abstractmethod
    def add_decision(self, trial: int, step: int, action: str, report: int | None = None) -> None:
        """``trial``'s report of ``step`` (seq ``report``) was answered with ``action`` (not continue)."""

    @abstractmethod
    def add_promotion(
        self, trial: int, step: int, resource: int | None, params: Mapping[str, Any] | None = None
    ) -> None:
        """``trial``, paused by its scheduler at ``step``, runs again (with ``resource`` steps, and
        ``params`` when they changed)."""

    @abstractmethod
    def add_wait(self, task: int, step: int, outcome: Outcome) -> None:
        """``task`` waits for a promotion since ``step``; ``outcome`` becomes its result if it never is."""

    # -- training tables: reading ------------------------------------------------------------
    @abstractmethod
    def trial_states(self, first: int = 0) -> dict[int, TrialState]:
        """Each trial (task id >= ``first``) that reported: where it stands."""

    @abstractmethod
    def trial_state(self, trial: int) -> TrialState | None:
        """Where ``trial`` stands (:meth:`trial_states`); ``None`` when it never reported."""

    @abstractmethod
    def endings(self) -> dict[int, Ending]:
        """Trial -> how it ended, for the trials that reported and have a successful result."""

    @abstractmethod
    def last_wait(self, trial: int) -> tuple[int, Outcome] | None:
        """The step ``trial`` last began to wait at, and the outcome its task ended with then."""

    @abstractmethod
    def waits(self) -> set[int]:
        """Trials that ever waited for a promotion."""

    @abstractmethod
    def started_params(self) -> dict[int, Any]:
        """Trial -> the parameters it started with (what its scheduler saw at its first report)."""

    @abstractmethod
    def ended(self) -> list[int]:
        """Trials that reported and whose task ended with a result, by id."""

    @abstractmethod
    def promotions(self) -> list[tuple[int, int]]:
        """``(trial, step it paused at)`` of every promotion, in order."""

    @abstractmethod
    def pauses(self) -> dict[int, int]:
        """Task id -> how often it paused."""

    @abstractmethod
    def checkpointed_in(self, trial: int, attempt: int) -> bool:
        """Whether ``trial``'s run ``attempt`` (its task's) wrote a checkpoint: it trained on in that run."""

    @abstractmethod
    def attempts(self, task: int) -> int:
        """How many failed attempts of ``task`` are kept."""

    @abstractmethod
    def latest_durable(self, trial: int, trained_past: bool = False) -> CheckpointRow | None:
        """What a PBT clone of ``trial`` starts from: the newest durable checkpoint ``trial`` wrote
        itself since its last PBT clone (``None``: it wrote none); ``trained_past``: only one that
        came with an earlier report than ``trial``'s latest (never its final checkpoint)."""

    @abstractmethod
    def candidates(self, trial: int) -> list[Restorable]:
        """What ``ctx.restore`` may load for ``trial``, newest first."""

    @abstractmethod
    def checkpoint(self, id_: int) -> CheckpointRow | None: ...

    @abstractmethod
    def checkpoints(self, states: Sequence[str] = (STAGED, DURABLE)) -> list[CheckpointRow]:
        """The checkpoints in ``states``, by trial and step (none before any was kept)."""

    @abstractmethod
    def durable_at(self, paths: Sequence[str]) -> list[CheckpointRow]:
        """The durable checkpoints written at ``paths``."""

    @abstractmethod
    def checkpoints_at(
        self, paths: Sequence[str], states: Sequence[str] = (STAGED, DURABLE, DELETED)
    ) -> list[CheckpointRow]:
        """The checkpoints in ``states`` recorded at ``paths``."""

    @abstractmethod
    def checkpoints_by_id(self, ids: Iterable[int]) -> list[CheckpointRow]: ...

    @abstractmethod
    def durable_of(self, trials: Iterable[int]) -> list[CheckpointRow]:
        """The durable checkpoints of ``trials``, whichever run or pool wrote them."""

    @abstractmethod
    def best_durable(self, n: int) -> list[CheckpointRow]:
        """The ``n`` best durable checkpoints of the experiment, best first (smallest loss, one
        without a loss last, the older first on ties: retention's order)."""

    @abstractmethod
    def pinned(self) -> set[int]:
        """Checkpoints a PBT clone was made from (kept while lineage may restore them)."""

    @abstractmethod
    def has_reports(self) -> bool: ...

    @abstractmethod
    def reports(self, trial: int | None = None) -> list[StoredReport]:
        """Every report (of ``trial``), in arrival order."""

    @abstractmethod
    def first_ends(self) -> dict[int, TrialEnd]:
        """Trial -> the report it was first answered ``stop`` or ``complete`` at."""

    @abstractmethod
    def first_end(self, trial: int) -> TrialEnd | None:
        """The report ``trial``'s trial scheduler first answered ``stop`` or ``complete``; ``None``
        while it ended none."""

    def scheduler_end(self, trial: int) -> str | None:
        """How ``trial``'s trial scheduler ended it: the action (``stop``, ``complete``) of the first
        report it answered with one; ``None`` while it ended none."""
        end = self.first_end(trial)
        return None if end is None else end.action

    def stopped_early(self, trial: int) -> bool:
        """Whether ``trial``'s scheduler ended it early: :attr:`TrialState.stopped_early`, the one rule
        of ``results.csv``'s ``t:ended``, ``emews status`` and Optuna's pruned trials."""
        state = self.trial_state(trial)
        return state is not None and state.stopped_early

    def ended_by_scheduler(self, trial: int) -> bool:
        """Whether ``trial``'s trial scheduler ended it: answered a report with stop or complete."""
        return self.scheduler_end(trial) is not None

    @abstractmethod
    def reports_between(self, after: int, before: int) -> list[StoredReport]:
        """The reports whose seq lies strictly between ``after`` and ``before``, in seq order."""

    @abstractmethod
    def task_params(self, ids: Sequence[int]) -> dict[int, Any]:
        """Task id -> the parameters its ``tasks`` row holds, for the ids among ``ids`` it has."""

    @abstractmethod
    def task_seeds(self, ids: Sequence[int]) -> dict[int, int]:
        """Task id -> the ``ctx.seed`` its ``tasks`` row holds, for the ids among ``ids`` it has."""

    @abstractmethod
    def lineage(self) -> list[dict[str, Any]]:
        """Every PBT exploit in order: trial, step, donor, checkpoint, old_params, new_params and
        report (the seq of the report it answered: a rebuilt PBT replays the exploit there)."""

    @abstractmethod
    def top_steps(self) -> dict[int, int]:
        """Trial -> the highest step it reported (the step budget of a resumed run)."""

    @abstractmethod
    def busy_spans(self) -> list[tuple[float, float]]:
        """When evaluations ran: each result's (started, finished), and for each trial without a
        result the times of its first and last report (the time budget of a resumed run)."""

    # -- emews report: stores of other versions' layouts read as they are -------------------------
    @abstractmethod
    def report_results(self) -> ResultTable: ...

    @abstractmethod
    def run_rows(self) -> list[RunRow]:
        """Every finished evaluation's :class:`RunRow`, by id (what :meth:`report_results` holds
        of it, without its point)."""

    @abstractmethod
    def count_unfinished(self) -> int:
        """How many dispatched tasks have no result (running, or left by a stopped run)."""

    @abstractmethod
    def unfinished_ranks(self) -> int:
        """The worker ranks the dispatched tasks without a result hold (a team's every rank)."""

    @abstractmethod
    def report_curves(self) -> list[CurvePoint] | None:
        """Every report by trial and step, ``None`` when the store holds none."""

    @abstractmethod
    def report_endings(self) -> dict[int, Ending]:
        """:meth:`endings`, or none when the reports are not in emews' own layout."""


def is_json_object(text: object) -> bool:
    """Whether ``text`` is a JSON object as Python's json reads it (``NaN``, ``Infinity`` allowed)."""
    try:
        return isinstance(json.loads(text), dict)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
