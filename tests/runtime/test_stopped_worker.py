"""A worker rank stopped (``SIGSTOP``) while it runs a task with ``task.timeout`` set.

The task's timer lives in the worker, which does not run: the optimizer rank waited for its
result for good, and the job hung until someone sent ``SIGCONT``. Now a worker silent past the
task timeout, its setup's bound and the stranded grace (``EMEWS_SETUP_TIMEOUT`` and
``EMEWS_STRANDED_GRACE``, a few seconds here) ends the job with one line naming it, as a stranded
inline team does; what was stored stays, and ``emews resume`` runs its task again.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from gated_job import launch_gated
from testutil import said, stored_rows, wait_until


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


def test_a_stopped_worker_ends_the_job_with_one_line_instead_of_hanging_it(emews_cmd, tmp_path: Path) -> None:
    emews_cmd.env.update(EMEWS_SETUP_TIMEOUT="1", EMEWS_STRANDED_GRACE="2")
    gated = launch_gated(emews_cmd, tmp_path, evaluations=3, timeout=3)
    job, exp = gated.job, gated.exp
    assert wait_until(lambda: len(gated.started()) >= 2, timeout=180), said(job)
    ranks = wait_until(lambda: (found := rank_pids(exp)) and len(found) == 3 and found, timeout=60)
    assert ranks, said(job)
    stopped_task = next(int(p.name.split("-")[1]) for p in gated.started() if p.read_text() == "1")
    os.kill(ranks[1], signal.SIGSTOP)
    try:
        status = job.wait(timeout=240)
    except subprocess.TimeoutExpired:
        os.kill(ranks[1], signal.SIGCONT)
        raise AssertionError(said(job)) from None
    err = job.stderr.read()
    assert status == 1, err
    said_lines = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(said_lines) == 1 and "worker rank 1 has not answered" in said_lines[0], err
    assert "past the task timeout of 3 s" in said_lines[0] and "emews resume" in said_lines[0], err
    assert "Traceback" not in err
    assert emews_cmd.leftovers_after_exit() == []
    stored = {r["id"]: r["status"] for r in stored_rows(exp)}
    assert stopped_task not in stored and set(stored.values()) <= {"timeout"}, stored

    gated.gate.touch()                                        # the task the stopped worker held runs again
    resumed = emews_cmd("resume", str(exp), timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    rows = stored_rows(exp)
    assert sorted(r["id"] for r in rows) == [0, 1, 2]
    assert {r["id"]: r["status"] for r in rows}[stopped_task] == "ok"
