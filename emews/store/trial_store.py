"""The training tables of the results store: reports, checkpoints and PBT lineage.

``reports``      every ``ctx.report`` as it arrived (seq gives the arrival order).
``checkpoints``  every checkpoint a report handed in: ``staged`` (being written), ``durable``
                 (complete on disk: only these are restored or cloned), ``deleted`` (retention),
                 ``lost`` (never written: its run of the task ended, or the run was killed, first).
``lineage``      every PBT exploit: which trial cloned which checkpoint, with old and new parameters.
``decisions``    every answer to a report other than continue (stop, complete, pause, exploit): the trial, the
                 step and the report's seq (``report``; NULL in a store written before it was kept, where
                 a decision is matched to the trial's reports by step).
``promotions``   every ASHA promotion: the trial, the step it had paused at, the resource it got.
``waits``        every trial its scheduler paused to wait for a promotion: the step, and the outcome
                 its task ended with (its result if it is never promoted); it waits across a stop.

A trial's ``tasks`` row (:mod:`emews.store.tables`) is written with its first report, before anything of it
is kept here, and follows its parameters (PBT exploits, promotions' resource): ``emews resume``
runs it again under its id with what it was running with.

Written by the distributor thread on the optimizer rank; read by ``evaluator.reports()``
through a read-only connection of its own, and by ``emews checkpoints``.

Checkpoint paths are kept relative to the experiment directory and resolved against the one the
store is opened from (``root``), so a copied or moved experiment reads and deletes its own files
only. The absolute paths of older stores are read as their place in the experiment
(``checkpoints/TRIAL/NAME``), and rewritten relative when the store is opened for writing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from emews.core.followed_dir import FollowedDir
from emews.core.jsoncodec import loads_metrics, loads_point
from emews.core.results import Outcome, Status, StoredReport, Task, TrialEnd
from emews.store.base import DELETED, DURABLE, LOST, STAGED, CheckpointRow, LeaseLost, TrialState
from emews.store.tables import column_names, in_slices, record_tasks, set_task_params
from emews.training.checkpoints import checkpoint_attempt, in_experiment
from emews.training.messages import Action, Ending, Report, Restorable

#: the training tables (SQLite), made by :class:`TrialStore` or, in its migration, by the results store
TRIAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    trial INTEGER NOT NULL,
    step INTEGER NOT NULL,
    metrics TEXT NOT NULL,
    time REAL
);
CREATE INDEX IF NOT EXISTS reports_by_trial ON reports (trial, seq);
CREATE TABLE IF NOT EXISTS checkpoints (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trial INTEGER NOT NULL,
    step INTEGER NOT NULL,
    path TEXT NOT NULL UNIQUE,
    size INTEGER,
    metric REAL,
    loss REAL,
    state TEXT NOT NULL,
    report INTEGER,
    created REAL
);
CREATE INDEX IF NOT EXISTS checkpoints_by_trial ON checkpoints (trial, state);
CREATE TABLE IF NOT EXISTS lineage (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    trial INTEGER NOT NULL,
    step INTEGER NOT NULL,
    donor INTEGER NOT NULL,
    checkpoint INTEGER NOT NULL,
    old_params TEXT NOT NULL,
    new_params TEXT NOT NULL,
    report INTEGER NOT NULL,
    time REAL
);
CREATE TABLE IF NOT EXISTS attempts (
    task INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    rank INTEGER,
    host TEXT,
    started REAL,
    finished REAL,
    PRIMARY KEY (task, attempt)
);
CREATE TABLE IF NOT EXISTS pauses (
    task INTEGER NOT NULL,
    step INTEGER,
    time REAL
);
CREATE TABLE IF NOT EXISTS decisions (
    trial INTEGER NOT NULL,
    step INTEGER NOT NULL,
    action TEXT NOT NULL,
    time REAL,
    report INTEGER
);
CREATE TABLE IF NOT EXISTS waits (
    task INTEGER NOT NULL,
    step INTEGER NOT NULL,
    status TEXT NOT NULL,
    value REAL,
    metrics TEXT NOT NULL,
    rank INTEGER,
    host TEXT,
    started REAL,
    finished REAL,
    time REAL
);
CREATE TABLE IF NOT EXISTS promotions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    trial INTEGER NOT NULL,
    step INTEGER NOT NULL,
    resource INTEGER,
    time REAL
);
"""
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode
_CHECKPOINT_COLUMNS = "id, trial, step, path, size, metric, loss, state"


