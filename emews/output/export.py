"""Reading an experiment's results back: CSV export and the end-of-run summary.

Everything here opens the store read-only and writes only its own private temp
file, so any number of ``emews results`` / ``status`` may run beside a live job.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import emews.store as stores
from emews.config.experiment import CSV_FILE, SUMMARY_FILE, read_summary, require_experiment
from emews.config.full_course import recorded_full_course
from emews.core.cores import usable_cores
from emews.core.direction import Direction
from emews.core.errors import ConfigError
from emews.core.failure_cause import CommonCause, most_frequent
from emews.core.replicates import PointResult, best_point, group_results
from emews.core.results import Result, Status
from emews.core.wording import counted
from emews.output.csvpart import CsvPart
from emews.output.csvrows import SURROGATES, Columns, write_rows
from emews.output.numbers import number
from emews.store import Store
from emews.training.messages import endings_text

#: the statuses of an evaluation that did not succeed
_FAILED = frozenset(s.value for s in Status if s is not Status.OK)


@dataclass(frozen=True)
class Totals:
    """What a summary needs: counts by status and the best evaluation (and, of training trials
    with a successful result, counts by how they ended: :class:`~emews.training.messages.Ending`)."""

    counts: dict[str, int]
    best: Result | None
    failure: CommonCause | None = None  # the most frequent cause of the failed evaluations
    endings: Mapping[str, int] = field(default_factory=dict)
    #: of an ensemble (``replicates`` > 1): the point with the best mean over its replicates, the
    #: result the optimizer saw (``best`` is then only the best single replicate)
    best_point: PointResult | None = None

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    @property
    def failed(self) -> int:
        """The evaluations that did not succeed: of a status this emews knows other than ``ok`` (a
        status another version wrote is counted apart, once: :func:`counts_text`)."""
        return sum(n for status, n in self.counts.items() if status in _FAILED)


def open_store(exp_dir: Path) -> Store | None:
    """The experiment's store, read-only (``None`` before the first result: no store yet, or one its
    job is making, whose tables are not there yet: ``emews status`` right after ``emews launch``)."""
    exp_dir = require_experiment(exp_dir)
    if not stores.store_exists(exp_dir):
        return None
    store = stores.open_store(exp_dir, readonly=True)
    if store.made():
        store.full_course = recorded_full_course(exp_dir)  # an older ASHA's stop at max_t reads completed
        return store
    store.close()
    return None


def refuse_lost_store(exp_dir: Path) -> None:
    """A :class:`ConfigError` when ``exp_dir`` has no store yet its ``summary.json`` records stored
    evaluations (a copy made without ``results.db``, a deleted store): resuming would run the budget
    again from id 0 and replace ``results.csv`` and ``summary.json``, the only record left."""
    if stores.store_exists(exp_dir):
        return
    done = read_summary(exp_dir).get("completed")
    if isinstance(done, int) and not isinstance(done, bool) and done > 0:
        raise ConfigError(
            f"missing, yet {SUMMARY_FILE} records {done} evaluations stored",
            file=str(exp_dir / stores.STORE_FILE),
            allowed=f"the experiment's own {stores.STORE_FILE} (with its -wal file) put back, "
            "or a new experiment (emews launch)",
        )


def totals(
    store: Store | None, *, replicates: int = 1, direction: Direction = Direction.MINIMIZE, failures: bool = True
) -> Totals:
    """The counts and the best of ``store``; of an ensemble (``replicates`` > 1) also its best point;
    ``failures``: also the most frequent cause of the failed evaluations (``emews status`` does not
    say it, and reads no errors)."""
    if store is None:
        return Totals({}, None)
    return Totals(
        store.status_counts(),
        store.best(),
        most_frequent(store.failure_errors()) if failures else None,
        Counter(e.value for e in store.endings().values()),
        best_point(points_of(store), direction) if replicates > 1 else None,
    )


def points_of(store: Store) -> list[PointResult]:
    """The points of the results in ``store``, each with its replicates' statistics."""
    return group_results((r.id, r.status, r.objective, r.params) for r in store.point_results())


def write_csv(store: Store, path: Path, param_names: Sequence[str], *, parallel_from: int | None = None) -> int:
    """Write ``results.csv`` (id, status, objective, p:*, m:*, error, rank, host, times) from the store.

    Rows go straight from the store to the CSV writer (no Result objects) into a private
    temp file that replaces ``path`` atomically; returns the row count.
    """
    csv_file = CsvFile(path, param_names, parallel_from=parallel_from)
    try:
        return csv_file.finish(store)
    finally:
        csv_file.discard()


