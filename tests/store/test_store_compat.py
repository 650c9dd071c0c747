"""Stores of another schema version, or with rows this version cannot read (finding 8 of
``shared/findings/reliability-2026-11-26.md``): every bad store is built with sqlite3 from a real
small run's, and each command refuses it at the start with one line (exit 2), or works."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import emews
from emews.config.experiment import EXPERIMENT_FORMAT
from emews.core.build import current_build
from emews.store.results_store import SCHEMA_VERSION, ResultsStore
from testutil import EmewsCommand, stored_rows, write_workflow

READERS = ("results", "status", "report")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("store")
    wf = write_workflow(folder, budget={"evaluations": 6}, task={"timeout": 30, "isolation": "inline"})
    EmewsCommand(folder)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=180, check=True)
    return folder / "exp"


@pytest.fixture
def exp(small_run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "exp"
    shutil.copytree(small_run, copy)
    return copy


def alter(exp: Path, script: str) -> None:
    db = sqlite3.connect(exp / "results.db")
    db.executescript(script)
    db.close()


def user_version(exp: Path) -> int:
    db = sqlite3.connect(exp / "results.db")
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def fingerprint(exp: Path) -> tuple:
    """What a refused command must leave as it was: the rows, the CSV, no lease."""
    return (
        stored_rows(exp),
        hashlib.sha256((exp / "results.csv").read_bytes()).hexdigest(),
        (exp / "lease.json").exists(),
    )


def refused(emews_cmd: EmewsCommand, exp: Path, command: str, *fragments: str, file: str = "results.db") -> None:
    before = fingerprint(exp)
    proc = emews_cmd(command, str(exp), timeout=180)
    assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"emews: error: {exp / file}: "), (command, lines)
    for fragment in fragments:
        assert fragment in lines[0], (command, lines[0])
    assert fingerprint(exp) == before, command


def test_a_new_store_has_the_schema_version_and_a_column_of_a_newer_version_keeps_its_results(
    emews_cmd, exp: Path
) -> None:
    """The insert named no columns: results run after resume were lost (13 columns, 12 values)."""
    assert user_version(exp) == SCHEMA_VERSION
    alter(exp, "ALTER TABLE results ADD COLUMN future_col TEXT; ALTER TABLE tasks ADD COLUMN future_col TEXT")
    proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=9", timeout=180)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(exp)
    assert [r["id"] for r in rows] == list(range(9)) and {r["future_col"] for r in rows} == {None}
    assert all(r["status"] == "ok" for r in rows)


def test_a_store_of_a_newer_schema_is_refused_by_every_command_before_anything_runs(emews_cmd, exp: Path) -> None:
    alter(exp, f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    for command in ("resume", *READERS):
        refused(
            emews_cmd,
            exp,
            command,
            f"written by a newer emews (schema {SCHEMA_VERSION + 5}; this one reads up to {SCHEMA_VERSION})",
        )


def test_an_experiment_a_newer_emews_made_is_refused_naming_the_schemas_not_a_key_of_its_files(
    emews_cmd, exp: Path
) -> None:
    """A newer emews also records keys this one does not know in the experiment's site.yaml and
    workflow.yaml: resume read site.yaml first and said ``site.yaml: future_key: unknown key``,
    blaming a file nobody wrote by hand, not the version (the readers named the schemas already)."""
    alter(exp, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    for name in ("site.yaml", "workflow.yaml"):
        recorded = exp / name
        recorded.write_text(recorded.read_text() + "future_key: 1\n")
    for command in ("resume", *READERS):
        refused(
            emews_cmd,
            exp,
            command,
            f"written by a newer emews (schema {SCHEMA_VERSION + 1}; this one reads up to {SCHEMA_VERSION})",
        )


#: the emews a newer experiment records (``experiment.json``'s ``emews``) and how a refusal names it
NEWER = {"version": "0.2.0", "commit": "ab" * 20, "source": "cd" * 32}
USE_NEWER = "use emews 0.2.0 (commit abababababab, source cdcdcdcdcdcd)"


def made_by_newer(exp: Path, **fields: object) -> None:
    """Record in ``exp``'s experiment.json that :data:`NEWER` ran it last (and ``fields``)."""
    info = json.loads((exp / "experiment.json").read_text())
    (exp / "experiment.json").write_text(json.dumps({**info, "emews": NEWER, **fields}))


