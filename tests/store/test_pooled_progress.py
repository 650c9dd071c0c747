"""The progress line of a pooled run counts what the pools hold, on a real PostgreSQL and real
mpiexec jobs (docs/postgres.md, "Pools"): the optimizer's job is one pool of several, so its own
workers say nothing of how busy the experiment is."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from pgserver import PgServer
from pooled import PooledRun, gated_command, gated_workflow, pooled_run, seen

from testutil import command_cost, said, status_comes_to_say, wait_until

OUT_IN_POOLS = re.compile(r"(\d+) tasks? queued or running in the pools")


def test_a_pooled_progress_line_counts_the_tasks_in_the_pools(pg_server: PgServer, tmp_path: Path) -> None:
    """``--workers 1 --pools 2``: two pools of one worker each hold a task at the gate. The launch's
    progress line (refreshed as on a terminal) counts at least those two out in the pools (before:
    '1/1 worker busy', the launch's own pool's size capping what the queue held)."""
    wf = gated_workflow(tmp_path, pg_server.url(), 6, task={"timeout": 600, "isolation": "inline"}, store={"lease": 60})
    cmd = gated_command(tmp_path)
    cmd.env["EMEWS_PROGRESS"] = "tty"
    err = bytearray()
    with pooled_run(tmp_path, wf, workers=1, pools=2, command=cmd) as run:
        launch = run.launch
        reader = threading.Thread(target=lambda: _read_all(launch.stderr.fileno(), err), daemon=True)
        reader.start()
        assert _both_pools_hold_a_task(run), err.decode()
        held_from = len(err)
        assert wait_until(lambda: any(int(n) >= 2 for n in OUT_IN_POOLS.findall(err[held_from:].decode())), 60), (
            err.decode()[-2000:]
        )
        run.open()
        assert launch.wait(timeout=300) == 0, err.decode()  # its stderr is the reader's
    reader.join(timeout=60)
    text = err.decode()
    assert "busy" not in text, text
    assert re.search(r"6/6 evaluations, 0 failed, best [^,]+, 0 tasks queued or running in the pools", text), text


def _both_pools_hold_a_task(run: PooledRun) -> bool:
    """Wait until each of the two pools holds a task and two tasks run (their marks), or the launch
    ended: whether they do while it runs."""
    both = wait_until(
        lambda: (
            len(seen(run.exp, "SELECT DISTINCT pool FROM tasks WHERE state = 'leased'")) == 2
            and len(list((run.folder / "marks").iterdir())) >= 2
            or run.launch.poll() is not None
        ),
        180,
    )
    return bool(both) and run.launch.poll() is None


def _read_all(fd: int, into: bytearray) -> None:
    while chunk := os.read(fd, 65536):
        into.extend(chunk)


def test_status_of_a_pooled_run_counts_the_running_pools_workers(pg_server: PgServer, tmp_path: Path) -> None:
    """``--workers 1 --pools 2``, each pool's worker holding a task at the gate: ``emews status``
    says 'workers busy: 2/2', the running pools' workers (before: '1/1', the optimizer's job's own
    worker count capping the unfinished tasks)."""
    wf = gated_workflow(tmp_path, pg_server.url(), 6, task={"timeout": 600, "isolation": "inline"}, store={"lease": 60})
    with pooled_run(tmp_path, wf, workers=1, pools=2) as run:
        launch, cmd = run.launch, run.first
        assert _both_pools_hold_a_task(run), said(launch)
        status_comes_to_say(cmd, "0 failed; workers busy: 2/2; rate ")
        # one connection to the store, no frames, no workflow validation, no sites (it opened three,
        # and spent most of its CPU loading pandas, pydantic and the sites: users poll it)
        status = command_cost(cmd, "status", "exp", postgres=True)
        assert status.status == 0 and "0 failed; workers busy: 2/2; rate " in status.out, status
        assert status.heavy == [] and status.opened == ["psycopg"], (status.heavy[:20], status.opened)
        results = command_cost(cmd, "results", "exp", postgres=True)
        assert results.status == 0 and results.heavy == [] and results.opened == ["psycopg"], results


def test_status_of_a_pooled_run_counts_the_ranks_running_a_task(pg_server: PgServer, tmp_path: Path) -> None:
    """``--workers 3 --pools 1`` and ``task.ranks: 2``: one team of 2 runs (the third worker cannot
    start another), while the pool holds more tasks, taken from the queue but not started (its
    read-ahead). ``emews status`` said 'workers busy: 3/3' (the leased tasks, capped at the
    workers); the ranks running a task are 2."""
    wf = gated_workflow(
        tmp_path, pg_server.url(), 4, task={"timeout": 600, "isolation": "process", "ranks": 2}, store={"lease": 60}
    )
    with pooled_run(tmp_path, wf, workers=3, pools=1) as run:
        launch, cmd = run.launch, run.first
        held = wait_until(
            lambda: (
                len(seen(run.exp, "SELECT id FROM tasks WHERE state = 'leased'")) >= 2
                and len(list((tmp_path / "marks").iterdir())) >= 1
                or launch.poll() is not None
            ),
            180,
        )
        assert held and launch.poll() is None, said(launch)
        status_comes_to_say(cmd, "0 failed; workers busy: 2/3; rate ")
        assert len(list((tmp_path / "marks").iterdir())) == 1  # one team ran all along
