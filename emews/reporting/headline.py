"""The headline of ``emews status``: counts, the best evaluation, busy workers, rate and ETA, read
from the store by query (no frames: ``emews status`` is polled, and pandas alone cost it most of
its time)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from emews.core.errors import ConfigError
from emews.core.wording import counted, duration, rate_text
from emews.output.export import Totals, summary_text, totals
from emews.reporting import runs as run_spans
from emews.reporting.files import ExperimentFiles
from emews.store import RunRow, Store, StoreUnreadable


@dataclass(frozen=True)
class StoreFigures:
    """What the headline needs of the store, read on the command's one connection: the counts and
    the best (:func:`~emews.output.export.totals`, as ``emews results`` says them), when each
    evaluation ran and where, and the worker ranks the unfinished tasks hold."""

    totals: Totals
    ran: list[RunRow]
    unfinished_ranks: int = 0


def store_figures(files: ExperimentFiles, store: Store | None) -> StoreFigures:
    """The figures of ``store`` (``None``: nothing stored yet); a row that does not decode is a
    :class:`ConfigError` naming the store."""
    if store is None:
        return StoreFigures(totals(None), [])
    try:
        return StoreFigures(
            totals(store, replicates=files.replicates, direction=files.direction, failures=False),
            store.run_rows(),
            store.unfinished_ranks(),
        )
    except StoreUnreadable:
        raise
    except ValueError as exc:  # a row whose JSON does not decode
        raise ConfigError(f"cannot read the results store: {exc}", file=store.location) from None


@dataclass(frozen=True)
class Headline:
    """What ``emews status`` shows of a run, live or finished."""

    totals: Totals
    budget: int | None
    busy: int
    workers: int
    rate: float | None  # evaluations per second: in the run going on, or over all runs of a finished one
    eta: float | None  # seconds until the budget is spent at that rate
    rate_over: float = 0.0  # the seconds the rate is taken over
    runs: int = 1  # the runs those seconds add up (a live rate's: its own run)
    running: bool = False

    @property
    def failed(self) -> int:
        return self.totals.failed

    def lines(self) -> list[str]:
        eta = "-" if self.eta is None else duration(self.eta)
        return [
            summary_text(self.totals, self.budget),
            f"{self.failed} failed; workers busy: {self.busy}/{self.workers}; rate {self.rate_said()}; ETA {eta}",
        ]

    def rate_said(self) -> str:
        """``0.5/s over this run's 12.0 s`` (live), ``0.5/s over 1 min 40 s in 2 runs`` (finished)."""
        if self.rate is None:
            return "-"
        if self.running:
            return f"{rate_text(self.rate)}/s over this run's {duration(self.rate_over)}"
        runs = f" in {counted(self.runs, 'run')}" if self.runs > 1 else ""
        return f"{rate_text(self.rate)}/s over {duration(self.rate_over)}{runs}"


def headline(files: ExperimentFiles, figures: StoreFigures, running: bool, now: float | None = None) -> Headline:
    """The headline of the experiment; ``running``: the run goes on now (busy workers, the rate of
    this run up to now, and the time to the budget's end at it). A finished experiment's rate is over
    all its runs' working time (a last run that only ran two tasks again in a few ms said 1.85e+03/s)."""
    spans = run_spans.runs(
        [
            (run_spans.ready_at(row.submitted, row.started, row.attempt), row.started, row.finished)
            for row in figures.ran
            if row.started is not None and row.finished is not None
        ]
    )
    rate = eta = None
    over, runs = 0.0, len(spans)
    if spans and running:
        start, end = spans[-1]
        spans, runs = [(start, max(end, time.time() if now is None else now))], 1
    if spans:
        over = sum(end - start for start, end in spans)
        finished = [row.finished for row in figures.ran if row.finished is not None]
        done = sum(sum(1 for f in finished if start <= f <= end) for start, end in spans)
        rate = done / over if over > 0 else None
    if running and rate and files.budget is not None:
        eta = max(files.budget - len(figures.ran), 0) / rate
    return Headline(
        figures.totals,
        files.budget,
        busy=min(figures.unfinished_ranks, files.run_workers) if running else 0,
        workers=files.run_workers if running else max(files.run_workers, len(held_ranks(figures.ran))),
        rate=rate,
        eta=eta,
        rate_over=over,
        runs=runs,
        running=running,
    )


def held_ranks(ran: list[RunRow]) -> set[int]:
    """Every worker rank that ran a task (a resume may run on fewer workers than an earlier run did)."""
    return run_spans.held_ranks((row.rank for row in ran), (row.team_ranks for row in ran))