def test_a_store_of_a_newer_schema_is_refused_naming_the_emews_that_wrote_it(emews_cmd, exp: Path) -> None:
    """The refusal said "use that version" and could not say which (experiment.json recorded the
    installed distribution's version, 0.1.0 for every commit): it names the emews of the latest launch
    or resume, the one that migrated the store to its schema."""
    alter(exp, f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    made_by_newer(exp)
    for command in ("resume", *READERS):
        refused(
            emews_cmd,
            exp,
            command,
            f"(schema {SCHEMA_VERSION + 1}; this one reads up to {SCHEMA_VERSION}): {USE_NEWER}",
        )


def test_an_experiment_of_a_newer_format_is_refused_naming_its_emews_not_a_key_of_its_files(
    emews_cmd, exp: Path
) -> None:
    """A newer emews that adds a site or workflow key without changing the store's schema: resume said
    ``EXP/site.yaml: future_key: unknown key`` (and the readers the same of workflow.yaml), blaming a
    file nobody wrote by hand. experiment.json's ``format`` says the records are a newer emews's."""
    made_by_newer(exp, format=EXPERIMENT_FORMAT + 1)
    for name in ("site.yaml", "workflow.yaml"):
        recorded = exp / name
        recorded.write_text(recorded.read_text() + "future_key: 1\n")
    for command in ("resume", *READERS):
        refused(
            emews_cmd,
            exp,
            command,
            f"made by a newer emews (experiment format {EXPERIMENT_FORMAT + 1}; this one reads up to "
            f"{EXPERIMENT_FORMAT}): {USE_NEWER}",
            file="experiment.json",
        )


def test_an_experiment_records_its_format_and_the_emews_of_its_latest_run(emews_cmd, exp: Path) -> None:
    """A resume records the emews that ran it over the one that made the experiment: it migrates the
    store to its schema, and an older emews then names it."""
    info = json.loads((exp / "experiment.json").read_text())
    assert info["format"] == EXPERIMENT_FORMAT and info["emews"] == current_build().record()
    made_by_newer(exp, format=0)  # as if an older emews had made it (same schema)
    assert emews_cmd("resume", str(exp), "--set", "budget.evaluations=7", timeout=180).returncode == 0
    info = json.loads((exp / "experiment.json").read_text())
    assert info["format"] == EXPERIMENT_FORMAT and info["emews"] == current_build().record()


@pytest.mark.parametrize("column", ["loss", "host"])
def test_a_results_table_without_a_column_this_version_reads_is_one_line(emews_cmd, exp: Path, column: str) -> None:
    """``emews results`` printed an sqlite3.OperationalError traceback; resume ended in MPI_Abort."""
    alter(exp, f"ALTER TABLE results DROP COLUMN {column}")
    for command in ("resume", *READERS):
        refused(emews_cmd, exp, command, f"table results has no column {column}")


def test_a_column_this_version_cannot_fill_refuses_resume_and_reading_goes_on(emews_cmd, exp: Path) -> None:
    db = sqlite3.connect(exp / "results.db")
    create = db.execute("SELECT sql FROM sqlite_master WHERE name = 'results'").fetchone()[0]
    db.close()
    alter(
        exp,
        create.replace("CREATE TABLE results (", "CREATE TABLE newer (future TEXT NOT NULL, ")
        + "; INSERT INTO newer SELECT 'x', * FROM results; DROP TABLE results; ALTER TABLE newer RENAME TO results",
    )
    refused(emews_cmd, exp, "resume", "table results has a column future that this emews cannot fill")
    assert emews_cmd("results", str(exp)).returncode == 0


def test_a_row_whose_point_is_not_json_is_one_line_naming_it(emews_cmd, exp: Path) -> None:
    alter(exp, "UPDATE results SET params = 'not json {' WHERE id = 3")
    for command in ("resume", "results"):
        refused(emews_cmd, exp, command, "results row id 3: params is not a JSON object")


def test_a_row_with_an_unknown_status_is_one_line_naming_it(emews_cmd, exp: Path) -> None:
    """resume failed deep inside with ``'weird' is not a valid Status``, exit 1."""
    alter(exp, "UPDATE results SET status = 'weird' WHERE id = 2")
    for command in ("resume", "results"):
        refused(
            emews_cmd, exp, command, "results row id 2: unknown status 'weird' (allowed: ok, failed, crashed, timeout)"
        )


def test_status_and_report_count_an_unknown_status_once(emews_cmd, exp: Path) -> None:
    """``emews status`` of a store another version wrote said ``6/6 evaluations: 5 ok, 1 weird`` and
    ``1 failed``: the row counted twice. It is said once, as a status this emews does not know, and
    not as failed (what it means is the other version's); the report's budget row says the same."""
    alter(exp, "UPDATE results SET status = 'weird' WHERE id = 2")
    status = emews_cmd("status", str(exp))
    assert status.returncode == 0, status.stderr
    assert "6/6 evaluations: 5 ok, 1 weird (a status this emews does not know)" in status.stdout, status.stdout
    assert "\n0 failed;" in status.stdout, status.stdout
    report = emews_cmd("report", str(exp), timeout=300)
    assert report.returncode == 0, report.stderr
    page = (exp / "report.html").read_text()
    assert page.count("1 weird") == 1 and "1 weird (a status this emews does not know)" in page


def test_a_store_written_before_schema_versions_is_migrated_by_resume(emews_cmd, exp: Path) -> None:
    alter(exp, "ALTER TABLE tasks DROP COLUMN ranks; PRAGMA user_version = 0")
    proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=8", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in stored_rows(exp)] == list(range(8))
    assert user_version(exp) == SCHEMA_VERSION
    db = sqlite3.connect(exp / "results.db")
    assert "ranks" in {row[1] for row in db.execute("PRAGMA table_info(tasks)")}
    db.close()


#: a child that opens the store for writing (migrating it) and is killed (SIGKILL, as ``kill -9`` of
#: the job) as SQLite prepares the migration's second ALTER TABLE: the first one is done by then
_KILLED_WHILE_MIGRATING = """
import os, signal, sqlite3, sys
from emews.store.results_store import ResultsStore

class KilledWhileMigrating(ResultsStore):
    def _connect(self, durability):
        db = super()._connect(durability)
        alters = []
        def authorize(action, *_):
            if action == sqlite3.SQLITE_ALTER_TABLE:
                alters.append(action)
                if len(alters) == 2:
                    os.kill(os.getpid(), signal.SIGKILL)
            return sqlite3.SQLITE_OK
        db.set_authorizer(authorize)
        return db

KilledWhileMigrating(sys.argv[1])
"""


def columns(exp: Path) -> dict[str, list[str]]:
    db = sqlite3.connect(exp / "results.db")
    try:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {table: [row[1] for row in db.execute(f"PRAGMA table_info({table})")] for table in tables}
    finally:
        db.close()


def test_a_store_killed_while_it_migrates_is_the_old_version_or_the_new(exp: Path) -> None:
    """The migration ran each step in its own transaction: a job killed in the middle left a store
    with the new columns of the first steps under the old version, which neither version wrote."""
    alter(
        exp,
        "ALTER TABLE results DROP COLUMN seed; ALTER TABLE results DROP COLUMN team_ranks; "
        "ALTER TABLE decisions DROP COLUMN report; PRAGMA user_version = 1",
    )
    old, rows = columns(exp), stored_rows(exp)
    child = subprocess.run([sys.executable, "-c", _KILLED_WHILE_MIGRATING, str(exp / "results.db")], check=False)
    assert child.returncode == -signal.SIGKILL
    assert (user_version(exp), columns(exp)) == (1, old)  # the old version, as it was
    assert stored_rows(exp) == rows
    ResultsStore(exp / "results.db").close()  # migrated whole by the next open
    assert user_version(exp) == SCHEMA_VERSION
    new = columns(exp)
    assert {"team_ranks", "seed"} <= set(new["results"]) and "report" in new["decisions"]
    assert stored_rows(exp) == [{**row, "team_ranks": None, "seed": None} for row in rows]


def test_metrics_holding_nan_and_infinity_are_read_and_resumed(emews_cmd, tmp_path: Path) -> None:
    """A dict result whose other metrics are NaN or infinite (a diverged accuracy) is stored as the
    standard library writes it (``NaN``, ``Infinity``); the store's check, SQLite's strict
    ``json_valid``, called every such row corrupt: ``emews results`` and ``emews resume`` refused the
    finished run with "results row id 0: metrics is not a JSON object", ``emews.load`` raised."""
    module = tmp_path / "nan_metrics.py"
    module.write_text(
        "def run(params):\n"
        "    return {'value': params['x'], 'acc': float('nan'), 'up': float('inf'), 'arr': [1.0, float('-inf')]}\n"
    )
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": str(module), "function": "run", "metric": "value"},
        space={"x": {"type": "ordered", "values": [1, 2, 3, 4]}},
        budget={"evaluations": 3},
        task={"timeout": 30, "isolation": "inline"},
    )
    emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    exp = tmp_path / "exp"
    proc = emews_cmd("results", str(exp), timeout=180)
    assert proc.returncode == 0, proc.stderr
    frame = emews.load(exp).results
    assert frame["m:acc"].isna().all() and (frame["m:up"] == float("inf")).all()
    proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=4", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in stored_rows(exp)] == [0, 1, 2, 3]


