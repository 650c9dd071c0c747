"""A worker's idle objective process (``task.isolation: process``: the child between tasks, here
after the worker's last result) killed from outside lost no work: the run ends 0 and says so in one
warning line naming the rank, not as a teardown failure (it exited 1, and ``emews resume`` then
said "nothing to resume" and exited 1 too); the resume has nothing to do and exits 0.

Real ``mpiexec``, 2 workers, 3 tasks of the gated objective: tasks 0 and 1 wait at the gate (one
on each worker: a worker holds one task at a time under a budget); the gate opened, task 2 starts on
one worker and waits for the file ``end``, while the other's child is idle after its last result;
the test kills that child (SIGKILL), waits until it is dead, then lets task 2 end.
"""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path

from gated_job import launch_gated

from testutil import EmewsCommand, said, stored_rows, wait_until


def children_of(cmd: EmewsCommand, parent: int) -> list[int]:
    """The job's live processes whose parent is ``parent``."""
    found = []
    for pid in cmd.processes():
        try:
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                found.append(pid)
        except (OSError, IndexError):
            continue
    return found


def dead(pid: int) -> bool:
    """``pid`` has exited (a zombie its parent has not reaped yet, or gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_an_idle_objective_process_killed_from_outside_ends_the_run_0_with_a_warning(
    emews_cmd: EmewsCommand, tmp_path: Path
) -> None:
    gated = launch_gated(emews_cmd, tmp_path, evaluations=3, timeout=300, workers=2, pace=math.inf)
    job, exp = gated.job, gated.exp
    try:
        assert wait_until(lambda: {0, 1} <= set(gated.started()), timeout=180), said(job)
        holders = {mark.pid for mark in gated.started().values()}
        assert len(holders) == 2, gated.started()  # one task on each worker
        gated.gate.touch()
        assert wait_until(
            lambda: 2 in gated.started() and sum(r["status"] == "ok" for r in stored_rows(exp)) == 2, timeout=180
        ), said(job)
        (idle_worker,) = holders - {gated.started()[2].pid}
        (child,) = children_of(emews_cmd, idle_worker)
        os.kill(child, signal.SIGKILL)
        assert wait_until(lambda: dead(child), timeout=60)
        gated.end.touch()
        status = job.wait(timeout=240)
        out, err = job.stdout.read(), job.stderr.read()
    finally:
        emews_cmd.kill_all()
    assert status == 0, out + err
    warnings = [line for line in err.splitlines() if line.startswith("emews: warning: rank ")]
    assert len(warnings) == 1 and "signal SIGKILL" in warnings[0] and "while idle" in warnings[0], err
    assert "teardown" not in err, err
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["worker_errors"] == {} and summary["exit_status"] == 0, summary
    assert [r["status"] for r in stored_rows(exp)] == ["ok"] * 3
    resumed = emews_cmd("resume", str(exp))
    assert resumed.returncode == 0 and "emews: nothing to resume" in resumed.stderr, resumed.stdout + resumed.stderr
    assert emews_cmd.leftovers_after_exit(timeout=60) == []
