"""A worker rank stopped (``SIGSTOP``) while it runs a task with ``task.timeout`` set, or before it
said it was ready (while it imports an inline objective), with or without a timeout.

The task's timer lives in the worker, which does not run: the optimizer rank waited for its
result for good, and the job hung until someone sent ``SIGCONT``. A worker silent past the task
timeout, its setup's bound and the stranded grace (``EMEWS_SETUP_TIMEOUT`` and
``EMEWS_STRANDED_GRACE``, a few seconds here) then ended the whole job; now the run goes on
without it (its task runs again on another worker, counting an attempt), says so in one line, and
the job is aborted once the outputs are written (the rank cannot be joined). Only the last worker
ends the job, and ``emews resume`` runs its task again. A rank that never says it is ready within
its setup's bound and the grace is run without the same way (it hung the job until its walltime).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest
from gated_job import GatedJob, launch_gated

from testutil import said, stored_rows, wait_until, write_workflow


def rank_pids(exp: Path) -> dict[int, int]:
    """MPI rank -> pid of the job's ranks (``emews run EXP``; the rank from its environment)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit():
                continue
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"run" not in argv or str(exp).encode() not in argv:
                continue
            env = dict(item.split(b"=", 1) for item in (entry / "environ").read_bytes().split(b"\0") if b"=" in item)
            if b"PMI_RANK" in env:
                found[int(env[b"PMI_RANK"])] = int(entry.name)
        except OSError:
            continue
    return found


#: the gated tasks' ``task.timeout``: each worker's first task waits at the gate from its start
#: until the test has seen every worker hold one (the last worker's objective process may be ready
#: seconds after the first's on a loaded machine), found the ranks and stopped one; a bound of a
#: few seconds (it was 3) ran out first there, and the live worker's task ended 'timeout'. The
#: rule that goes on without a stopped rank waits twice this plus the grace (22 s).
TIMEOUT = 10


def _gated_run(
    emews_cmd, tmp_path: Path, workers: int, evaluations: int = 3, pace: float | None = None
) -> tuple[GatedJob, dict[int, int]]:
    """A launch of the gated objective (task.timeout :data:`TIMEOUT`) whose first tasks wait at the gate, each
    worker holding one; ``pace``: the tasks that start once the gate is open wait that long at most
    for the file ``end`` (the run goes on, a task each ``pace`` s, until the test opens it)."""
    emews_cmd.env.update(EMEWS_SETUP_TIMEOUT="1", EMEWS_STRANDED_GRACE="2")
    gated = launch_gated(emews_cmd, tmp_path, evaluations=evaluations, timeout=TIMEOUT, workers=workers, pace=pace)
    job, exp = gated.job, gated.exp
    assert wait_until(lambda: len(gated.started()) >= workers, timeout=180), said(job)
    ranks = wait_until(lambda: (found := rank_pids(exp)) and len(found) == workers + 1 and found, timeout=60)
    assert ranks, said(job)
    return gated, ranks


def _ended(job: subprocess.Popen, stopped_pid: int) -> tuple[int, str]:
    """The launch's exit status and stderr (the stopped rank continued first if it hangs)."""
    try:
        status = job.wait(timeout=240)
    except subprocess.TimeoutExpired:
        os.kill(stopped_pid, signal.SIGCONT)
        raise AssertionError(said(job)) from None
    return status, job.stderr.read()


def _attempts(exp: Path) -> dict[int, int]:
    with sqlite3.connect(exp / "results.db") as db:
        return dict(db.execute("SELECT id, attempt FROM tasks"))