def test_metrics_of_a_store_written_before_they_were_escaped_are_read(emews_cmd, exp: Path) -> None:
    """A store written before metrics' lone surrogates were escaped (commit 759c33e) holds a
    non-UTF-8 file name as the standard library's JSON escape of the surrogate; read back, the
    string could not be written: ``emews results`` failed with a UnicodeEncodeError traceback."""
    alter(exp, """UPDATE results SET metrics = '{"path": "caf\\udce9.txt", "caf\\udce9": 1}' WHERE id = 0""")
    for command in READERS:
        proc = emews_cmd(command, str(exp), timeout=180)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (command, proc.stderr)
    csv = (exp / "results.csv").read_text(encoding="utf-8")
    assert "m:caf\\udce9" in csv.splitlines()[0] and "caf\\udce9.txt" in csv
    frame = emews.load(exp).results
    assert frame.loc[frame["id"] == 0, "m:path"].item() == "caf\\udce9.txt"


def test_a_finished_run_leaves_no_wal_files_and_readers_make_none(emews_cmd, tmp_path: Path) -> None:
    """results.db-wal and results.db-shm were left beside results.db after a finished local run
    (docs/experiments.md lists neither), and every emews status, results or report made them again:
    a read-only opening of a WAL store creates both and cannot remove them."""
    wf = write_workflow(tmp_path, budget={"evaluations": 4}, task={"timeout": 30, "isolation": "inline"})
    emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=180, check=True)
    exp = tmp_path / "exp"
    leftovers = ["results.db-wal", "results.db-shm"]
    assert [name for name in leftovers if (exp / name).exists()] == []
    for command in READERS:
        assert emews_cmd(command, str(exp), timeout=180).returncode == 0
        assert [name for name in leftovers if (exp / name).exists()] == [], command
    emews_cmd("resume", str(exp), "--set", "budget.evaluations=6", timeout=180, check=True)
    assert [r["id"] for r in stored_rows(exp)] == list(range(6))
    assert [name for name in leftovers if (exp / name).exists()] == []