#: rows left to write from which :meth:`CsvFile.finish` has a child write the upper part
#: (:mod:`emews.output.csvpart`), when this process may use more than one core
PARALLEL_ROWS = 20_000
#: the child's share of those rows: less than half, as it starts about 0.1 s late
CHILD_SHARE = 0.45


class CsvFile:
    """``results.csv`` written from the store in id order: in one go (:meth:`finish`), or while a
    run goes on (:meth:`follow` after each batch of results, then :meth:`finish`), with the same bytes.

    Following writes the rows whose ids run on without a gap from the last one written (a lower
    id may still be running); :meth:`finish` writes all the rest, from ``parallel_from`` rows on
    (default :data:`PARALLEL_ROWS`) with a child process writing the upper part beside it. A
    metric that first appears after rows were written changes the header: the file is then
    started again.
    """

    def __init__(self, path: Path, param_names: Sequence[str], *, parallel_from: int | None = None) -> None:
        self.path = path
        self._params = tuple(param_names)
        self._columns: Columns | None = None
        self._parallel_from = PARALLEL_ROWS if parallel_from is None else parallel_from
        self._fh: Any = None
        self._tmp: str | None = None
        self._next_id = 0
        self._never: set[int] = set()  # ids that no result will fill (cancelled)
        self.rows = 0

    def never_filled(self, ids: Iterable[int]) -> None:
        """``ids`` will have no result (tasks cancelled before they started): :meth:`follow` steps over them."""
        self._never.update(i for i in ids if i >= self._next_id)

    def follow(self, store: Store, settled_below: int = 0) -> None:
        """Write the rows that continue the file without a gap. Ids below ``settled_below`` (issued
        before this run, :func:`~emews.job.issued_ids.highest_id_on_disk`) that the store holds no
        task of (a task killed by ``kill -9`` before it was recorded) will never fill: they are
        stepped over, not waited for."""
        if self._columns is None:
            self._start(Columns.of(store, self._params))
        self._write(store, contiguous=True)
        while self._step_over_never(store) or (
            self._next_id < settled_below and self._step_over_lost(store, settled_below)
        ):
            self._write(store, contiguous=True)

    def _step_over_never(self, store: Store) -> bool:
        """Move past the cancelled ids from the next one on (:meth:`never_filled`); whether it moved."""
        start = self._next_id
        while self._next_id in self._never:
            self._never.discard(self._next_id)
            self._next_id += 1
        return self._next_id > start

    def _step_over_lost(self, store: Store, settled_below: int) -> bool:
        """Move past the ids from the next one on, below ``settled_below`` and the next stored
        result, that no task holds; whether it moved."""
        alive = {task.id for task, _ in store.unfinished()}  # read before the results: one may finish now
        stored = store.result_id_at(self._next_id, 0)
        end = settled_below if stored is None else min(stored, settled_below)
        start = self._next_id
        while self._next_id < end and self._next_id not in alive:
            self._next_id += 1
        return self._next_id > start

    def finish(self, store: Store) -> int:
        """Write every row not written yet and put the file in place; return the row count (a
        full disk or quota: a :class:`ConfigError` naming the CSV, the previous file in place)."""
        try:
            return self._finish(store)
        except OSError as exc:
            raise ConfigError(f"cannot write the CSV: {exc.strerror or exc}", file=str(self.path)) from None

    def _finish(self, store: Store) -> int:
        columns = Columns.of(store, self._params)
        if self._columns != columns:
            self._start(columns)
        split = self._split_id(store)
        part = None if split is None else CsvPart(store, self.path.parent, columns, split)
        self._write(store, contiguous=False, end_id=split)
        if part is not None:
            rows = part.append_to(self._fh)
            if rows is None:
                self._write(store, contiguous=False)  # the child failed: the rest written here
            else:
                self.rows += rows
        self._fh.close()
        self._fh = None
        os.chmod(self._tmp, 0o666 & ~_umask())  # type: ignore[arg-type]
        os.replace(self._tmp, self.path)  # type: ignore[arg-type]
        self._tmp = None
        return self.rows

    def discard(self) -> None:
        """Remove the temp file, if one is left (after a failure)."""
        if self._fh is not None:
            with contextlib.suppress(OSError):  # a full disk fails the flush of what is still buffered
                self._fh.close()
            self._fh = None
        if self._tmp is not None:
            Path(self._tmp).unlink(missing_ok=True)
            self._tmp = None

    def _split_id(self, store: Store) -> int | None:
        """The first id the child writes, or ``None`` when the rest is written here alone."""
        if usable_cores() < 2:
            return None
        left = store.count_results(self._next_id)
        if left < max(self._parallel_from, 2):
            return None
        return store.result_id_at(self._next_id, left - int(left * CHILD_SHARE))

    def _start(self, columns: Columns) -> None:
        self.discard()
        try:
            fd, self._tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        except OSError as exc:
            raise ConfigError(f"cannot write the CSV: {exc.strerror}", file=str(self.path)) from None
        self._fh = os.fdopen(fd, "w", newline="", encoding="utf-8", errors=SURROGATES)
        self._writer = csv.writer(self._fh)
        self._columns = columns
        self._writer.writerow(columns.header())
        self._next_id = 0
        self.rows = 0

    def _write(self, store: Store, *, contiguous: bool, end_id: int | None = None) -> None:
        assert self._columns is not None
        written = write_rows(store, self._writer, self._columns, self._next_id, end_id, contiguous=contiguous)
        self._next_id = written.next_id if end_id is None or contiguous else max(written.next_id, end_id)
        self.rows += written.rows
        self._fh.flush()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def stored_param_names(store: Store, listed: Sequence[str] = ()) -> list[str]:
    """``listed``, then every other parameter name the stored points hold, in order of first appearance
    (points of an open space, a CANDLE points file, differ in their keys)."""
    seen = set(listed)
    return [*listed, *(key for key in store.param_keys() if key not in seen)]


