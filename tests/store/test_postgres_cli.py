"""The command-line contract on a PostgreSQL store: a real ``emews launch`` under mpiexec with
``store: {url: ...}`` (and with ``EMEWS_STORE_URL``), then ``results``, ``status``, ``report``,
``checkpoints`` and ``resume`` against it; two experiments in one database; a bad URL or an
unreachable server is one line, exit 2, before anything is created."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from pgserver import PgServer

from emews.core.results import Task
from emews.store import open_store
from testutil import EmewsCommand, closed_port, write_workflow

SMALL = {"budget": {"evaluations": 6}, "task": {"timeout": 30, "isolation": "inline"}}


@pytest.fixture(scope="module")
def pg_run(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 6-evaluation experiment whose store is in PostgreSQL."""
    folder = tmp_path_factory.mktemp("pgrun")
    wf = write_workflow(folder, store={"url": pg_server.url()}, **SMALL)
    EmewsCommand(folder)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240, check=True)
    return folder / "exp"


def test_launch_stores_in_postgres(pg_run: Path, pg_server: PgServer) -> None:
    info = json.loads((pg_run / "experiment.json").read_text())
    assert info["store"]["url"] == pg_server.url() and info["store"]["schema"].startswith("emews_wf_")
    assert not (pg_run / "results.db").exists()
    with open_store(pg_run, readonly=True) as store:
        assert store.count_results() == 6 and store.status_counts() == {"ok": 6}
        assert store.location.startswith(pg_server.url())


def test_readers_work_on_postgres(pg_run: Path) -> None:
    cmd = EmewsCommand(pg_run.parent)
    results = cmd("results", "exp", timeout=120, check=True)
    assert "6 evaluations: 6 ok" in results.stdout
    assert len((pg_run / "results.csv").read_text().splitlines()) == 7
    status = cmd("status", "exp", timeout=120, check=True)
    assert "6/6 evaluations" in status.stdout
    report = cmd("report", "exp", "--out", str(pg_run.parent / "r.html"), timeout=240, check=True)
    assert (pg_run.parent / "r.html").is_file(), report.stdout
    checkpoints = cmd("checkpoints", "exp", timeout=120, check=True)
    assert "0 checkpoints" in checkpoints.stdout + checkpoints.stderr


