"""The core under hard conditions, under a real ``mpiexec``: large messages, one owner per
experiment, stop signals, resume that continues, process trees, shutdown that always ends.

Each test names the finding of ``shared/findings/reliability-2026-11.md`` it covers.
Synchronisation is by events (files the objective writes, processes seen), never by sleeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from testutil import fill_but_pages, read_only, rugged_workflow, wait_until
from testutil import stored_rows as rows


def rugged(folder: Path, mode: str, budget: int, *, isolation: str = "process", name: str = "wf",
           extra_space: dict | None = None, optimizer: dict | None = None, **task) -> Path:
    """The rugged workflow with a task section of ``isolation`` and ``task`` only (no timeout)."""
    return rugged_workflow(folder, mode, budget, name=name, extra_space=extra_space, optimizer=optimizer,
                           task={"isolation": isolation, **task})


def tagged_pids(token: str) -> list[int]:
    """Processes started by this test's commands (their environment carries its token)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def recorded_tasks(exp: Path) -> int:
    """Running tasks the store knows of (a task is recorded once it has run a moment)."""
    try:
        db = sqlite3.connect(f"file:{exp / 'results.db'}?mode=ro", uri=True)
        try:
            return db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def started(events: Path) -> set[int]:
    return {int(p.name.split("-")[1]) for p in events.glob("started-*")}


# --------------------------------------------------------------------------- wire protocol
@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_large_messages_both_ways_do_not_deadlock(emews_cmd, tmp_path: Path, isolation: str) -> None:
    """Issue 8 (1): an 8 KB parameter in, a 4,000-float curve out, workers handed tasks ahead.
    (100 tasks: 100 exchanges both ways; at 400 most of the run was storing and writing the CSV
    of 1.6 million floats, 14 s of CPU.)"""
    wf = rugged(tmp_path, "big", 100, isolation=isolation,
                extra_space={"blob": {"type": "constant", "value": "b" * 8192}})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    stored = rows(tmp_path / "exp")
    assert len(stored) == 100 and {r["status"] for r in stored} == {"ok"}
    assert len(json.loads(stored[-1]["metrics"])["curve"]) == 4000


# --------------------------------------------------------------------------- one owner
def test_resume_while_running_is_refused_and_nothing_is_overwritten(emews_cmd, tmp_path: Path, gate) -> None:
    """6d: a second owner is exit 2 naming the holder; rows never exceed the budget."""
    events, gate_file = gate
    wf = rugged(tmp_path, "wait", 6)
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: len(started(events)) >= 2, timeout=120), job.stderr
    second = emews_cmd("resume", "exp", timeout=120)
    assert second.returncode == 2, second.stderr
    assert "in use by emews" in second.stderr and f"pid {job.pid}" in second.stderr
    # a local run: not 'emews cancel', which refuses local runs, but how to stop the launch cleanly
    assert f"kill -TERM {job.pid}" in second.stderr and "emews cancel" not in second.stderr
    assert "Traceback" not in second.stderr and len(second.stderr.strip().splitlines()) == 1
    gate_file.touch()
    assert job.wait(timeout=180) == 0, job.stderr.read()
    stored = rows(tmp_path / "exp")
    assert [r["id"] for r in stored] == list(range(6))
    assert not (tmp_path / "exp" / "lease.json").exists()


