"""The Store conformance: the same test functions run against the SQLite store and a PostgreSQL
store on a real server (tests/store/conftest.py), each on a fresh store, and answer the same."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pgserver import PgServer

from emews.core.build import current_build
from emews.core.results import Outcome, Result, Status, Task, TrialEnd, reports_before_ends
from emews.store import DELETED, DURABLE, LOST, RESULT_FIELDS, STAGED, Store, StoreIncompatible, open_store
from emews.store.base import StoreNewer
from emews.store.results_store import ResultsStore
from emews.training.messages import CheckpointNote, Ending, Report

BACKENDS = ("sqlite", "postgresql")


def _new_store(backend: str, request: pytest.FixtureRequest, folder: Path) -> Store:
    if backend == "sqlite":
        return ResultsStore(folder / "results.db", root=folder)
    from emews.store.postgres import PostgresStore

    server: PgServer = request.getfixturevalue("pg_server")
    schema = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:50]
    return PostgresStore(server.url(), schema, root=folder)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    opened = _new_store(request.param, request, tmp_path)
    yield opened
    opened.close()


def _task(i: int, **params: Any) -> Task:
    return Task(i, {"x": i / 4, "name": f"p{i}", **params}, 100 + i, 1000.0 + i)


def _result(i: int, status: Status = Status.OK, loss: float | None = None, **metrics: Any) -> Result:
    value = float(i) if loss is None else loss
    return Result(
        id=i,
        params={"x": i / 4, "name": f"p{i}"},
        status=status,
        objective=value if status == Status.OK else None,
        loss=value if status == Status.OK else math.inf,
        metrics=metrics,
        error=None if status == Status.OK else f"boom {i}",
        rank=1 + i % 2,
        host="node",
        submitted=1000.0 + i,
        started=1000.5 + i,
        finished=1001.2345 + i,
    )


def test_commit_add_iterate(store: Store) -> None:
    store.commit([_task(i) for i in range(4)], [_result(0, m=1), _result(1, Status.FAILED)])
    store.add([_result(2, loss=-1.0, m=2, extra="a")])
    assert [r.id for r in store] == [0, 1, 2]
    assert list(store)[2] == _result(2, loss=-1.0, m=2, extra="a")
    assert store.status_counts() == {"ok": 2, "failed": 1}
    assert store.finished_ids() == {0, 1, 2}
    assert list(store.failure_errors()) == ["boom 1"]
    assert store.metric_names() == ["m", "extra"]
    assert store.param_keys() == ["x", "name"]
    assert store.count_results() == 3 and store.count_results(1) == 2
    assert store.result_id_at(0, 2) == 2 and store.result_id_at(0, 3) is None
    assert [r.id for r in store.point_results()] == [0, 1, 2]
    assert [r.id for r in store.results_by_completion()] == [0, 1, 2]


def test_a_nul_in_a_failed_commands_error_is_stored(store: Store) -> None:
    """A command's error quotes its stderr, NUL bytes included: SQLite keeps them, PostgreSQL
    (whose text has no NUL) gets U+FFFD, as undecodable bytes do; nothing else is lost."""
    failed = replace(_result(0, Status.FAILED), error="exit 1: a\x00b", host="no\x00de")
    store.commit([_task(0), _task(1)], [failed, _result(1)])
    stored = {r.id: r for r in store}
    nul = "\ufffd" if store.location.startswith("postgres") else "\x00"
    assert stored[0].error == f"exit 1: a{nul}b" and stored[0].host == f"no{nul}de"
    assert stored[1] == _result(1)


def test_best_and_next_id(store: Store) -> None:
    assert store.best() is None and store.next_id() == 0
    store.commit([_task(i) for i in range(5)], [_result(3, loss=0.5), _result(1, loss=0.5), _result(2, Status.FAILED)])
    best = store.best()
    assert best is not None and best.id == 1
    assert store.next_id() == 5
    store.add_report(Report(9, 0, 1, {"loss": 1.0}, 5.0), 1.0, 1.0)
    assert store.next_id() == 10  # a trial's report holds its id from its start


def test_duplicate_result_is_an_error(store: Store) -> None:
    store.add([_result(0)])
    with pytest.raises(Exception):  # noqa: B017, PT011 - each backend's own integrity error
        store.add([_result(0)])
    assert [r.id for r in store] == [0]


def test_unfinished_and_attempts(store: Store) -> None:
    store.commit([_task(0), _task(1), Task(2, {"x": 1}, 5, 1.0, ranks=3)], [_result(0)])
    store.commit([_task(1)])  # written twice: kept once
    store.mark_attempted([1])
    unfinished = store.unfinished()
    assert [(t.id, t.ranks, n) for t, n in unfinished] == [(1, 1, 1), (2, 3, 0)]
    assert unfinished[0][0].params == {"x": 0.25, "name": "p1"}
    assert store.count_unfinished() == 2
    assert store.unfinished_ranks() == 4  # task 1's rank and task 2's team of 3 (emews status: busy)
    store.add_attempt(_task(1), 0, Outcome(1, Status.CRASHED, error="segfault", rank=1, host="h"))
    assert store.attempts(1) == 1 and store.attempts(0) == 0
    store.add_pause(2, 7)
    store.add_pause(2, 9)
    assert store.pauses() == {2: 2}


def test_csv_rows(store: Store) -> None:
    store.add([replace(_result(0, m=1), seed=17), _result(1, Status.FAILED)])
    rows = list(store.csv_rows(0))
    assert rows[0] == (
        0,
        "ok",
        0.0,
        '{"x":0.0,"name":"p0"}',
        '{"m":1}',
        "",
        1,
        "node",
        "1970-01-01T00:16:40.000+00:00",
        "1970-01-01T00:16:40.500+00:00",
        "1970-01-01T00:16:41.235+00:00",
        17,  # the task's ctx.seed
    )
    assert rows[1][5] == "boom 1" and rows[1][4] == "{}" and rows[1][-1] is None  # a result without a seed
    assert store.task_seeds([0, 1]) == {0: 17}
    assert [r[0] for r in store.csv_rows(1, 2)] == [1]


def test_durable_checkpoints_by_trial_and_the_best(store: Store, tmp_path: Path) -> None:
    """What pooled retention reads (``durable_of``, ``best_durable``): durable rows only, the best
    by smallest loss, one without a loss last, the older first on ties."""
    losses = {(0, 1): 3.0, (0, 2): 1.0, (1, 1): None, (1, 2): 1.0, (2, 1): 0.5}
    for (trial, step), loss in losses.items():
        path = tmp_path / "checkpoints" / f"{trial:06d}" / f"step-{step}.ckpt"
        note = CheckpointNote(str(path), 10)
        first = _task(trial) if step == 1 else None
        store.add_report(Report(trial, 0, step, {"loss": loss}, 10.0 + step, note), loss, loss, task=first)
        if (trial, step) != (2, 1):  # staged only
            store.mark_durable([str(path)])
    assert sorted((r.trial, r.step) for r in store.durable_of([0, 1, 7])) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert store.durable_of([]) == []
    assert [(r.trial, r.step) for r in store.best_durable(5)] == [(0, 2), (1, 2), (0, 1), (1, 1)]
    assert [(r.trial, r.step) for r in store.best_durable(1)] == [(0, 2)] and store.best_durable(0) == []


def test_a_checkpoint_path_written_again_is_its_newest_write(store: Store, tmp_path: Path) -> None:
    """A retry that started over writes the name its failed try wrote (deleted by retention since):
    the row is the retry's (its step's report and metric, staged again, then durable), not the
    failed try's kept as it was (PostgreSQL too: an upsert on the path)."""
    path = str(tmp_path / "checkpoints" / "000000" / "step-00000001-000.ckpt")
    store.add_report(Report(0, 0, 1, {"loss": 9.0}, 10.0, CheckpointNote(path, 10)), 9.0, 9.0, task=_task(0))
    store.mark_durable([path])
    (first,) = store.checkpoints()
    store.mark_deleted([first.id])
    store.add_report(Report(0, 1, 1, {"loss": 1.0}, 11.0, CheckpointNote(path, 12)), 1.0, 1.0)
    assert [(r.id, r.state, r.metric, r.size) for r in store.checkpoints()] == [(first.id, "staged", 1.0, 12)]
    store.mark_durable([path])
    (again,) = store.checkpoints()
    assert (again.id, again.state, again.metric, again.loss) == (first.id, "durable", 1.0, 1.0)


