"""``emews status`` of a pooled training experiment whose optimizer left its job: the pools, and
then ``emews serve`` (a login node, another batch job), go on with it, and the status says so."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from pgserver import PgServer
from pooled import gated_command, gated_workflow, pooled_run, seen, stored, trainer_command, wait_for_queued

from emews.store import open_store
from emews.store.pool_queue import PoolQueue
from testutil import ages_masked, command_cost, trainer_workflow, wait_until

#: a trial of pool 2 (the attached one) that reported step 2 and waits at the gate before step 3
HELD = (
    "SELECT t.id FROM tasks t JOIN reports r ON r.trial = t.id WHERE t.pool = 2 AND t.state = 'leased' AND r.step = 2"
)


def _optimizer_running(exp: Path) -> bool:
    try:
        with open_store(exp, readonly=True) as store:
            return PoolQueue(store).optimizer_running()  # type: ignore[arg-type]
    except Exception:  # the store is being made
        return False


def test_trials_a_pool_trains_after_the_job_ended_are_not_called_interrupted(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """The launch's job (optimizer and pool 1) stops (SIGTERM) while the attached pool 2 trains a
    trial: status calls that trial running, not interrupted (it said "interrupted (the run is not
    running ...)"). Pool 2 is then killed (kill -9) and ``emews serve`` runs the optimizer with no
    pool: status still calls the run going on. A new pool restores the trial from its own
    checkpoint; every evaluation is stored once."""
    wf = trainer_workflow(
        tmp_path,
        [0.1, 0.2, 0.3],
        epochs=4,
        task={"isolation": "process", "timeout": 300},
        store={"url": pg_server.url(), "lease": 5},
        optimizer={"name": "sweep", "options": {"backlog": 10}},  # all 3 queued at once: one waits for pool 2
    )
    second = trainer_command(tmp_path, 3)
    with pooled_run(tmp_path, wf, workers=1, command=trainer_command(tmp_path, 3)) as run:
        exp, first, launch = run.exp, run.first, run.launch
        wait_for_queued(exp)
        attached = run.attach(1, command=second)
        held = wait_until(lambda: seen(exp, HELD), 180)
        assert held, seen(exp, "SELECT id, state, pool FROM tasks")
        trial = held[0][0]
        launch.send_signal(signal.SIGTERM)
        assert launch.wait(timeout=120) == 143
        status = first("status", "exp", timeout=120, check=True).stdout
        assert f"trial {trial}: step 2," in status and "interrupted" not in status, status

        second.kill_all()  # kill -9 of the attached pool: no pool runs now
        assert attached.wait(timeout=60) != 0
        assert wait_until(lambda: "pool 2: lost" in first("status", "exp", timeout=120).stdout, 120)
        run.start("serve", "exp")
        assert wait_until(lambda: _optimizer_running(exp), 120)
        # what runs: the serve's optimizer (it said 'local, running', as of the launch that ended).
        # The serve takes the optimizer lock, then (its workflow read) the lease that names it: a
        # status between the two still shows the launch's ended job
        said: list[str] = []
        assert wait_until(
            lambda: (
                said.append(first("status", "exp", timeout=120, check=True).stdout)
                or said[-1].startswith("job: emews serve (pid ")
            ),
            120,
        ), said[-1]
        status = said[-1]
        assert "runs the optimizer" in status.splitlines()[0], status
        assert f"trial {trial}: step 2" in status and "interrupted" not in status, status

        run.attach(1, command=trainer_command(tmp_path, 3))
    assert stored(exp) == [0, 1, 2]
    events = [json.loads(line) for line in (tmp_path / "trainer.log").read_text().splitlines()]
    starts = [(e["restored"], e["from_trial"]) for e in events if e["event"] == "start" and e["task"] == trial]
    assert starts[0] == (0, trial) and starts[-1] == (2, trial), starts  # its own checkpoint, no other's


def test_status_says_how_the_last_serve_ended(pg_server: PgServer, tmp_path: Path) -> None:
    """The launch's job is stopped (SIGTERM: it ended with 143), ``emews serve`` takes over and is
    killed (kill -9): status says the last run ended before it could record how (it said the run
    ended with 143: the launch's); a second ``emews serve`` finishes the run with a new pool:
    status says nothing of an exit status (it still said 143)."""
    from emews.config.exit_record import read_exit_record

    wf = gated_workflow(tmp_path, pg_server.url(), 6, store={"lease": 60})
    second = gated_command(tmp_path)
    with pooled_run(tmp_path, wf, workers=1) as run:
        exp, first, launch = run.exp, run.first, run.launch
        wait_for_queued(exp)
        launch.send_signal(signal.SIGTERM)
        assert launch.wait(timeout=120) == 143
        job = first("status", "exp", timeout=120, check=True).stdout.splitlines()[0]
        assert job == (
            "job: local, not running, the run ended with exit status 143: stopped by SIGTERM; "
            f"continue with: emews resume {exp}"
        ), job
        served = run.start("serve", "exp", command=second)
        assert wait_until(lambda: read_exit_record(exp) == {}, 120)  # its run began: its record reserved
        second.kill_all()
        served.wait(timeout=60)
        job = first("status", "exp", timeout=120, check=True).stdout.splitlines()[0]
        assert "exit status 143" not in job and "its last run ended before it could record how" in job, job
        run.open()
        run.start("serve", "exp", command=gated_command(tmp_path))
        run.attach(1, command=first)
    status = first("status", "exp", timeout=120, check=True).stdout
    assert status.splitlines()[0] == "job: local, not running", status
    assert "6/6 evaluations: 6 ok" in status, status
    # of an experiment with an attached pool too: what it printed, on one connection, without
    # frames, workflow validation or sites (it opened three and loaded them all)
    cost = command_cost(first, "status", "exp", postgres=True)
    assert cost.status == 0 and ages_masked(cost.out) == ages_masked(status), (cost, status)
    assert cost.heavy == [] and cost.opened == ["psycopg"], (cost.heavy[:20], cost.opened)