def test_a_copy_of_a_live_experiment_is_not_held_by_the_original_run(emews_cmd, tmp_path: Path, gate) -> None:
    """cp -a of an experiment while it runs copies its lease: the copy said 'local, running' and its
    resume was refused as 'in use by emews launch (pid ...)', advising to kill that process, which
    runs the original. The lease names the directory it was taken in; a copy's is not held."""
    events, gate_file = gate
    wf = rugged(tmp_path, "wait", 6)
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: len(started(events)) >= 2, timeout=120), job.stderr
    # both running tasks recorded (a task copied before rank 0 recorded it would leave its id unused)
    assert wait_until(lambda: len(read_only(tmp_path / "exp", "SELECT id FROM tasks")) >= 2, timeout=120)
    shutil.copytree(tmp_path / "exp", tmp_path / "copy", symlinks=True)
    assert (tmp_path / "copy" / "lease.json").exists()
    status = emews_cmd("status", "copy")
    assert status.returncode == 0 and "local, not running" in status.stdout, status.stdout + status.stderr
    assert "local, running" in emews_cmd("status", "exp").stdout
    again = emews_cmd("resume", "exp", timeout=120)  # the original is still held
    assert again.returncode == 2 and "in use by emews" in again.stderr, again.stderr
    resumed = emews_cmd.popen("resume", "copy")
    lease = tmp_path / "copy" / "lease.json"

    def taken() -> bool:  # the copy's lease is the resume's now (or the resume was refused)
        with contextlib.suppress(OSError):
            return resumed.poll() is not None or f'"pid": {resumed.pid},' in lease.read_text()
        return False

    assert wait_until(taken, timeout=120)
    assert resumed.poll() is None, resumed.stderr.read()
    gate_file.touch()
    assert resumed.wait(timeout=180) == 0, resumed.stderr.read()
    assert job.wait(timeout=180) == 0, job.stderr.read()
    for exp in ("exp", "copy"):
        assert [r["id"] for r in rows(tmp_path / exp)] == list(range(6))


def test_two_launches_into_one_directory_one_wins_cleanly(emews_cmd, tmp_path: Path) -> None:
    """6c: the loser gets one line and exit 2, never a traceback."""
    wf = rugged(tmp_path, "ok", 20)
    procs = [emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "same") for _ in range(2)]
    outcomes = sorted((p.wait(timeout=180), p.stderr.read()) for p in procs)
    assert [code for code, _ in outcomes] == [0, 2], outcomes
    # the winner's folder is "an experiment already" or, caught while it is made, "already exists"
    assert "Traceback" not in outcomes[1][1] and "already" in outcomes[1][1] and "--exp-dir" in outcomes[1][1]
    assert len(rows(tmp_path / "same")) == 20


def test_a_stale_lease_of_a_dead_run_is_taken_over(emews_cmd, tmp_path: Path) -> None:
    wf = rugged(tmp_path, "ok", 8)
    assert emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", "--set",
                     "budget.evaluations=4", timeout=180).returncode == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "exp" / "lease.json").write_text(json.dumps(
        {"token": "old", "owners": [{"host": os.uname().nodename, "pid": dead.pid, "started": 1.0}]}))
    proc = emews_cmd("resume", "exp", "--set", "budget.evaluations=8", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in rows(tmp_path / "exp")] == list(range(8))


