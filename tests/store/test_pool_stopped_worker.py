"""A worker of an attached pool stopped (SIGSTOP) mid-task with ``task.timeout`` set: the pool's
distributor goes on without it (its task runs on the pool's other worker) and, at the end, the
pool's job could not finish: rank 0 waited at the last barrier, then in MPI_Finalize, for a rank that
never came, and ``emews attach`` hung for good. Now the pool's rank 0 aborts its job once its part
is done (mpiexec exits with the pool's status, the stopped rank ended with it). The rank it went on
without is in the experiment's summary.json (``lost_ranks``, its pool named) and ``emews status``
(it was in the pool's log alone)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from gated_job import Mark, write_gated
from pgserver import PgServer
from pooled import held_by, pooled_run, rows, seen

from testutil import EmewsCommand, said, wait_until


def test_an_attached_pool_goes_on_without_a_stopped_worker_and_ends(pg_server: PgServer, tmp_path: Path) -> None:
    # task.timeout 10 s: the attached pool's first task waits at the gate from its start until the
    # test has seen both of its workers hold one (the second worker's objective process may be ready
    # seconds after the first's on a loaded machine); with 3 s it ended 'timeout' first there
    gated = write_gated(tmp_path, evaluations=40, timeout=10, store={"url": pg_server.url()})
    first, second = EmewsCommand(tmp_path), EmewsCommand(tmp_path)
    for command in (first, second):
        command.env.update(EMEWS_SETUP_TIMEOUT="1", EMEWS_STRANDED_GRACE="2")
    gated.arm(first, deadline=2)  # the launch's worker takes a task every 2 s at most until the gate opens
    gated.arm(second)
    with pooled_run(tmp_path, gated.workflow, workers=1, command=first, gates=(gated.gate.name,)) as run:
        exp = run.exp
        assert wait_until(lambda: seen(exp, "SELECT id FROM results"), 180), said(run.launch)
        attached = run.attach(2, command=second)

        def holding() -> list[tuple[int, Mark]]:
            """The attached pool's tasks that started, waiting at the gate, and where (its workers)."""
            marks = gated.started()
            return [(task, marks[task]) for task in held_by(exp, 2) if task in marks]

        assert wait_until(lambda: len(holding()) >= 2, 180), said(attached)
        holding_task, mark = holding()[0]
        stopped = mark.pid
        os.kill(stopped, signal.SIGSTOP)
        run.open()
        try:
            _, a_err = attached.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            raise AssertionError("emews attach hung with a stopped worker") from None
        assert attached.returncode == 0, a_err
    said_lines = [line for line in a_err.splitlines() if line.startswith("emews")]
    assert len(said_lines) == 1 and "has not answered" in said_lines[0], a_err
    assert "the run goes on without it" in said_lines[0] and "Traceback" not in a_err
    assert rows(exp, "SELECT count(*), min(status), max(status) FROM results") == [(40, "ok", "ok")]
    lost = json.loads((exp / "summary.json").read_text())["lost_ranks"]
    assert [(record["pool"], record["rank"], record["task"]) for record in lost] == [(2, mark.rank, holding_task)], lost
    status = first("status", "exp")
    assert "pool 2's rank" in status.stdout and f"its task {holding_task} was queued again" in status.stdout, (
        status.stdout)