#: above every report's seq (no upper bound)
_NO_SEQ = 2**62


def _inside(path: str, root: str) -> str | None:
    """``path`` (normalized, absolute) relative to ``root`` (absolute, normalized) when inside it."""
    if path == root:
        return "."
    prefix = root if root.endswith("/") else root + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _relative(path: str, root: str, opened_at: str) -> str:
    """How a store opened at ``opened_at``, its directory at ``root`` now, keeps the absolute
    checkpoint ``path`` of an older store: relative to ``root``, else at its place in the layout
    (``checkpoints/TRIAL/NAME``: written where the experiment was), else relative to
    ``opened_at``, else as it is (a file outside the experiment)."""
    full = os.path.normpath(path)
    inside = _inside(full, root)
    if inside is None and (moved := in_experiment(path)) is not None:
        inside = os.path.normpath(moved)
    if inside is None:
        inside = _inside(full, opened_at)
    return path if inside is None else inside


class TrialStore:
    """The training tables over one SQLite connection: the training half of
    :class:`~emews.store.results_store.ResultsStore` (the SQLite :class:`~emews.store.base.Store`);
    ``root``: the experiment directory checkpoint paths are relative to (``None``: paths kept as given)."""

    def __init__(
        self, db: sqlite3.Connection, *, readonly: bool = False, root: Path | None = None, schema: bool = True
    ) -> None:
        """``schema``: make the SQLite tables (and relocate older absolute paths) when writing; a
        PostgreSQL store has made its own, and the SQLite results store makes them in its migration."""
        self._db = db
        self._opened_at = None if root is None else Path(os.path.abspath(root))
        # a run's store follows its directory moved while it runs: paths resolve where it is now
        self._where = None if readonly or self._opened_at is None else FollowedDir(self._opened_at)
        self._named_reports = False  # whether ``decisions`` was seen to have its ``report`` column
        #: the trial scheduler's full course (:attr:`~emews.training.schedulers.TrialScheduler.full_course`),
        #: when a reader knows it: a ``stop`` stored at or past it is read as ``complete``
        self.full_course: int | None = None
        if not readonly and schema:
            db.executescript(TRIAL_SCHEMA)
            self._relocate()

    @property
    def root(self) -> Path | None:
        """The experiment directory: where it is now (``mv EXP EXP2`` while a run writes the store)."""
        return self._opened_at if self._where is None else self._where.current()

    # -- checkpoint paths ----------------------------------------------------
    def _stored(self, path: str) -> str:
        """How the store keeps ``path``: relative to the experiment directory when inside it (where
        it is now, or where it was opened: a writer that named it before a move)."""
        if self._opened_at is None or not os.path.isabs(path):
            return path
        full = Path(os.path.normpath(path))
        for root in (self.root, self._opened_at):
            if root is not None and full.is_relative_to(root):
                return full.relative_to(root).as_posix()
        return path

    def _resolved(self, stored: str) -> str:
        """The file a stored path names in this experiment directory (an absolute path of an
        older store, written where the experiment was, is read at its place in this one)."""
        root = self.root
        if root is None:
            return stored
        if not os.path.isabs(stored):
            return str(root / stored)
        if Path(os.path.normpath(stored)).is_relative_to(root):
            return stored
        moved = in_experiment(stored)
        return stored if moved is None else str(root / moved)

    def _relocate(self) -> None:
        """Rewrite the absolute checkpoint paths an older store holds relative (once per store)."""
        if self.root is None:
            return
        rows = self._db.execute("SELECT id, path FROM checkpoints WHERE path LIKE '/%'").fetchall()
        # what _stored(_resolved(path)) gives, as string work: the directory looked up once, not per row
        root, opened_at = str(self.root), str(self._opened_at)
        changed = [(new, id_) for id_, path in rows if (new := _relative(path, root, opened_at)) != path]
        if changed:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany("UPDATE OR IGNORE checkpoints SET path = ? WHERE id = ?", changed)

    def _row(self, row: Sequence[Any]) -> CheckpointRow:
        """A ``checkpoints`` row (``_CHECKPOINT_COLUMNS``), its path resolved in this experiment."""
        checkpoint = CheckpointRow(*row)
        return replace(checkpoint, path=self._resolved(checkpoint.path))

    # -- writing (the distributor thread) ----------------------------------
    def add_report(
        self,
        report: Report,
        metric: float | None,
        loss: float | None,
        task: Task | None = None,
        *,
        holder: int | None = None,
    ) -> int:
        """Store ``report`` (and stage its checkpoint, mark the durable ones, record ``task``, the
        reporting task not yet in ``tasks``) in one transaction; return its sequence number.
        ``holder``: a pool that must still hold the trial's task in the shared queue, checked in
        that transaction (:meth:`_require_held`), else :class:`~emews.store.base.LeaseLost` and
        nothing is stored."""
        with self._db:
            self._db.execute("BEGIN")
            if holder is not None:
                self._require_held(report.trial, holder)
            if task is not None:
                record_tasks(self._db, [task])
            seq = self._db.execute(
                "INSERT INTO reports (trial, step, metrics, time) VALUES (?,?,?,?)",
                (report.trial, report.step, _encode(report.metrics), report.time),
            ).lastrowid
            if report.checkpoint is not None:
                self._db.execute(  # a path written again (a retry that started over) is its newest write
                    "INSERT INTO checkpoints (trial, step, path, size, metric, loss, state, report, created) "
                    "VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (path) DO UPDATE SET step = excluded.step, "
                    "size = excluded.size, metric = excluded.metric, loss = excluded.loss, state = excluded.state, "
                    "report = excluded.report, created = excluded.created",
                    (
                        report.trial,
                        report.step,
                        self._stored(report.checkpoint.path),
                        report.checkpoint.size,
                        metric,
                        loss,
                        STAGED,
                        seq,
                        time.time(),
                    ),
                )
            self._durable(report.durable)
        assert seq is not None  # an INSERT always sets lastrowid
        return int(seq)

    def _require_held(self, task: int, pool: int) -> None:
        """:class:`~emews.store.base.LeaseLost` unless ``pool`` holds ``task`` (pools need
        PostgreSQL: :class:`~emews.store.postgres.PostgresStore` checks it)."""
        raise LeaseLost(f"task {task}: pool {pool} holds no lease here (worker pools need a PostgreSQL store)")

    def mark_durable(self, paths: Sequence[str]) -> None:
        if paths:
            with self._db:
                self._db.execute("BEGIN")
                self._durable(paths)

    def _durable(self, paths: Iterable[str]) -> None:
        self._db.executemany(  # lost too: a writer slower than its task's end, not dead, wrote it after all
            "UPDATE checkpoints SET state = ? WHERE path = ? AND state IN (?, ?)",
            [(DURABLE, self._stored(p), STAGED, LOST) for p in paths],
        )

    def mark_deleted(self, ids: Sequence[int]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("UPDATE checkpoints SET state = ? WHERE id = ?", [(DELETED, i) for i in ids])

    def mark_lost(self, trials: Iterable[int] | None = None, *, sparing: Collection[int] = ()) -> int:
        """Staged checkpoints (of ``trials``; every one when ``None``, but those of the trials
        ``sparing``) whose file is not there are lost."""
        if not self._has("checkpoints"):
            return 0
        sql = f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE state = ?"
        if trials is None:
            rows = [row for row in map(self._row, self._db.execute(sql, (STAGED,))) if row.trial not in sparing]
        else:
            rows = []
            for chunk, marks in in_slices(sorted(set(trials))):
                rows += [self._row(r) for r in self._db.execute(f"{sql} AND trial IN ({marks})", (STAGED, *chunk))]
        lost = [row.id for row in rows if not Path(row.path).is_file()]
        if lost:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "UPDATE checkpoints SET state = ? WHERE id = ? AND state = ?", [(LOST, i, STAGED) for i in lost]
                )
        return len(lost)

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
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO lineage (trial, step, donor, checkpoint, old_params, new_params, report, "
                "time) VALUES (?,?,?,?,?,?,?,?)",
                (trial, step, donor, checkpoint, _encode(dict(old)), _encode(dict(new)), report, time.time()),
            )
            set_task_params(self._db, trial, new)

    def add_attempt(self, task: Task, attempt: int, outcome: Outcome) -> None:
        """Keep a failed attempt of a task that is run again (``task.retries``), the task recorded."""
        with self._db:
            self._db.execute("BEGIN")
            record_tasks(self._db, [task])
            self._db.execute(
                "INSERT INTO attempts (task, attempt, status, error, rank, host, started, finished) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (
                    task.id,
                    attempt,
                    outcome.status.value,
                    outcome.error,
                    outcome.rank,
                    outcome.host,
                    outcome.started,
                    outcome.finished,
                ),
            )

    def add_pause(self, task: int, step: int | None) -> None:
        """``task`` paused (walltime, scheduler) at ``step``: ``emews resume`` continues it."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("INSERT INTO pauses (task, step, time) VALUES (?,?,?)", (task, step, time.time()))

    def add_decision(self, trial: int, step: int, action: str, report: int | None = None) -> None:
        """``trial``'s report of ``step`` (seq ``report``) was answered with ``action`` (not continue)."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO decisions (trial, step, action, time, report) VALUES (?,?,?,?,?)",
                (trial, step, action, time.time(), report),
            )

    def _decisions(self, where: str, params: Sequence[Any]) -> list[tuple[int, int, str, int | None]]:
        """``(trial, step, action, report seq)`` of the decisions ``where`` selects, in the order they
        were made (the seq ``None`` in a store written before decisions named their report). ``where``
        selects every stop of the trials it selects (the :meth:`_answer` rule needs the first)."""
        if not self._has("decisions"):
            return []
        report = "report" if self._decisions_name_reports() else "NULL"
        stopped: set[int] = set()  # the trials answered stop before (as stored)
        rows = []
        for t, step, action, seq in self._db.execute(
            f"SELECT trial, step, action, {report} FROM decisions WHERE {where} ORDER BY rowid", tuple(params)
        ):
            rows.append((int(t), int(step), self._answer(str(action), int(step), int(t) in stopped), seq))
            if action == Action.STOP.value:
                stopped.add(int(t))
        return [(t, step, action, None if seq is None else int(seq)) for t, step, action, seq in rows]

    def _answer(self, action: str, step: int, stopped_before: bool) -> str:
        """``action`` as this emews names it: a trial's first ``stop``, at or past the
        :attr:`full_course`, is a ``complete`` (an ASHA of before f3134cc, 2026-11-26, answered
        ``stop`` at ``max_t``); a trial stopped before that goes on being answered ``stop`` (an
        objective that ignores its stop): it stopped early."""
        if (
            action == Action.STOP.value
            and not stopped_before
            and self.full_course is not None
            and step >= self.full_course
        ):
            return Action.COMPLETE.value
        return action

    def complete_full_courses(self, full_course: int) -> None:
        if not self._has("decisions"):
            return
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "UPDATE decisions SET action = ? WHERE action = ? AND step >= ? AND NOT EXISTS "
                "(SELECT 1 FROM decisions earlier WHERE earlier.trial = decisions.trial "
                "AND earlier.action = ? AND earlier.rowid < decisions.rowid)",
                (Action.COMPLETE.value, Action.STOP.value, full_course, Action.STOP.value),
            )

    def _decisions_name_reports(self) -> bool:
        """Whether ``decisions`` has its ``report`` column (a store opened read-only as an older
        emews wrote it has not; once there it stays)."""
        if not self._named_reports:
            self._named_reports = "report" in self._columns("decisions")
        return self._named_reports

    def _columns(self, table: str) -> list[str]:
        """The columns of ``table``, in order (none when there is no such table)."""
        return column_names(self._db, table)

    def trial_states(self, first: int = 0) -> dict[int, TrialState]:
        """Each trial (task id >= ``first``) that reported: its last step and metrics, how its last
        report was answered (``stop``, ``complete``, ``pause``, ``exploit``; ``""``: continue), and
        the PBT clones it was made from."""
        return self._states(">=", first)

    def trial_state(self, trial: int) -> TrialState | None:
        """Where ``trial`` stands (:meth:`trial_states`); ``None`` when it never reported."""
        return self._states("=", trial).get(trial)

    def _states(self, compare: str, key: int) -> dict[int, TrialState]:
        """:meth:`trial_states` of the trials whose id ``compare`` (``>=``, ``=``) ``key`` holds for."""
        if not self._has("reports"):
            return {}
        rows = self._db.execute(
            "SELECT r.trial, r.seq, r.step, r.metrics FROM reports r JOIN (SELECT trial, MAX(seq) AS seq "
            f"FROM reports WHERE trial {compare} ? GROUP BY trial) last ON last.seq = r.seq ORDER BY r.trial",
            (key,),
        ).fetchall()
        answered: dict[int, str] = {}  # report seq -> its answer
        by_step: dict[tuple[int, int], str] = {}  # an older store's: (trial, step) -> the last answer there
        for t, step, action, seq in self._decisions(f"trial {compare} ?", (key,)):
            if seq is None:
                by_step[(t, step)] = action
            else:
                answered[seq] = action
        clones: dict[int, list[tuple[int, int]]] = {}
        if self._has("lineage"):
            for t, donor, step in self._db.execute(
                "SELECT l.trial, l.donor, COALESCE(c.step, -1) FROM lineage l LEFT JOIN checkpoints c "
                f"ON c.id = l.checkpoint WHERE l.trial {compare} ? ORDER BY l.seq",
                (key,),
            ):
                clones.setdefault(t, []).append((donor, step))
        waited: set[tuple[int, int]] = set()  # (trial, step) where it began to wait for a promotion, never promoted
        if self._has("waits"):
            waited = {
                (t, step)
                for t, step in self._db.execute(f"SELECT task, step FROM waits WHERE task {compare} ?", (key,))
            }
        if waited and self._has("promotions"):
            waited -= {
                (t, step)
                for t, step in self._db.execute(f"SELECT trial, step FROM promotions WHERE trial {compare} ?", (key,))
            }
        return {
            t: TrialState(
                t,
                step,
                loads_metrics(m),
                answered.get(seq, by_step.get((t, step), "")),
                tuple(clones.get(t, ())),
                (t, step) in waited,
            )
            for t, seq, step, m in rows
        }

    def endings(self) -> dict[int, Ending]:
        """Trial -> how it ended, for the trials that reported and have a successful result."""
        if not self._has("reports"):
            return {}
        ok = {i for (i,) in self._db.execute("SELECT id FROM results WHERE status = ?", (Status.OK.value,))}
        return {t: Ending.after(state.action, state.released) for t, state in self.trial_states().items() if t in ok}

    def add_promotion(
        self, trial: int, step: int, resource: int | None, params: Mapping[str, Any] | None = None
    ) -> None:
        """``trial``, paused by its scheduler at ``step``, runs again (with ``resource`` steps, and
        ``params``, its parameters with that resource, when they changed)."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO promotions (trial, step, resource, time) VALUES (?,?,?,?)",
                (trial, step, resource, time.time()),
            )
            if params is not None:
                set_task_params(self._db, trial, params)

    def add_wait(self, task: int, step: int, outcome: Outcome) -> None:
        """``task`` waits for a promotion since ``step``; ``outcome`` becomes its result if it never is."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO waits (task, step, status, value, metrics, rank, host, started, finished, "
                "time) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    task,
                    step,
                    outcome.status.value,
                    outcome.value,
                    _encode(dict(outcome.metrics)),
                    outcome.rank,
                    outcome.host,
                    outcome.started,
                    outcome.finished,
                    time.time(),
                ),
            )

    def last_wait(self, trial: int) -> tuple[int, Outcome] | None:
        """The step ``trial`` last began to wait at, and the outcome its task ended with then."""
        if not self._has("waits"):
            return None
        row = self._db.execute(
            "SELECT step, status, value, metrics, rank, host, started, finished FROM waits "
            "WHERE task = ? ORDER BY rowid DESC LIMIT 1",
            (trial,),
        ).fetchone()
        if row is None:
            return None
        step, status, value, metrics, rank, host, started, finished = row
        return step, Outcome(trial, Status(status), value, loads_metrics(metrics), None, rank, host, started, finished)

    def waits(self) -> set[int]:
        """Trials that ever waited for a promotion."""
        return {t for (t,) in self._db.execute("SELECT DISTINCT task FROM waits")} if self._has("waits") else set()

    def started_params(self) -> dict[int, Any]:
        """Trial -> the parameters it started with (what the scheduler saw at its first report): its
        first PBT exploit's old parameters, else its ``tasks`` (or ``results``) row's."""
        if not self._has("reports"):
            return {}
        rows = self._db.execute(
            "SELECT r.trial, COALESCE(t.params, s.params) FROM (SELECT DISTINCT trial FROM reports) r "
            "LEFT JOIN tasks t ON t.id = r.trial LEFT JOIN results s ON s.id = r.trial"
        )
        params = {trial: loads_point(p) for trial, p in rows if p is not None}
        for row in reversed(self.lineage()):
            params[row["trial"]] = row["old_params"]
        return params

    def ended(self) -> list[int]:
        """Trials that reported and whose task ended with a result, by id."""
        if not self._has("reports"):
            return []
        return [
            t
            for (t,) in self._db.execute(
                "SELECT DISTINCT r.trial FROM reports r JOIN results s ON s.id = r.trial ORDER BY r.trial"
            )
        ]

    def promotions(self) -> list[tuple[int, int]]:
        """``(trial, step it paused at)`` of every promotion, in order."""
        if not self._has("promotions"):
            return []
        return [(t, s) for t, s in self._db.execute("SELECT trial, step FROM promotions ORDER BY seq")]

    def pauses(self) -> dict[int, int]:
        """Task id -> how often it paused."""
        return dict(self._db.execute("SELECT task, COUNT(*) FROM pauses GROUP BY task"))

    def checkpointed_in(self, trial: int, attempt: int) -> bool:
        """Whether ``trial``'s run ``attempt`` (its task's) wrote a checkpoint (durable, since deleted,
        or staged or lost with its file in place): it trained on in that run."""
        rows = self._db.execute(f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE trial = ?", (trial,))
        return any(
            checkpoint_attempt(row.path) == attempt and (row.state in (DURABLE, DELETED) or Path(row.path).is_file())
            for row in map(self._row, rows)
        )

    def attempts(self, task: int) -> int:
        """How many failed attempts of ``task`` are kept."""
        return self._db.execute("SELECT COUNT(*) FROM attempts WHERE task = ?", (task,)).fetchone()[0]

    # -- reading -------------------------------------------------------------
    def latest_durable(self, trial: int, trained_past: bool = False) -> CheckpointRow | None:
        """What a PBT clone of ``trial`` starts from: the newest durable checkpoint ``trial`` wrote
        itself since its last PBT clone; ``None`` when it wrote none (the checkpoint it was cloned
        from is another trial's, possibly the one that would clone it now). ``trained_past``: only
        one that came with an earlier report than ``trial``'s latest, so never its final one."""
        clone = self._last_clone(trial)
        before = None
        if trained_past:
            row = self._db.execute("SELECT MAX(seq) FROM reports WHERE trial = ?", (trial,)).fetchone()
            before = row[0] if row is not None and row[0] is not None else 0
        return next(iter(self._own(trial, after=None if clone is None else clone[1], before=before)), None)

    def candidates(self, trial: int) -> list[Restorable]:
        """What ``ctx.restore`` may load for ``trial``, newest first: its own checkpoints (since its
        last PBT clone), then the clone's source. A staged one whose file is in place counts as
        durable (the final name appears only after fsync and rename)."""
        return [Restorable(r.path, r.step) for r in self._restorable(trial)]

    def _last_clone(self, trial: int) -> tuple[int, int] | None:
        """``(checkpoint, report)`` of ``trial``'s last PBT clone."""
        row = self._db.execute(
            "SELECT checkpoint, report FROM lineage WHERE trial = ? ORDER BY seq DESC LIMIT 1", (trial,)
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def _restorable(self, trial: int) -> list[CheckpointRow]:
        clone = self._last_clone(trial)
        out = list(self._own(trial, after=None if clone is None else clone[1]))
        if clone is not None:
            row = self.checkpoint(clone[0])
            if row is not None and row.state == DURABLE:
                out.append(row)
        return out

    def _own(self, trial: int, after: int | None, before: int | None = None) -> Iterable[CheckpointRow]:
        """``trial``'s checkpoints that came with a report after seq ``after`` (and before ``before``), newest first."""
        rows = self._db.execute(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE trial = ? AND state != ? "
            "AND report > ? AND report < ? ORDER BY step DESC, id DESC",
            (trial, DELETED, after or 0, _NO_SEQ if before is None else before),
        )
        for row in [self._row(r) for r in rows]:
            if row.state in (STAGED, LOST):  # its file in place: written (the final name comes last)
                if not Path(row.path).is_file():
                    continue
                self.mark_durable([row.path])
                row = replace(row, state=DURABLE)
            yield row

    def checkpoint(self, id_: int) -> CheckpointRow | None:
        row = self._db.execute(f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE id = ?", (id_,)).fetchone()
        return None if row is None else self._row(row)

    def checkpoints(self, states: Sequence[str] = (STAGED, DURABLE)) -> list[CheckpointRow]:
        if not self._has("checkpoints"):
            return []
        marks = ",".join("?" * len(states))
        rows = self._db.execute(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE state IN ({marks}) ORDER BY trial, step, id",
            tuple(states),
        )
        return [self._row(r) for r in rows]

    def durable_at(self, paths: Sequence[str]) -> list[CheckpointRow]:
        """The durable checkpoints written at ``paths``."""
        return self.checkpoints_at(paths, (DURABLE,))

    def checkpoints_at(
        self, paths: Sequence[str], states: Sequence[str] = (STAGED, DURABLE, DELETED)
    ) -> list[CheckpointRow]:
        """The checkpoints in ``states`` recorded at ``paths``."""
        out: list[CheckpointRow] = []
        marks = ",".join("?" * len(states))
        for chunk, path_marks in in_slices([self._stored(p) for p in paths]):
            rows = self._db.execute(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE state IN ({marks}) AND path IN ({path_marks})",
                (*states, *chunk),
            )
            out.extend(self._row(r) for r in rows)
        return out

    def checkpoints_by_id(self, ids: Iterable[int]) -> list[CheckpointRow]:
        out: list[CheckpointRow] = []
        for chunk, marks in in_slices(list(ids)):
            rows = self._db.execute(f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE id IN ({marks})", chunk)
            out.extend(self._row(r) for r in rows)
        return out

    def durable_of(self, trials: Iterable[int]) -> list[CheckpointRow]:
        out: list[CheckpointRow] = []
        for chunk, marks in in_slices(sorted(set(trials))):
            rows = self._db.execute(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE state = ? AND trial IN ({marks})",
                (DURABLE, *chunk),
            )
            out.extend(self._row(r) for r in rows)
        return out

    def best_durable(self, n: int) -> list[CheckpointRow]:
        if n <= 0 or not self._has("checkpoints"):
            return []
        rows = self._db.execute(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE state = ? ORDER BY loss IS NULL, loss, id LIMIT ?",
            (DURABLE, n),
        )
        return [self._row(r) for r in rows]

    def pinned(self) -> set[int]:
        """Checkpoints a PBT clone was made from (kept while lineage may restore them)."""
        return {i for (i,) in self._db.execute("SELECT DISTINCT checkpoint FROM lineage")}

    def has_reports(self) -> bool:
        return self._has("reports") and self._db.execute("SELECT 1 FROM reports LIMIT 1").fetchone() is not None

    def reports(self, trial: int | None = None) -> list[StoredReport]:
        if not self._has("reports"):
            return []
        sql = "SELECT seq, trial, step, metrics, time FROM reports"
        rows = self._db.execute(
            sql + " ORDER BY seq" if trial is None else sql + " WHERE trial = ? ORDER BY seq",
            () if trial is None else (trial,),
        )
        return [StoredReport(seq, t, step, loads_metrics(m), when) for seq, t, step, m, when in rows]

    def first_end(self, trial: int) -> TrialEnd | None:
        """The report ``trial``'s scheduler first answered ``stop`` or ``complete``; ``None`` while it
        ended none."""
        return self._first_ends("trial = ? AND action IN (?, ?)", (trial,)).get(trial)

    def first_ends(self) -> dict[int, TrialEnd]:
        """Trial -> the report it was first answered ``stop`` or ``complete`` at (its later reports, an
        objective's that went on, reached no scheduler)."""
        return self._first_ends("action IN (?, ?)", ())

    def _first_ends(self, where: str, params: Sequence[Any]) -> dict[int, TrialEnd]:
        ends: dict[int, TrialEnd] = {}
        for trial, step, action, seq in self._decisions(where, (*params, Action.STOP.value, Action.COMPLETE.value)):
            ends.setdefault(trial, TrialEnd(step, action, seq))
        return ends

    def reports_between(self, after: int, before: int) -> list[StoredReport]:
        """The reports whose seq lies strictly between ``after`` and ``before``, in seq order."""
        if not self._has("reports"):
            return []
        rows = self._db.execute(
            "SELECT seq, trial, step, metrics, time FROM reports WHERE seq > ? AND seq < ? ORDER BY seq",
            (after, before),
        )
        return [StoredReport(seq, t, step, loads_metrics(m), when) for seq, t, step, m, when in rows]

    def task_params(self, ids: Sequence[int]) -> dict[int, Any]:
        """Task id -> the parameters its ``tasks`` row holds, for the ids among ``ids`` it has."""
        found: dict[int, Any] = {}
        for chunk, marks in in_slices(ids):
            rows = self._db.execute(f"SELECT id, params FROM tasks WHERE id IN ({marks})", chunk)
            found.update({i: loads_point(p) for i, p in rows})
        return found

    def lineage(self) -> list[dict[str, Any]]:
        if not self._has("lineage"):
            return []
        rows = self._db.execute(
            "SELECT trial, step, donor, checkpoint, old_params, new_params, report FROM lineage ORDER BY seq"
        )
        return [
            {
                "trial": t,
                "step": s,
                "donor": d,
                "checkpoint": c,
                "old_params": json.loads(o),
                "new_params": json.loads(n),
                "report": r,
            }
            for t, s, d, c, o, n, r in rows
        ]

    def _has(self, table: str) -> bool:
        return (
            self._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone()
            is not None
        )