@pytest.mark.parametrize("continued", [False, True])
def test_the_run_goes_on_without_a_stopped_worker_and_runs_its_task_elsewhere(
    emews_cmd, tmp_path: Path, continued: bool
) -> None:
    """``continued``: rank 1 gets SIGCONT once the run went on without it: what it says then (its
    task's timeout) is dropped, it gets nothing more, and it leaves with the others (no MPI_Abort)."""
    evaluations = 60 if continued else 3
    gated, ranks = _gated_run(emews_cmd, tmp_path, workers=2, evaluations=evaluations, pace=1 if continued else None)
    job, exp = gated.job, gated.exp
    stopped_task = next(task for task, mark in gated.started().items() if mark.rank == 1)
    os.kill(ranks[1], signal.SIGSTOP)
    gated.gate.touch()                                  # rank 2 runs on; rank 1's task waits for the rule
    if continued:
        log = exp / "emews.log"
        assert wait_until(lambda: "the run goes on without it" in log.read_text(), timeout=180), said(job)
        os.kill(ranks[1], signal.SIGCONT)
        assert wait_until(lambda: "worker rank 1 answers again" in log.read_text(), timeout=180), said(job)
        gated.end.touch()
    status, err = _ended(job, ranks[1])
    assert not continued or "Abort(" not in err, err    # a continued rank is joined at the end (no MPI_Abort)
    assert status == 0, err
    said_lines = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(said_lines) == 1 and "worker rank 1 has not answered" in said_lines[0], err
    assert f"past the task timeout of {TIMEOUT} s" in said_lines[0] and "the run goes on without it" in said_lines[0], err
    assert "Traceback" not in err
    assert emews_cmd.leftovers_after_exit() == []       # the stopped rank too: the job was aborted at its end
    rows = stored_rows(exp)
    assert sorted(r["id"] for r in rows) == list(range(evaluations)) and {r["status"] for r in rows} == {"ok"}, rows
    assert {r["id"]: r["rank"] for r in rows}[stopped_task] == 2   # run again on the other worker
    assert _attempts(exp)[stopped_task] == 1            # ... counting an attempt
    assert len((exp / "results.csv").read_text().splitlines()) == evaluations + 1
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["exit_status"] == 0
    (lost,) = summary["lost_ranks"]                     # recorded: rank, when, why, its task run again
    assert (lost["rank"], lost["task"], lost["rerun"]) == (1, stopped_task, True), lost
    assert lost["reason"].startswith("has not answered for ") and f"task timeout of {TIMEOUT} s" in lost["reason"]
    status = emews_cmd("status", str(exp), check=True).stdout.splitlines()
    shown = [line for line in status if line.startswith("rank 1 lost at ")]
    assert len(shown) == 1 and shown[0].endswith(f"; its task {stopped_task} was queued again for another worker")
    resumed = emews_cmd("resume", str(exp), timeout=240)   # nothing left: the run is complete
    assert resumed.returncode == 0 and "nothing to resume" in resumed.stderr, resumed.stderr


def test_the_last_worker_stopped_ends_the_job_with_one_line_and_resume_runs_its_task(emews_cmd, tmp_path: Path) -> None:
    gated, ranks = _gated_run(emews_cmd, tmp_path, workers=1)
    job, exp = gated.job, gated.exp
    os.kill(ranks[1], signal.SIGSTOP)
    status, err = _ended(job, ranks[1])
    assert status == 1, err
    said_lines = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(said_lines) == 1 and "worker rank 1 has not answered" in said_lines[0], err
    assert "no other worker is left" in said_lines[0] and "emews resume" in said_lines[0], err
    assert "Traceback" not in err
    assert emews_cmd.leftovers_after_exit() == []
    assert stored_rows(exp) == []

    gated.gate.touch()                                  # the task the stopped worker held runs again
    resumed = emews_cmd("resume", str(exp), timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    rows = stored_rows(exp)
    assert sorted(r["id"] for r in rows) == [0, 1, 2] and {r["status"] for r in rows} == {"ok"}


SLOW_IMPORT = '''\
import os, pathlib, time

if os.environ.get("PMI_RANK") == "1":  # worker rank 1 stays in its import: the test stops it there
    pathlib.Path(__file__).with_name("importing-1").write_text(str(os.getpid()))
    while True:
        time.sleep(0.01)

def run(params):
    while not pathlib.Path(__file__).with_name("gate").exists():  # until the run went on without rank 1
        time.sleep(0.01)
    return params["x"]
'''


def test_a_worker_stopped_before_it_is_ready_is_run_without(emews_cmd, tmp_path: Path) -> None:
    """No task.timeout: the stalled-worker rule never looked at a rank that held no task it began;
    rank 1, stopped while it imports the objective (inline), hung the job until its walltime."""
    (tmp_path / "model.py").write_text(SLOW_IMPORT)
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
                        budget={"evaluations": 3}, task={"isolation": "inline"})
    emews_cmd.env.update(EMEWS_SETUP_TIMEOUT="4", EMEWS_STRANDED_GRACE="2")  # rank 2 is ready well before
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", str(exp))
    marker = tmp_path / "importing-1"
    assert wait_until(marker.exists, timeout=180), said(job)
    pid = int(wait_until(lambda: marker.read_text(), timeout=10))
    os.kill(pid, signal.SIGSTOP)                        # its setup's timer cannot fire now
    log = exp / "emews.log"
    assert wait_until(lambda: log.exists() and "did not say it was ready" in log.read_text(), timeout=180), said(job)
    (tmp_path / "gate").touch()
    status, err = _ended(job, pid)
    assert status == 0, err
    said_lines = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(said_lines) == 1 and "worker rank 1 did not say it was ready" in said_lines[0], err
    assert "the run goes on without it" in said_lines[0] and "Traceback" not in err, err
    assert emews_cmd.leftovers_after_exit() == []
    rows = stored_rows(exp)
    assert sorted(r["id"] for r in rows) == [0, 1, 2] and {(r["status"], r["rank"]) for r in rows} == {("ok", 2)}