def export_csv(
    exp_dir: Path, param_names: Sequence[str], store: Store | None = None, *, with_stored_keys: bool = False
) -> tuple[Path, int]:
    """(Re)write ``results.csv`` of ``exp_dir``; return its path and row count. ``with_stored_keys``:
    also a column for each parameter the stored points hold beyond ``param_names``."""
    exp_dir = require_experiment(exp_dir)
    path = exp_dir / CSV_FILE
    own = store is None
    store = store or open_store(exp_dir)
    if store is None:
        return path, 0
    try:
        if with_stored_keys:
            param_names = stored_param_names(store, param_names)
        return path, write_csv(store, path, param_names)
    finally:
        if own:
            store.close()


def counts_text(total: Totals) -> str:
    """``27 ok (9 stopped early, 18 completed), 1 failed``: counts by status (emews' own first),
    the successful training trials by how they ended; a status this emews does not know (a store
    another version wrote) last, said so: ``1 preempted (a status this emews does not know)``."""
    known = [s.value for s in Status]
    ended = endings_text(total.endings)
    said = [
        f"{n} {status}" + (f" ({ended})" if status == Status.OK.value and ended else "")
        for status in known
        if (n := total.counts.get(status, 0))
    ]
    unknown = [f"{n} {status}" for status, n in total.counts.items() if status not in known and n]
    if unknown:
        said.append(
            ", ".join(unknown) + f" ({'a status' if len(unknown) == 1 else 'statuses'} this emews does not know)"
        )
    return ", ".join(said)


def best_point_line(point: PointResult) -> str:
    """``best point: mean objective 0.1 over 3 replicates (std 0.02; tasks 3, 4, 5) with parameters:``"""
    stats = point.stats
    assert stats.mean is not None
    tasks = ", ".join(str(t) for t in point.task_ids)
    failed = f", {stats.failed} failed" if stats.failed else ""
    return (
        f"best point: mean objective {number(stats.mean)} over {counted(stats.count, 'replicate')} "
        f"(std {number(stats.std or 0.0)}{failed}; "
        f"tasks {tasks}) with parameters:"
    )


def summary_text(total: Totals, budget: int | None, elapsed: float | None = None, earlier: int = 0) -> str:
    """A few lines: counts by status (``27 ok (9 stopped early, 18 completed), 1 failed``), the best
    evaluation and its parameters. ``elapsed``: this run's time, which ran the evaluations past the
    ``earlier`` runs' (a resumed run: ``6 ok (2 of them in this run, in 86.2 s)``)."""
    counts = counts_text(total)
    if elapsed is None:
        timed = ""
    elif earlier:
        timed = f" ({max(total.done - earlier, 0)} of them in this run, in {elapsed:.1f} s)"
    else:
        timed = f" in {elapsed:.1f} s"
    lines = [
        f"{total.done}{'/' + str(budget) if budget else ''} evaluations" + (f": {counts}" if counts else "") + timed
    ]
    best = total.best
    if best is None:
        lines.append("no successful evaluation")
    elif total.best_point is not None:
        lines.append(best_point_line(total.best_point))
        lines.append("  " + json.dumps(total.best_point.point, sort_keys=False))
    else:
        lines.append(f"best objective {number(best.objective)} (task {best.id}) with parameters:")
        lines.append("  " + json.dumps(dict(best.params), sort_keys=False))
    if total.failure is not None:
        lines.append(f"most frequent failure: {total.failure}")
    return "\n".join(lines)
