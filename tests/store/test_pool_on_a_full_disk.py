"""A pooled run whose task finds the disk full stops with that cause, as a job's run does
(docs/postgres.md, "A pool on a full disk").

A pool's distributor did not tell the disk's failure from the objective's: on a full disk each task
of a pool failed alike (``OSError: [Errno 28] No space left on device``), was stored as the point's
failure and spent the budget. Now the pool stops at the first one with that line, and the task goes
back to the shared queue without a result, for the run that continues the experiment once there is
room.
"""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import held_by, rows

from testutil import (
    MODEL_WRITER,
    EmewsCommand,
    full_tmpfs,
    said,
    task_1_meets_a_full_disk,
    wait_until,
    write_gated_workflow,
)


def test_a_pooled_task_that_finds_the_disk_full_stops_the_run_and_goes_back_to_the_queue(
    pg_server: PgServer, emews_cmd: EmewsCommand, tmp_path: Path
) -> None:
    """The launch's job (optimizer and its pool of one worker) stops with one line naming the task
    and the disk, exit 1; task 1 is queued again with no result (the store holds task 0's alone);
    with room again, ``emews resume`` ends with 4 ok results, task 1 among them."""
    wf, events, gate = write_gated_workflow(
        tmp_path, MODEL_WRITER, budget={"evaluations": 4}, store={"url": pg_server.url()}
    )
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", str(exp))
    task_1_meets_a_full_disk(job, exp, events, gate)
    assert rows(exp, "SELECT id, status FROM results ORDER BY id") == [(0, "ok")]  # no failure charged to a point
    assert rows(exp, "SELECT state FROM tasks WHERE id = 1") == [("queued",)]  # handed back, not failed

    resumed = emews_cmd("resume", str(exp), timeout=300)  # room again: the tmpfs is gone
    assert resumed.returncode == 0, resumed.stderr
    assert rows(exp, "SELECT id, status FROM results ORDER BY id") == [(i, "ok") for i in range(4)]


def test_every_pool_that_finds_the_disk_full_stops_and_hands_its_task_back(
    pg_server: PgServer, emews_cmd: EmewsCommand, tmp_path: Path
) -> None:
    """The launch's pool and an attached pool each hold a task at the gate when the disk fills: each
    stops with the task's cause (the attached pool's last line says how to go on, exit 1), no
    failure is stored, every task is back in the queue; with room again, ``emews resume`` ends
    with every evaluation ok."""
    wf, events, gate = write_gated_workflow(
        tmp_path, MODEL_WRITER, budget={"evaluations": 6}, store={"url": pg_server.url()}
    )
    exp = tmp_path / "exp"
    try:
        job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", str(exp))
        assert wait_until(lambda: (events / "1").exists(), timeout=180), said(job)
        attached = emews_cmd.popen("attach", str(exp), "--workers", "1")
        at_gate = wait_until(lambda: [i for i in held_by(exp, 2) if (events / str(i)).exists()], timeout=180)
        assert at_gate, said(attached)
        with full_tmpfs(exp / "runs" / "000"):
            gate.touch()
            assert job.wait(timeout=300) == 1, said(job)
            assert attached.wait(timeout=300) == 1, said(attached)
            err, pooled = job.stderr.read(), attached.stderr.read()
        assert "Traceback" not in err + pooled, err + pooled
        assert "failed for want of disk space: OSError: [Errno 28] No space left on device" in err, err
        last = pooled.strip().splitlines()[-1]
        assert last.startswith("pool 2: 0 results stored"), pooled
        assert f"stopped: task {at_gate[0]} failed for want of disk space: OSError: [Errno 28]" in last, pooled
        assert last.endswith(f"free space, then attach a pool again: emews attach {exp}"), pooled
        assert rows(exp, "SELECT id, status FROM results ORDER BY id") == [(0, "ok")]  # no failure charged to a point
        assert rows(exp, "SELECT id FROM tasks WHERE state <> 'queued' ORDER BY id") == [(0,)]  # the rest handed back

        resumed = emews_cmd("resume", str(exp), timeout=300)  # room again: the tmpfs is gone
        assert resumed.returncode == 0, resumed.stderr
        assert rows(exp, "SELECT id, status FROM results ORDER BY id") == [(i, "ok") for i in range(6)]
    finally:
        emews_cmd.kill_all()