def test_resume_runs_the_unfinished_task_and_the_new_budget(pg_run: Path, tmp_path: Path,
                                                            pg_server: PgServer) -> None:
    cmd = EmewsCommand(pg_run.parent)
    wf = write_workflow(tmp_path, store={"url": pg_server.url()}, **SMALL)
    EmewsCommand(tmp_path)("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240, check=True)
    exp = tmp_path / "exp"
    with open_store(exp) as store:  # a task dispatched when the run stopped, without its result
        left = store.next_id()
        store.commit([Task(left, {"x": 0.5, "mode": "ok"}, 7, time.time())])
    cmd = EmewsCommand(tmp_path)
    resumed = cmd("resume", "exp", "--set", "budget.evaluations=9", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    with open_store(exp, readonly=True) as store:
        assert store.count_results() == 9 and store.unfinished() == []
        assert {r.id for r in store} == set(range(9)) and next(r for r in store if r.id == left).params["x"] == 0.5


def test_two_experiments_share_one_database(pg_run: Path, pg_server: PgServer, tmp_path: Path) -> None:
    wf = write_workflow(tmp_path, budget={"evaluations": 3}, task={"timeout": 30, "isolation": "inline"})
    cmd = EmewsCommand(tmp_path)
    cmd.env["EMEWS_STORE_URL"] = pg_server.url()
    cmd("launch", str(wf), "--workers", "1", "--exp-dir", "other", timeout=240, check=True)
    other = tmp_path / "other"
    assert json.loads((other / "experiment.json").read_text())["store"]["url"] == pg_server.url()
    with open_store(other, readonly=True) as a, open_store(pg_run, readonly=True) as b:
        assert a.count_results() == 3 and b.count_results() == 6
        assert {r.id for r in a} == {0, 1, 2} and a.location != b.location
    assert "3 evaluations: 3 ok" in cmd("results", "other", timeout=120, check=True).stdout


@pytest.mark.parametrize(("url", "said"), [
    ("postgresql://me:secret@127.0.0.1/db", "holds a password"),
    ("postgresql://me@127.0.0.1/db?password=secret", "holds a password"),
    ("postgresql://me@127.0.0.1/db?%70assword=secret", "holds a password"),  # libpq decodes the key
    ("postgresql://me@127.0.0.1/db?sslmode=require&sslpassword=secret", "holds a password"),
    # libpq's keys are lower case: it refused these, and the message quoted the URL, secret and all
    ("postgresql://me@127.0.0.1/db?Password=secret", "holds a password"),
    ("postgresql://me@127.0.0.1/db?SSLPASSWORD=secret", "holds a password"),
    ("postgresql://me@127.0.0.1/?dbname=host%3Dx%20password%3Dsecret", "a connection string inside"),
    ("mysql://127.0.0.1/db", "must start with postgresql://"),
    ("postgresql://127.0.0.1", "names no database"),
])
def test_a_bad_url_is_one_line(tmp_path: Path, url: str, said: str) -> None:
    wf = write_workflow(tmp_path, store={"url": url}, **SMALL)
    proc = EmewsCommand(tmp_path)("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=60)
    assert proc.returncode == 2 and "store.url" in proc.stderr and said in proc.stderr
    assert "Traceback" not in proc.stderr and "secret" not in proc.stderr.replace("holds a password", "")
    assert not (tmp_path / "exp").exists()


def test_a_bad_variable_is_one_line(tmp_path: Path) -> None:
    wf = write_workflow(tmp_path, **SMALL)
    cmd = EmewsCommand(tmp_path)
    cmd.env["EMEWS_STORE_URL"] = "sqlite:///x.db"
    proc = cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=60)
    assert proc.returncode == 2 and "EMEWS_STORE_URL" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_unreachable_server_is_one_line(tmp_path: Path, pg_run: Path) -> None:
    with closed_port() as port:  # held: no concurrent test's server starts there meanwhile
        _unreachable_is_one_line(tmp_path, pg_run, f"postgresql://postgres@127.0.0.1:{port}/emews")


def _unreachable_is_one_line(tmp_path: Path, pg_run: Path, url: str) -> None:
    wf = write_workflow(tmp_path, store={"url": url}, **SMALL)
    cmd = EmewsCommand(tmp_path)
    proc = cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=60)
    assert proc.returncode == 2 and "cannot connect" in proc.stderr and "store.url" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "exp").exists()
    moved = tmp_path / "moved"  # an experiment whose server is gone: each reader says so in one line
    shutil.copytree(pg_run, moved)
    info = json.loads((moved / "experiment.json").read_text())
    info["store"]["url"] = url
    (moved / "experiment.json").write_text(json.dumps(info))
    for command in ("results", "status", "resume"):
        proc = cmd(command, "moved", timeout=60)
        assert proc.returncode == 2 and "cannot connect" in proc.stderr, (command, proc.stderr)
        assert "experiment.json: store.url" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr


def test_missing_rights_are_one_line(pg_server: PgServer, tmp_path: Path) -> None:
    """A role that may connect but not create the experiment's schema: refused before anything runs."""
    import psycopg

    with psycopg.connect(pg_server.url(), autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS visitor")
        admin.execute("CREATE ROLE visitor LOGIN")
    url = pg_server.url().replace("postgres@", "visitor@")
    wf = write_workflow(tmp_path, store={"url": url}, **SMALL)
    proc = EmewsCommand(tmp_path)("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=60)
    assert proc.returncode == 2 and "store.url" in proc.stderr and "permission denied" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "exp").exists()


def test_an_unreachable_server_named_by_the_variable_is_blamed_on_the_variable(tmp_path: Path) -> None:
    """A connection refused to ``EMEWS_STORE_URL``'s server named ``store.url``, which the workflow
    does not hold."""
    wf = write_workflow(tmp_path, **SMALL)
    cmd = EmewsCommand(tmp_path)
    cmd.env["EMEWS_STORE_URL"] = "postgresql://me@127.0.0.1:1/db"
    proc = cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("emews: error: EMEWS_STORE_URL: cannot connect to ") and "store.url" not in line, line
    assert not (tmp_path / "exp").exists()