def test_reports_checkpoints_lineage(store: Store, tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoints" / "0" / "step-2.pt"
    task0 = _task(0)
    seq1 = store.add_report(Report(0, 0, 1, {"loss": 3.0}, 10.0), 3.0, 3.0, task=task0)
    seq2 = store.add_report(Report(0, 0, 2, {"loss": 2.0}, 11.0, CheckpointNote(str(ckpt), 123)), 2.0, 2.0)
    assert seq2 > seq1
    assert [c.state for c in store.checkpoints()] == [STAGED]
    assert store.checkpoints()[0].path == str(ckpt)  # kept relative, read back in this experiment
    store.mark_durable([str(ckpt)])
    [row] = store.checkpoints((DURABLE,))
    assert (row.trial, row.step, row.size, row.metric) == (0, 2, 123, 2.0)
    assert store.latest_durable(0) == row and store.checkpoint(row.id) == row
    assert store.latest_durable(0, trained_past=True) is None  # it came with trial 0's latest report
    assert [c.path for c in store.candidates(0)] == [str(ckpt)]
    assert store.durable_at([str(ckpt)]) == [row] and store.checkpoints_by_id([row.id]) == [row]
    store.add_report(Report(1, 0, 1, {"loss": 5.0}, 12.0), 5.0, 5.0, task=_task(1))
    store.add_lineage(1, 1, 0, row.id, {"x": 0.25}, {"x": 0.5}, seq2)
    assert store.pinned() == {row.id}
    # trial 1 restores the checkpoint it cloned, but has none of its own to give a clone of it
    assert [c.path for c in store.candidates(1)] == [str(ckpt)] and store.latest_durable(1) is None
    assert store.lineage()[0]["new_params"] == {"x": 0.5} and store.lineage()[0]["donor"] == 0
    assert store.unfinished()[1][0].params == {"x": 0.5}  # the exploit's parameters run on resume
    store.add_decision(0, 2, "stop", seq2)
    store.add_decision(0, 3, "stop")
    assert store.first_ends() == {0: TrialEnd(2, "stop", seq2)}
    assert store.first_end(0) == TrialEnd(2, "stop", seq2) and store.first_end(1) is None
    assert store.scheduler_end(0) == "stop"
    store.add([_result(0)])
    states = store.trial_states()
    assert states[0].step == 2 and states[0].action == "stop" and states[1].clones == ((0, 2),)
    assert store.endings() == {0: Ending.after("stop")} and store.report_endings() == store.endings()
    assert store.ended_by_scheduler(0) and not store.ended_by_scheduler(1)
    assert store.started_params()[1] == {"x": 0.25}
    assert store.ended() == [0]
    assert store.top_steps() == {0: 2, 1: 1}
    assert [(r.trial, r.step) for r in store.reports()] == [(0, 1), (0, 2), (1, 1)]
    assert [r.step for r in store.reports(0)] == [1, 2] and store.has_reports()
    curves = store.report_curves()
    assert curves is not None and [(c.trial, c.step, c.metrics) for c in curves][:2] == [
        (0, 1, {"loss": 3.0}),
        (0, 2, {"loss": 2.0}),
    ]
    table = store.report_results()
    assert table.checkpoints and table.rows[0][-1] in (str(ckpt), "checkpoints/0/step-2.pt")
    assert sorted(store.busy_spans()) == [(12.0, 12.0), (1000.5, 1001.2345)]
    store.add_report(Report(0, 0, 3, {"loss": 1.5}, 13.0), 1.5, 1.5)
    assert store.latest_durable(0, trained_past=True) == row  # trial 0 reported past it since
    store.mark_deleted([row.id])
    assert store.checkpoints() == [] and store.checkpoints((DELETED,))[0].id == row.id


def test_promotions_and_waits(store: Store) -> None:
    store.add_report(Report(4, 0, 3, {"loss": 1.0}, 1.0), 1.0, 1.0, task=_task(4))
    store.add_wait(4, 3, Outcome(4, Status.OK, 1.0, {"loss": 1.0}, None, 1, "h", 1.0, 2.0))
    store.add_wait(4, 6, Outcome(4, Status.OK, 0.5, {"loss": 0.5}, None, 1, "h", 3.0, 4.0))
    last = store.last_wait(4)
    assert last is not None and last[0] == 6 and last[1].value == 0.5 and last[1].metrics == {"loss": 0.5}
    assert store.waits() == {4} and store.last_wait(5) is None
    store.add_promotion(4, 3, 9, {"x": 1.0, "steps": 9})
    assert store.promotions() == [(4, 3)]
    assert store.unfinished()[0][0].params == {"x": 1.0, "steps": 9}


def test_readonly_second_opening(store: Store) -> None:
    store.commit([_task(0)], [_result(0)])
    with open_store(location=store.location, readonly=True) as reader:
        assert [r.id for r in reader] == [0]
        assert reader.best() == store.best()
        reader.verify()
    store.verify(writing=True)


def _teams(store: Store) -> list[tuple[int, ...] | None]:
    """The ranks each result's team held, as ``emews report`` reads them."""
    return [row[len(RESULT_FIELDS) + 2] for row in store.report_results().rows]


def test_the_ranks_of_a_team_are_recorded(store: Store) -> None:
    """A multi-rank task's result keeps every world rank its team held, team rank 0 first; a
    task of one rank keeps none (its ``rank`` says it all)."""
    store.commit(
        [_task(i) for i in range(3)],
        [replace(_result(0), rank=3, team=(3, 1, 2)), _result(1), replace(_result(2), team=(2,))],
    )
    assert _teams(store) == [(3, 1, 2), None, None]
    with open_store(location=store.location, readonly=True) as reader:
        assert _teams(reader) == [(3, 1, 2), None, None]


def test_a_store_without_result_seeds_is_read_and_migrated(store: Store) -> None:
    """A store of SQLite schema 2 / PostgreSQL 5 (no ``results.seed``): results.csv's seed is the
    ``tasks`` row's where a task has one, and opened for writing it gets the column."""
    store.commit([_task(0)], [_result(0), _result(1)])
    if type(store) is ResultsStore:
        store.connection.executescript("ALTER TABLE results DROP COLUMN seed; PRAGMA user_version=2")
    else:
        store.connection.execute("ALTER TABLE results DROP COLUMN seed")
        store.connection.execute("UPDATE emews_meta SET value = '5' WHERE key = 'schema_version'")
    with open_store(location=store.location, readonly=True) as reader:
        assert [r[-1] for r in reader.csv_rows(0)] == [100, None] and reader.task_seeds([0, 1]) == {0: 100}
    with open_store(location=store.location) as writer:
        writer.add([replace(_result(2), seed=7)])
        assert [r[-1] for r in writer.csv_rows(0)] == [100, None, 7]


def test_a_store_whose_decisions_name_no_report_matches_them_by_step(store: Store) -> None:
    """A store of SQLite schema 3 / PostgreSQL 6 (``decisions`` without ``report``): its decisions
    are matched to the trial's first report of their step, read-only and once migrated; a decision
    written after the migration names its report, so a retried step's second report is the one
    answered (trial 0 reports 1, 2, 3, then 3 again after a retry)."""
    seqs = [store.add_report(Report(0, 0, step, {"loss": 1.0 / step}, 0.0), None, None) for step in (1, 2, 3, 3)]
    store.add([_result(0)])
    if type(store) is ResultsStore:
        store.connection.executescript("ALTER TABLE decisions DROP COLUMN report; PRAGMA user_version=3")
    else:
        store.connection.execute("ALTER TABLE decisions DROP COLUMN report")
        store.connection.execute("UPDATE emews_meta SET value = '6' WHERE key = 'schema_version'")
    store.connection.execute("INSERT INTO decisions (trial, step, action, time) VALUES (0, 3, 'stop', 0)")
    with open_store(location=store.location, readonly=True) as reader:
        assert reader.first_end(0) == TrialEnd(3, "stop", None)
        assert [r.seq for r in reports_before_ends(reader.reports(), reader.first_ends())] == seqs[:3]
        assert reader.trial_state(0).action == "stop" and reader.stopped_early(0)  # type: ignore[union-attr]
    with open_store(location=store.location) as writer:
        writer.add_report(Report(1, 0, 1, {"loss": 1.0}, 0.0), None, None)
        seq = writer.add_report(Report(1, 0, 1, {"loss": 2.0}, 0.0), None, None)
        writer.add_decision(1, 1, "stop", seq)
        assert writer.first_ends() == {0: TrialEnd(3, "stop", None), 1: TrialEnd(1, "stop", seq)}
        assert [r.seq for r in reports_before_ends(writer.reports(1), writer.first_ends())] == [seq - 1, seq]
        assert writer.trial_states()[0].action == "stop" and writer.endings() == {0: Ending.STOPPED_EARLY}


def test_a_store_without_team_ranks_is_read_and_migrated(store: Store) -> None:
    """A store of schema 1 (no ``team_ranks``): read as it is (no team known), and given the column
    when opened for writing."""
    store.add([_result(0)])
    if type(store) is ResultsStore:
        store.connection.executescript("ALTER TABLE results DROP COLUMN team_ranks; PRAGMA user_version=1")
    else:
        store.connection.execute("ALTER TABLE results DROP COLUMN team_ranks")
        store.connection.execute("UPDATE emews_meta SET value = '1' WHERE key = 'schema_version'")
    with open_store(location=store.location, readonly=True) as reader:
        assert "team_ranks" not in reader._columns("results")  # type: ignore[attr-defined]
        assert [r.id for r in reader] == [0] and _teams(reader) == [None]
    with open_store(location=store.location) as writer:
        writer.add([replace(_result(1), team=(1, 2))])
        assert _teams(writer) == [None, (1, 2)]


def test_newer_schema_is_refused(store: Store) -> None:
    if isinstance(store, ResultsStore) and type(store) is ResultsStore:
        store.connection.execute("PRAGMA user_version=99")
    else:
        store.connection.execute("UPDATE emews_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreIncompatible, match="newer emews"):
        open_store(location=store.location, readonly=True)


def test_a_postgres_schema_names_the_emews_that_wrote_it_when_refused(pg_server: PgServer, tmp_path: Path) -> None:
    """A newer schema was refused with "use that version": the schema keeps the emews that created or
    last migrated it (``emews_meta``), which the refusal names (a pool opens it by URL, without the
    experiment's experiment.json)."""
    from emews.store import postgres_queries as q
    from emews.store.postgres import PostgresStore

    with PostgresStore(pg_server.url(), "t_newer_build", root=tmp_path) as made:
        assert json.loads(made.connection.execute(q.GET_BUILD).fetchone()[0]) == current_build().record()
        made.connection.execute(q.SET_BUILD, (json.dumps({"version": "0.2.0", "commit": "ab" * 20}),))
        made.connection.execute("UPDATE emews_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreNewer) as refused:
        open_store(location=f"{pg_server.url()}#t_newer_build", readonly=True)
    assert refused.value.message == (
        f"written by a newer emews (schema 99; this one reads up to {q.SCHEMA_VERSION}): "
        "use emews 0.2.0 (commit abababababab)"
    )


def test_postgres_migrates_an_older_schema(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of version N opened by an emews of version N + 1 runs that version's migration, once,
    and records it; opened read-only it is read as it is."""
    from emews.store import postgres_queries as q
    from emews.store.postgres import PostgresStore

    with PostgresStore(pg_server.url(), "t_migrate", root=tmp_path) as old:
        old.add([_result(0)])
    new_version = q.SCHEMA_VERSION + 1
    monkeypatch.setattr(q, "SCHEMA_VERSION", new_version)
    monkeypatch.setattr(q, "MIGRATIONS", {new_version: ("ALTER TABLE results ADD COLUMN note TEXT",)})
    with PostgresStore(pg_server.url(), "t_migrate", readonly=True) as reader:
        assert "note" not in reader._columns("results") and [r.id for r in reader] == [0]
    with PostgresStore(pg_server.url(), "t_migrate", root=tmp_path) as new:
        assert "note" in new._columns("results")
        assert new.connection.execute(q.GET_VERSION).fetchone()[0] == str(new_version)
        new.add([_result(1)])
    with PostgresStore(pg_server.url(), "t_migrate", root=tmp_path) as again:  # not run twice
        assert [r.id for r in again] == [0, 1]


def test_postgres_readonly_needs_the_schema(pg_server: PgServer) -> None:
    from emews.store import StoreUnreadable
    from emews.store.postgres import PostgresStore

    with pytest.raises(StoreUnreadable, match="no schema t_never"):
        PostgresStore(pg_server.url(), "t_never", readonly=True)


def test_psycopg_is_loaded_only_for_a_postgresql_store() -> None:
    """SQLite users neither need nor load the driver: the commands and the store package import
    without it (it is imported when a PostgreSQL store is opened)."""
    from testutil import modules_loaded_by

    assert modules_loaded_by("emews, emews.store, emews.cli, emews.job.launching", ("psycopg",), ()) == []


def test_staged_checkpoints_never_written_are_lost(store: Store, tmp_path: Path) -> None:
    """``mark_lost``: a staged checkpoint whose file is not there (of the trials named, or of every
    trial) is lost; one whose file is there stays staged (its writer's word is on its way); a lost one
    is never a restore candidate, and a writer that says it wrote it after all makes it durable."""
    folder = tmp_path / "checkpoints" / "000000"
    folder.mkdir(parents=True)
    paths = {step: folder / f"step-{step}.ckpt" for step in (1, 2, 3)}
    paths[1].write_bytes(b"written")
    for step, path in paths.items():
        store.add_report(Report(0, 0, step, {"loss": 1.0}, 10.0 + step, CheckpointNote(str(path), 7)), 1.0, 1.0,
                         task=_task(0) if step == 1 else None)
    other = tmp_path / "checkpoints" / "000001" / "step-1.ckpt"
    store.add_report(Report(1, 0, 1, {"loss": 1.0}, 20.0, CheckpointNote(str(other), 7)), 1.0, 1.0, task=_task(1))
    assert store.mark_lost([0]) == 2
    assert [(r.trial, r.step, r.state) for r in store.checkpoints((STAGED, LOST))] == [
        (0, 1, STAGED), (0, 2, LOST), (0, 3, LOST), (1, 1, STAGED)]
    assert [c.step for c in store.candidates(0)] == [1]
    assert store.mark_lost() == 1 and [r.trial for r in store.checkpoints((LOST,))] == [0, 0, 1]
    store.mark_durable([str(paths[3])])
    assert [(r.step, r.state) for r in store.checkpoints((STAGED, DURABLE, LOST)) if r.trial == 0] == [
        (1, "durable"), (2, LOST), (3, DURABLE)]



def test_a_stop_at_the_full_course_reads_complete_and_is_stored_so(store: Store) -> None:
    """An ASHA before f3134cc answered ``stop`` at ``max_t``: a reader that knows the full course
    reads it ``complete`` (the trial ``completed``), and ``complete_full_courses`` stores it so; a
    stop before it stays a stop."""
    for trial, last in ((0, 3), (1, 2), (2, 3)):
        for step in range(1, last + 1):
            seq = store.add_report(Report(trial, 0, step, {"loss": 1.0}, 10.0 + step), 1.0, 1.0, task=_task(trial))
            if trial == 2:  # an objective that ignores its stop: answered stop at every report from step 1
                store.add_decision(trial, step, "stop", seq)
        if trial != 2:
            store.add_decision(trial, last, "stop", seq)
    store.add([_result(0), _result(1), _result(2)])
    stopped = {0: Ending.STOPPED_EARLY, 1: Ending.STOPPED_EARLY, 2: Ending.STOPPED_EARLY}
    assert store.endings() == stopped  # as stored, told nothing more
    store.full_course = 3
    # trial 2's stop at step 3 is not its first: it was stopped at step 1, early
    assert store.endings() == {**stopped, 0: Ending.COMPLETED}
    assert store.scheduler_end(0) == "complete" and not store.stopped_early(0) and store.stopped_early(1)
    assert store.scheduler_end(2) == "stop" and store.stopped_early(2)
    store.full_course = None
    store.complete_full_courses(3)
    assert store.scheduler_end(0) == "complete" and store.scheduler_end(1) == "stop"
    assert store.endings() == {**stopped, 0: Ending.COMPLETED}