# --------------------------------------------------------------------------- resume
def test_resume_of_a_finished_experiment_has_nothing_to_do(emews_cmd, tmp_path: Path) -> None:
    """Issue 8 (2): a finished 16-evaluation bayes run resumed gave 22 rows. Resumed as it is, it
    says so in one line and starts no job: every file of the experiment (store, summary, CSV, the
    log a job appends to) stays as it was; with a larger budget it goes on from the 16. (Inline
    tasks: the jobs start no task processes, which the rows do not depend on.)"""
    wf = rugged(tmp_path, "ok", 16, isolation="inline", optimizer={"name": "bayes", "options": {"seed": 1}})
    assert emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300).returncode == 0
    exp = tmp_path / "exp"
    before = files_of(exp)
    proc = emews_cmd("resume", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr  # the status summary.json recorded
    assert proc.stderr.splitlines() == [
        f"emews: nothing to resume: {exp.absolute()} has the 16 evaluations of its budget "
        "(budget.evaluations: 16); raise it with --set budget.evaluations=N to go on"
    ]
    assert files_of(exp) == before and not (exp / "lease.json").exists()
    extended = emews_cmd("resume", "exp", "--set", "budget.evaluations=20", timeout=300)
    assert extended.returncode == 0, extended.stderr
    assert [r["id"] for r in rows(exp)] == list(range(20))
    assert "resumed: 16 earlier evaluations" in extended.stderr


def files_of(exp: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``exp``: its size and modification time (ns); not SQLite's WAL index
    (``results.db-shm``), which every reader of the store writes to."""
    return {str(p.relative_to(exp)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in exp.rglob("*") if p.is_file() and not p.name.endswith("-shm")}


# --------------------------------------------------------------------------- stop signals
@pytest.mark.parametrize("grace", ["20", "0"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_stores_what_arrived_and_resume_reruns_the_interrupted(emews_cmd, tmp_path: Path,
                                                                            gate, sig, grace: str) -> None:
    """2e, 2f: the signal to ``emews launch`` stops the job (nothing orphaned), one line, 128+N;
    summary and CSV are written; resume runs the interrupted tasks again, with their ids."""
    events, gate_file = gate
    wf = rugged(tmp_path, "wait", 10)
    job = emews_cmd.popen("launch", str(wf), "--workers", "3", "--exp-dir", "exp", "--set", f"walltime.grace={grace}")
    assert wait_until(lambda: len(started(events)) >= 3, timeout=120)
    in_flight = started(events)
    job.send_signal(sig)
    assert job.wait(timeout=180) == 128 + sig
    err = job.stderr.read()
    assert "Traceback" not in err and "stopped by SIG" in err and "emews resume" in err and "BAD TERMINATION" not in err
    exp = tmp_path / "exp"
    assert json.loads((exp / "summary.json").read_text())["interrupted"].startswith("stopped by SIG")
    assert (exp / "results.csv").is_file()
    assert emews_cmd.leftover_processes() == []
    assert not in_flight & {r["id"] for r in rows(exp)}  # killed mid-task: no result for them
    gate_file.touch()
    proc = emews_cmd("resume", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    stored = rows(exp)
    assert [r["id"] for r in stored] == list(range(10)) and {r["status"] for r in stored} == {"ok"}
    assert f"{len(in_flight)} interrupted tasks run again" in proc.stderr


def test_ctrl_c_stops_an_mbo_run_as_any_other_and_resume_finishes_it(emews_cmd, tmp_path: Path, gate) -> None:
    """mbo (mlrMBO through rpy2, Supervisor's workflows/mlrMBO): rpy2 set SIGINT back to Python's
    default handler when it started R, so Ctrl-C raised KeyboardInterrupt in the optimizer: a
    traceback ('the optimizer raised KeyboardInterrupt'), exit status 1, and status said the run
    failed. Now it stops as under any other optimizer: one line, 130, resume finishes the run."""
    events, gate_file = gate
    wf = rugged(tmp_path, "wait", 6, optimizer={"name": "mbo", "options": {"seed": 1}})
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: len(started(events)) >= 2, timeout=180)
    job.send_signal(signal.SIGINT)
    assert job.wait(timeout=180) == 128 + signal.SIGINT
    err = job.stderr.read()
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "stopped by SIGINT" in err and "emews resume" in err, err
    assert emews_cmd.leftover_processes() == []
    gate_file.touch()
    proc = emews_cmd("resume", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    stored = rows(tmp_path / "exp")
    assert [r["id"] for r in stored] == list(range(6)) and {r["status"] for r in stored} == {"ok"}


def test_kill_minus_nine_then_resume_reruns_in_flight_tasks_once(emews_cmd, tmp_path: Path, gate) -> None:
    """2a with in-flight work: tasks running at a SIGKILL are run again on resume, with their ids."""
    events, gate_file = gate
    wf = rugged(tmp_path, "wait", 6)
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: len(started(events)) >= 2 and recorded_tasks(tmp_path / "exp") >= 2, timeout=120)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    for pid in tagged_pids(emews_cmd.token):  # the ranks live in process groups of their own
        with contextlib.suppress(ProcessLookupError):  # it may have ended since it was listed
            os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not emews_cmd.leftover_processes(), timeout=60)
    gate_file.touch()
    proc = emews_cmd("resume", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in rows(tmp_path / "exp")] == list(range(6))


# --------------------------------------------------------------------------- process trees
def test_a_crash_after_a_fork_is_a_crash_and_nothing_is_left_behind(emews_cmd, tmp_path: Path) -> None:
    """1b, 1c: no task timeout; a grandchild holds the socket while the child segfaults."""
    wf = rugged(tmp_path, "fork_then_crash", 3, timeout=None)
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    stored = rows(tmp_path / "exp")
    assert [r["status"] for r in stored] == ["crashed"] * 3
    assert all("SIGSEGV" in r["error"] for r in stored)
    assert emews_cmd.leftover_processes() == []


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_forked_grandchildren_are_killed_and_the_job_ends(emews_cmd, tmp_path: Path, isolation: str) -> None:
    """1c, 1e: forks outlived the run; inline, they kept the job from ever ending."""
    wf = rugged(tmp_path, "fork_sleep", 4, isolation=isolation)
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in rows(tmp_path / "exp")] == ["ok"] * 4
    assert emews_cmd.leftover_processes() == []


def test_a_forked_copy_returning_from_run_does_not_act_as_the_worker(emews_cmd, tmp_path: Path) -> None:
    wf = rugged(tmp_path, "fork_return", 5, isolation="inline")
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in rows(tmp_path / "exp")] == list(range(5))
    assert emews_cmd.leftover_processes() == []


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_teardown_that_raises_is_reported(emews_cmd, tmp_path: Path, isolation: str) -> None:
    """Issue 8 (4): it used to stall shutdown 60 s and report success."""
    emews_cmd.env["RUGGED_TEARDOWN"] = "raise"
    wf = rugged(tmp_path, "ok", 4, isolation=isolation)
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 1
    assert "teardown exploded on purpose" in proc.stderr and "worker rank" in proc.stderr
    assert len(rows(tmp_path / "exp")) == 4
    errors = json.loads((tmp_path / "exp" / "summary.json").read_text())["worker_errors"]
    assert set(errors) == {"1", "2"}


def test_run_dirs_exist_only_for_tasks_that_wrote_output_and_are_sharded(emews_cmd, tmp_path: Path) -> None:
    wf = rugged(tmp_path, "print", 3)
    assert emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "a", timeout=180).returncode == 0
    assert (tmp_path / "a/runs/000/000002/stdout.txt").read_text() == "hello from task 2\n"
    wf = rugged(tmp_path, "ok", 3, name="quiet")
    assert emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "b", timeout=180).returncode == 0
    assert [p.name for p in (tmp_path / "b/runs").iterdir() if not p.name.startswith(".")] == []


# --------------------------------------------------------------------------- site environment
def test_site_environment_and_thread_counts_reach_the_objective_on_local(emews_cmd, tmp_path: Path) -> None:
    """Issue 8 (7): environment.vars/setup were dropped on local; threads follow the cores per worker."""
    site = tmp_path / "mysite.yaml"
    site.write_text(yaml.safe_dump({"extends": "local", "environment": {
        "vars": {"SITE_VAR": "from-site"}, "setup": ["export SETUP_VAR=from-setup"]}}))
    wf = rugged(tmp_path, "env", 3)
    proc = emews_cmd("launch", str(wf), "--site", str(site), "--workers", "3", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    expected_threads = str(max(1, len(os.sched_getaffinity(0)) // 4))
    for r in rows(tmp_path / "exp"):
        metrics = json.loads(r["metrics"])
        assert metrics == {"SITE_VAR": "from-site", "SETUP_VAR": "from-setup", "OMP_NUM_THREADS": expected_threads}
    emews_cmd.env["OMP_NUM_THREADS"] = "7"  # the user's choice wins
    proc = emews_cmd("launch", str(wf), "--site", str(site), "--workers", "1", "--exp-dir", "exp2", timeout=180)
    assert {json.loads(r["metrics"])["OMP_NUM_THREADS"] for r in rows(tmp_path / "exp2")} == {"7"}


# --------------------------------------------------------------------------- the store
@pytest.fixture
def finished(emews_cmd, tmp_path: Path) -> Path:
    wf = rugged(tmp_path, "ok", 30)
    assert emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "done", timeout=180).returncode == 0
    return tmp_path / "done"


def test_concurrent_results_commands_all_succeed(emews_cmd, finished: Path) -> None:
    """6b: a shared temp file made 20 of 75 concurrent calls fail."""
    procs = [emews_cmd.popen("results", str(finished)) for _ in range(12)]
    codes = [(p.wait(timeout=180), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _ in codes), codes
    assert len((finished / "results.csv").read_text().splitlines()) == 31
    assert not [p for p in finished.iterdir() if p.name.endswith(".tmp")]


def test_concurrent_results_by_point_and_deephyper_all_succeed(emews_cmd, finished: Path) -> None:
    """results_by_point.csv and results_deephyper.csv went through one shared temp name
    ('.results_by_point.csv.tmp'): of 12 concurrent 'emews results --by-point --format deephyper',
    4 ended with a FileNotFoundError traceback (another had renamed the temp file away)."""
    procs = [emews_cmd.popen("results", str(finished), "--by-point", "--format", "deephyper") for _ in range(12)]
    codes = [(p.wait(timeout=180), p.stderr.read()) for p in procs]
    assert all(code == 0 for code, _ in codes), codes
    assert len((finished / "results_by_point.csv").read_text().splitlines()) == 31
    assert len((finished / "results_deephyper.csv").read_text().splitlines()) == 31
    assert not [p for p in finished.iterdir() if p.name.endswith(".tmp")]


@contextlib.contextmanager
def read_only_copy(experiment: Path, folder: Path) -> Iterator[Path]:
    """A copy of ``experiment`` in ``folder``, bind-mounted read-only while the block runs (skips the
    test where mounting is not allowed); its files' names are the same after the block."""
    shutil.copytree(experiment, folder / "exp")
    before = sorted(p.name for p in (folder / "exp").iterdir())
    if subprocess.run(["mount", "-o", "bind,ro", str(folder), str(folder)], capture_output=True).returncode != 0:
        pytest.skip("no bind mounts here (needs root)")
    try:
        yield folder / "exp"
        assert sorted(p.name for p in (folder / "exp").iterdir()) == before
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_status_and_results_on_a_read_only_experiment(emews_cmd, finished: Path, tmp_path: Path) -> None:
    """3l: they needed write access (traceback on a read-only mount)."""
    with read_only_copy(finished, tmp_path / "ro") as exp:
        status = emews_cmd("status", str(exp))
        assert status.returncode == 0, status.stderr
        assert "30/30 evaluations: 30 ok" in status.stdout and "not running" in status.stdout
        results = emews_cmd("results", str(exp))
        assert results.returncode == 2 and "Traceback" not in results.stderr  # cannot write the CSV there


def test_resume_of_a_read_only_experiment_is_one_clear_line(emews_cmd, finished: Path, tmp_path: Path) -> None:
    """resume on a read-only mount gave a traceback (the lease's temp file could not be removed)."""
    with read_only_copy(finished, tmp_path / "ro") as exp:
        proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=40", timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "lease.json: cannot write the experiment's lease" in proc.stderr


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "2M") -> Iterator[Path]:
    """A real tmpfs of ``size`` mounted at ``folder`` (skips the test where mounting is not allowed)."""
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill_but_one_page(disk: Path, pages: int = 1) -> None:
    """Fill ``disk`` with a file, then give ``pages`` pages back: room for one small file."""
    fill_but_pages(disk, pages)


def test_resume_on_a_full_disk_ends_with_one_line_not_a_hung_job(emews_cmd, finished: Path, tmp_path: Path) -> None:
    """The launch took the lease in the disk's last page; rank 0 could not rewrite it to join: an
    OSError traceback, and the job hung for good, the workers waiting for rank 0 (a SIGTERM did
    not end it). Now rank 0 refuses with one line, the job ends, and what was stored is there."""
    with small_disk(tmp_path / "disk") as disk:
        exp = disk / "exp"
        shutil.copytree(finished, exp)
        (exp / "summary.json").unlink()  # as after a kill -9: resume runs the job
        fill_but_one_page(disk)
        proc = emews_cmd("resume", str(exp), timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        said = [line for line in proc.stderr.splitlines() if line.startswith("emews")]
        assert len(said) == 1 and "lease.json: cannot write the experiment's lease" in said[0], proc.stderr
        assert emews_cmd.leftovers_after_exit() == []
        assert len(rows(exp)) == 30


def test_resume_whose_store_finds_no_room_to_open_is_one_line(emews_cmd, finished: Path, tmp_path: Path) -> None:
    """A few pages more than the lease needs: the lease was written, then opening the store (its
    WAL's shared-memory file) failed with SQLite's 'disk I/O error' after the workers had started:
    'the optimizer rank failed: StoreUnreadable: ... disk I/O error', MPI_Abort's line, exit 1. Now
    the store is opened before the workers start: one line naming the store and the full disk,
    exit 2, nothing stored or lost; with room again, resume runs the evaluations it was given."""
    with small_disk(tmp_path / "disk") as disk:
        exp = disk / "exp"
        shutil.copytree(finished, exp)
        (exp / "summary.json").unlink()  # as after a kill -9: resume runs the job
        fill_but_one_page(disk, pages=6)
        proc = emews_cmd("resume", str(exp), "--set", "budget.evaluations=32", timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        said = [line for line in proc.stderr.splitlines() if line.startswith(("emews", "Abort"))]
        assert len(said) == 1, proc.stderr
        assert said[0].endswith(
            "results.db: cannot open the results store: the disk is full (No space left on device): free space there"
            " (SQLite: disk I/O error)"
        ), proc.stderr
        assert emews_cmd.leftovers_after_exit() == []
        (disk / "filler").unlink()  # room again (read the store then: a reader needs its shared memory too)
        assert len(rows(exp)) == 30
        resumed = emews_cmd("resume", str(exp), timeout=180)
        assert resumed.returncode == 0, resumed.stderr
        assert [r["id"] for r in rows(exp)] == list(range(32))


def test_results_on_a_full_disk_is_one_line_and_leaves_no_temp_file(emews_cmd, finished: Path,
                                                                    tmp_path: Path) -> None:
    """emews results with no room for results.csv: a traceback (closing the temp file failed again
    while it was discarded) and the temp file left behind. Now one line, exit 2, nothing left."""
    with small_disk(tmp_path / "disk") as disk:
        exp = disk / "exp"
        shutil.copytree(finished, exp)
        (exp / "results.csv").unlink()
        before = sorted(p.name for p in exp.iterdir())
        fill_but_one_page(disk, pages=0)
        proc = emews_cmd("results", str(exp), timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "results.csv: cannot write the CSV: No space left" in proc.stderr
        assert sorted(p.name for p in exp.iterdir()) == before
        assert len(rows(exp)) == 30


def test_a_disk_filling_up_during_a_run_is_reported_once(emews_cmd, tmp_path: Path, gate) -> None:
    """The disk filled up while tasks ran: the run said 'cannot write the experiment' and exited 1,
    but summary.json had no room either, so emews launch added 'the job ended before its run did
    (mpiexec exited with status 0 ...)'. Now the run's status reaches the launcher: one line."""
    events, gate_file = gate
    wf = rugged(tmp_path, "wait", 6)
    with small_disk(tmp_path / "disk", "4M") as disk:
        job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", str(disk / "exp"))
        assert wait_until(lambda: started(events), timeout=120)
        fill_but_one_page(disk, pages=0)
        gate_file.touch()
        assert job.wait(timeout=180) == 1
        err = job.stderr.read()
        said = [line for line in err.splitlines() if line.startswith("emews")]
        assert len(said) == 1 and "cannot write the experiment" in said[0] and "emews resume" in said[0], err
        assert not (disk / "exp" / "summary.json").exists()
        assert emews_cmd.leftovers_after_exit() == []


def test_a_missing_store_is_refused_and_the_csv_kept(emews_cmd, finished: Path) -> None:
    """An experiment copied without results.db (or whose store was deleted): resume ran the whole
    budget again from id 0 and replaced results.csv, the only record left of the 30 evaluations,
    and summary.json; emews results said 'wrote 0 rows'. Both now refuse with one line."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{finished}/results.db{suffix}").unlink(missing_ok=True)
    before = {p.name: p.read_bytes() for p in finished.iterdir() if p.is_file()}
    for args in (["resume", str(finished)], ["resume", str(finished), "--set", "budget.evaluations=40"],
                 ["results", str(finished)]):
        proc = emews_cmd(*args, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert "results.db: missing, yet summary.json records 30 evaluations stored" in proc.stderr
        assert {p.name: p.read_bytes() for p in finished.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("content", [b"\x00\xffgarbage", b'{"workers": 2', b"[1, 2]"])
def test_resume_with_a_garbled_experiment_json_is_one_line(emews_cmd, finished: Path, content: bytes) -> None:
    """A garbled, truncated or non-object experiment.json gave resume a traceback (UnicodeDecodeError,
    JSONDecodeError, AttributeError); now one line naming the file, exit 2, nothing changed."""
    (finished / "experiment.json").write_bytes(content)
    before = {p.name: p.read_bytes() for p in finished.iterdir() if p.is_file()}
    proc = emews_cmd("resume", str(finished), "--set", "budget.evaluations=32", timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and "experiment.json: cannot read" in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in finished.iterdir() if p.is_file()} == before


def test_resume_without_experiment_json_runs(emews_cmd, finished: Path) -> None:
    """experiment.json only records the run (workers, time, command): without it resume took a
    FileNotFoundError traceback; now it runs with the site's workers, as status and report do."""
    (finished / "experiment.json").unlink()
    proc = emews_cmd("resume", str(finished), "--set", "budget.evaluations=32", timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in rows(finished)] == list(range(32))


def test_a_corrupt_store_is_a_clear_error_not_a_hung_job(emews_cmd, finished: Path) -> None:
    """3l: resume on a corrupt store printed a traceback and hung forever."""
    for suffix in ("-wal", "-shm"):
        Path(f"{finished}/results.db{suffix}").unlink(missing_ok=True)
    (finished / "results.db").write_bytes(os.urandom(4096))
    for command in ("resume", "status"):
        proc = emews_cmd(command, str(finished), timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert "results.db" in proc.stderr and "Traceback" not in proc.stderr
    assert not (finished / "lease.json").exists()


def test_kill_minus_nine_of_launch_alone_stops_the_job(emews_cmd, tmp_path: Path, gate) -> None:
    """2e with SIGKILL: the launch cannot forward anything, yet the job must not go on unsupervised."""
    events, gate_file = gate
    wf = rugged(tmp_path, "wait", 6)
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: len(started(events)) >= 2, timeout=120)
    job.kill()
    job.wait()
    assert emews_cmd.leftovers_after_exit(timeout=120) == []
    summary = json.loads((tmp_path / "exp" / "summary.json").read_text())
    # mpiexec's parent-death SIGTERM stopped it: said as the launch's end, not as a signal someone sent
    assert summary["interrupted"] == f"stopped: its emews launch (pid {job.pid}) ended (SIGTERM)"


def test_sigterm_to_rank_zero_alone_stops_the_run_cleanly(emews_cmd, tmp_path: Path, gate) -> None:
    """A signal that reaches only the optimizer rank: it stops the workers, stores, summarises."""
    events, gate_file = gate
    wf = rugged(tmp_path, "wait", 6)
    # the workers get no signal, so their tasks never end: rank 0 gives them walltime.grace (2 s
    # here, not the default 20 s the test would sit out) to pause, then aborts them
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp", "--set", "walltime.grace=2")
    assert wait_until(lambda: len(started(events)) >= 2, timeout=120)
    rank0 = [pid for pid in tagged_pids(emews_cmd.token)
             if b"PMI_RANK=0\0" in Path(f"/proc/{pid}/environ").read_bytes()
             and b"emews\0run" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(rank0) == 1
    os.kill(rank0[0], signal.SIGTERM)
    assert job.wait(timeout=180) == 143
    assert "stopped by SIGTERM" in job.stderr.read()
    assert emews_cmd.leftovers_after_exit() == []
    assert not (tmp_path / "exp" / "lease.json").exists()


def test_an_unwritable_experiment_directory_is_one_clear_line(emews_cmd, tmp_path: Path) -> None:
    """3k: a read-only location gave a traceback and exit 1."""
    wf = rugged(tmp_path, "ok", 2)
    ro = tmp_path / "ro"
    ro.mkdir()
    targets = ["/proc/emews-exp"]
    if subprocess.run(["mount", "-o", "bind,ro", str(ro), str(ro)], capture_output=True).returncode == 0:
        targets.append(str(ro / "exp"))
    try:
        for target in targets:
            proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", target, timeout=120)
            assert proc.returncode == 2, proc.stderr
            assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
            assert "cannot create the experiment directory" in proc.stderr and "--exp-dir" in proc.stderr
    finally:
        if len(targets) > 1:
            subprocess.run(["umount", str(ro)], check=True)
    assert list(ro.iterdir()) == []