def test_a_run_whose_csv_cannot_be_written_exits_1_as_its_summary_says(emews_cmd, exp: Path) -> None:
    """results.csv that cannot be written (here a folder in its place; a disk full after summary.json):
    the run said 'cannot write the experiment' yet emews resume exited 0, and summary.json, written
    before the CSV, said exit_status 0 (what launch, the batch job and status read)."""
    (exp / "results.csv").unlink()
    (exp / "results.csv" / "in-the-way").mkdir(parents=True)
    proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=8", timeout=180)
    assert proc.returncode == 1, proc.stderr
    assert "emews: cannot write the experiment" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads((exp / "summary.json").read_text())["exit_status"] == 1
    assert [r["id"] for r in stored_rows(exp)] == list(range(8))


class _FailingCsv:
    """The narrowest seam for an error writing results.csv that is neither OSError nor emews' own
    (a store read by SQLite on a failing disk raises sqlite3.OperationalError; none is made at will)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def finish(self) -> int:
        raise self.error


def _io_error() -> sqlite3.OperationalError:
    error = sqlite3.OperationalError("disk I/O error")
    error.sqlite_errorname = "SQLITE_IOERR_READ"
    return error


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (_io_error(), "emews: cannot write the experiment: the results store: disk I/O error; 6/6 evaluations stored"),
        (RuntimeError("no CSV today"), "RuntimeError: no CSV today"),
    ],
    ids=["sqlite-io-error", "another-error"],
)
def test_any_failure_writing_the_csv_corrects_the_summary_and_says_one_line(
    exp: Path, error: Exception, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only OSError and emews' errors were caught: another (a SQLite I/O error) escaped to MPI_Abort
    after summary.json said exit_status 0, which emews launch, the batch job and status read."""
    from emews.config.workflow import load_workflow
    from emews.job.rank_zero import run_spec, write_outputs
    from emews.job.wiring import RunSummary

    workflow = load_workflow(str(exp / "workflow.yaml"), check_imports=True)
    summary = RunSummary(completed=6, failed=0, best=None, elapsed=1.0, resumed=6)
    status = write_outputs(run_spec(workflow, exp), workflow, exp, summary, _FailingCsv(error))  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert status == 1 and json.loads((exp / "summary.json").read_text())["exit_status"] == 1
    assert line in err and "Traceback" not in err, err
    assert len([ln for ln in err.splitlines() if ln.startswith("emews:")]) == 1, err
