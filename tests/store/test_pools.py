"""Worker pools end to end on a real PostgreSQL (tests/store/conftest.py) and real mpiexec jobs:
``emews launch --pools`` (the optimizer's job is one pool) and ``emews attach`` (one more job
feeding the same experiment); a pool killed with SIGKILL mid-task loses nothing and duplicates
nothing; ``emews status`` lists the pools; what cannot have pools is refused in one line, exit 2,
before anything is made (docs/postgres.md, "Pools")."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

import psycopg
import pytest
from pgserver import PgServer
from pooled import (
    PooledRun,
    gated_command,
    gated_workflow,
    held_by,
    pooled_run,
    rows,
    running_on,
    seen,
    wait_for_queued,
)

from emews.store import open_store
from testutil import GATED, TESTS, EmewsCommand, wait_until, write_workflow

BUDGET = 12


def _workflow(folder: Path, url: str | None, lease: float = 60, **extra: object) -> Path:
    """The gated workflow of :data:`BUDGET` evaluations on the store at ``url``, leases of ``lease``
    seconds (60: none ends while a loaded machine delays a heartbeat; a test of a lease's end sets 2)."""
    return gated_workflow(folder, url, BUDGET, store={"lease": lease}, **extra)


def _attach_once_queued(run: PooledRun, cmd: EmewsCommand) -> tuple[subprocess.Popen, list[int]]:
    """Once the first pool holds what it can (2 running, 1 on its way) and a task waits in the
    queue, attach a pool of 2 workers by ``cmd``; wait until one of its workers runs a task (its
    mark is there); that pool's job and the tasks it runs."""
    wait_for_queued(run.exp)
    attached = run.attach(2, command=cmd)
    running = wait_until(lambda: running_on(run.exp, 2), 120)
    assert running, "the attached pool never ran a task"
    return attached, running


def test_a_killed_pool_loses_nothing_and_its_tasks_run_on_the_other(pg_server: PgServer, tmp_path: Path) -> None:
    """The first job (optimizer + a pool of 2 workers) and an attached pool of 2 share one queue;
    the attached pool is killed with SIGKILL while its worker runs a task. Once that task's lease
    ends the first pool runs it again under the same id (attempt 1): every evaluation is stored
    exactly once, none by the dead pool, and ``emews status`` shows that pool as gone, its tasks
    taken over (it said lost for ever)."""
    wf = _workflow(tmp_path, pg_server.url(), lease=2)  # the dead pool's lease ends: what the test is about
    second = gated_command(tmp_path)
    with pooled_run(tmp_path, wf, workers=2) as run:
        exp, first = run.exp, run.first
        attached, held = _attach_once_queued(run, second)
        second.kill_all()  # kill -9 of the whole job: mpiexec and every rank
        assert attached.wait(timeout=60) != 0
    results = rows(exp, "SELECT id, pool FROM results ORDER BY id")
    assert [i for i, _ in results] == list(range(BUDGET))  # 0 lost, 0 duplicates
    assert all(pool == 1 for i, pool in results if i in held)  # the dead pool stored nothing
    attempts = dict(rows(exp, "SELECT id, attempt FROM tasks"))
    assert all(attempts[i] == 1 for i in held)
    assert rows(exp, "SELECT DISTINCT state FROM tasks") == [("done",)]
    status = first("status", "exp", timeout=120, check=True).stdout
    assert "pools: 2" in status
    # a local pool: status, on its host, sees its process ended (its tasks were taken over meanwhile)
    assert (
        "pool 1: stopped" in status
        and "pool 2: gone (its process ended without it stopping; it held nothing)" in status
    ), status


def test_a_pool_stopped_by_sigterm_hands_back_what_it_held_at_once(pg_server: PgServer, tmp_path: Path) -> None:
    """The attached pool (2 workers, holding 2 running tasks and 1 taken ahead) is stopped with
    SIGTERM under a 600 s lease: once its job ended, none of its tasks is leased to it any more
    (they were queued again at once, not when the leases end), the two it ran with one more
    attempt as an ended lease counts it, the one only taken ahead with none (it never ran: it
    counted one, and the attempt count caps retries); the first pool runs them all, each
    evaluation stored once. (Before, they stayed leased to the stopped pool for the lease's 600 s.)"""
    wf = gated_workflow(tmp_path, pg_server.url(), BUDGET, store={"lease": 600})
    with pooled_run(tmp_path, wf, workers=2) as run:
        exp = run.exp
        attached, _ = _attach_once_queued(run, gated_command(tmp_path))
        marks = tmp_path / "marks"

        def full() -> list[int]:  # 3 held, 2 of them running
            ids = held_by(exp, 2)
            return ids if len(ids) == 3 and len(running_on(exp, 2)) == 2 else []

        held = wait_until(full, 120)
        assert held, seen(exp, "SELECT id, state, pool FROM tasks ORDER BY id")
        attached.send_signal(signal.SIGTERM)
        _, err = attached.communicate(timeout=120)
        assert held_by(exp, 2) == []  # handed back as the pool ended
        attempts = dict(rows(exp, "SELECT id, attempt FROM tasks"))
        ran = {i for i in held if (marks / str(i)).exists()}
        assert {i: attempts[i] for i in held} == {i: int(i in ran) for i in held}, ran
        assert "3 tasks handed back to the queue" in err, err
    results = rows(exp, "SELECT id, pool FROM results ORDER BY id")
    assert [i for i, _ in results] == list(range(BUDGET))
    assert all(pool == 1 for i, pool in results if i in held)
    # the handed-back tasks ran whole on pool 1 (pool 1's first tasks may time out at the gate's 120 s under load)
    statuses = rows(exp, "SELECT id, status, pool FROM results ORDER BY id")
    assert all(status == "ok" for i, status, _ in statuses if i in held), (held, statuses)


def _launch_on_two_pools(cmd: EmewsCommand, wf: Path, folder: Path) -> tuple[Path, list[tuple]]:
    """``emews launch WF --workers 2 --pools 2``, its gate (``folder/open``) opened once both pools
    hold a task; the experiment and its ``(id, pool)`` results, once the launch ended with 0."""
    with pooled_run(folder, wf, workers=2, pools=2, command=cmd) as run:
        both = wait_until(
            lambda: len(seen(run.exp, "SELECT DISTINCT pool FROM tasks WHERE state = 'leased'")) == 2, 180
        )
        assert both, seen(run.exp, "SELECT id, state, pool FROM tasks")
    return run.exp, rows(run.exp, "SELECT id, pool FROM results ORDER BY id")


def test_launch_with_two_pools_runs_on_both(pg_server: PgServer, tmp_path: Path) -> None:
    """``--pools 2`` on the local site: the launch starts the second pool itself (``emews attach``)
    and waits for it; both run evaluations, each stored once with the pool that ran it; ``emews
    status`` names the attached pool's folder (``pools/pool-001`` is pool 2)."""
    wf = _workflow(tmp_path, pg_server.url())
    cmd = gated_command(tmp_path)
    exp, results = _launch_on_two_pools(cmd, wf, tmp_path)
    assert [i for i, _ in results] == list(range(BUDGET))
    assert {pool for _, pool in results} == {1, 2}
    pools = rows(exp, "SELECT id, tasks_done, stopped IS NOT NULL FROM pools ORDER BY id")
    assert [(p, n) for p, n, _ in pools] == [(p, sum(1 for _, q in results if q == p)) for p in (1, 2)]
    assert all(stopped for *_, stopped in pools)  # both ended once the optimizer had finished
    assert cmd.leftovers_after_exit() == []
    status = cmd("status", "exp", timeout=120, check=True).stdout.splitlines()
    pool_1, pool_2 = (next(line for line in status if line.startswith(f"  pool {p}:")) for p in (1, 2))
    assert "folder" not in pool_1  # the launch's own job: the experiment's folder
    assert pool_2.endswith(", folder pools/pool-001"), pool_2  # the attached pool's folder, by its id in the store


def test_a_finished_pooled_experiment_resumes_to_nothing(pg_server: PgServer, tmp_path: Path) -> None:
    """Every evaluation of the budget stored by two pools, the queue empty: ``emews resume`` says
    there is nothing to resume in one line (it ran a job that printed "12 ok in 0.0 s"), with the
    status the run recorded, and starts no pool; ``emews serve`` says there is nothing to serve."""
    wf = _workflow(tmp_path, pg_server.url())
    cmd = gated_command(tmp_path)
    (tmp_path / "open").touch()
    launch = cmd("launch", str(wf), "--workers", "2", "--pools", "2", "--exp-dir", "exp", timeout=300)
    assert launch.returncode == 0, launch.stderr
    exp = tmp_path / "exp"
    pools = rows(exp, "SELECT id, started FROM pools ORDER BY id")
    resumed = cmd("resume", "exp", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.splitlines() == [
        f"emews: nothing to resume: {exp.absolute()} has the {BUDGET} evaluations of its budget "
        f"(budget.evaluations: {BUDGET}); raise it with --set budget.evaluations=N to go on"
    ]
    served = cmd("serve", "exp", timeout=240)
    assert served.returncode == 0, served.stderr
    assert served.stderr.splitlines() == [
        f"emews: nothing to serve: {exp.absolute()} has the {BUDGET} evaluations of its budget "
        f"(budget.evaluations: {BUDGET}); raise it with emews resume {exp.absolute()} --set budget.evaluations=N "
        "to go on"
    ]
    assert rows(exp, "SELECT id, started FROM pools ORDER BY id") == pools
    assert len(rows(exp, "SELECT id FROM results")) == BUDGET


def test_pools_need_a_postgresql_store(tmp_path: Path) -> None:
    wf = _workflow(tmp_path, None)
    cmd = EmewsCommand(tmp_path)
    refused = cmd("launch", str(wf), "--workers", "1", "--pools", "2", "--exp-dir", "exp")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "store.url" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "exp").exists()
    cmd.env["GATE_FILE"] = str(tmp_path / "wf.yaml")  # open from the start
    cmd(
        "launch",
        str(wf),
        "--workers",
        "1",
        "--exp-dir",
        "exp",
        "--set",
        "budget.evaluations=2",
        timeout=240,
        check=True,
    )  # a SQLite experiment
    attach = cmd("attach", "exp")
    assert attach.returncode == 2 and "store.url" in attach.stderr and "Traceback" not in attach.stderr
    assert not (tmp_path / "exp" / "pools").exists()


@pytest.mark.parametrize("pools", ["0", "-1"])
def test_pools_must_be_positive(tmp_path: Path, pools: str) -> None:
    refused = EmewsCommand(tmp_path)("launch", str(_workflow(tmp_path, None)), "--pools", pools)
    assert refused.returncode == 2 and "--pools" in refused.stderr and "Traceback" not in refused.stderr


def test_attach_needs_an_experiment_launched_with_pools(pg_server: PgServer, tmp_path: Path) -> None:
    wf = _workflow(tmp_path, pg_server.url())
    cmd = EmewsCommand(tmp_path)
    cmd.env["GATE_FILE"] = str(wf)
    cmd(
        "launch",
        str(wf),
        "--workers",
        "1",
        "--exp-dir",
        "exp",
        "--set",
        "budget.evaluations=2",
        timeout=240,
        check=True,
    )
    attach = cmd("attach", "exp")
    assert attach.returncode == 2 and "--pools" in attach.stderr and "Traceback" not in attach.stderr
    assert len(attach.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "exp" / "pools").exists()


def test_the_optimizer_stops_and_comes_back_while_a_pool_runs(pg_server: PgServer, tmp_path: Path) -> None:
    """The first job (optimizer + pool 1) is stopped with SIGTERM while an attached pool runs
    tasks; that pool finishes them and keeps the queue's work going with no optimizer; ``emews
    serve`` then brings the optimizer back from the store on this node, without workers: the
    budget completes on the attached pool, each evaluation stored once. While it serves, another
    optimizer for the experiment (here: a connection holding the store's lock) is refused."""
    wf = _workflow(tmp_path, pg_server.url())
    with pooled_run(tmp_path, wf, workers=2) as run:
        exp, first, launch = run.exp, run.first, run.launch
        attached, running = _attach_once_queued(run, gated_command(tmp_path))
        launch.send_signal(signal.SIGTERM)
        assert launch.wait(timeout=120) == 143
        # what no pool claimed is cancelled: never run, never queued again by the next optimizer
        cancelled = first("cancel", "exp", "--queued", timeout=120, check=True)
        gone = [i for (i,) in rows(exp, "SELECT id FROM tasks WHERE state = 'cancelled' ORDER BY id")]
        assert f"cancelled {len(gone)} queued tasks" in cancelled.stdout
        (tmp_path / "open").touch()  # the attached pool finishes its tasks with no optimizer running
        assert wait_until(
            lambda: all(seen(exp, f"SELECT 1 FROM results WHERE id = {i} AND pool = 2") for i in running), 120
        )
        with open_store(exp, readonly=True) as store:
            schema = store.schema  # type: ignore[attr-defined]
        with psycopg.connect(pg_server.url(), autocommit=True) as other:
            other.execute("SELECT pg_advisory_lock(7468, oid::int) FROM pg_namespace WHERE nspname = %s", (schema,))
            refused = first("serve", "exp", timeout=120)
            busy = first("cancel", "exp", "--queued", timeout=120)
        assert refused.returncode == 2 and "another optimizer" in refused.stderr, refused.stderr
        assert busy.returncode == 2 and "optimizer is running" in busy.stderr, busy.stderr
        stored = len(rows(exp, "SELECT id FROM results"))
        served = first("serve", "exp", timeout=300)
        assert served.returncode == 0, served.stderr
        # what it took over, as emews resume says it (it said nothing); the pool may store more meanwhile
        took = re.search(r"^resumed: (\d+) earlier evaluations given to the optimizer, ", served.stderr, re.M)
        assert took is not None and stored <= int(took[1]) < BUDGET, served.stderr
        said = served.stderr.splitlines()  # said as it takes over, before its progress lines
        progress = [i for i, line in enumerate(said) if " evaluations, " in line and " failed, best " in line]
        resumed = [i for i, line in enumerate(said) if line.startswith("resumed: ")]
        assert progress and resumed and resumed[0] < progress[0], served.stderr
        assert attached.wait(timeout=120) == 0  # the pool ended once the optimizer had finished
    results = rows(exp, "SELECT id, pool FROM results ORDER BY id")
    assert len(results) == BUDGET and not {i for i, _ in results} & set(gone)
    assert all(pool == 2 for i, pool in results if i in running)
    assert "12/12 evaluations" in served.stdout + served.stderr


def test_a_training_objective_reports_and_retries_inside_a_pool(pg_server: PgServer, tmp_path: Path) -> None:
    """Training tasks through pools: every report and checkpoint is recorded in the shared store,
    and a trial killed mid-training (SIGKILL after step 3, first attempt) is retried by its pool
    from its last checkpoint, not from the start."""
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": str(TESTS / "objectives" / "trainer.py"), "metric": "loss"},
        space={"rate": {"type": "ordered", "values": [0.1, 0.2, 0.3]}, "epochs": {"type": "constant", "value": 6}},
        budget={"evaluations": 3},
        task={"isolation": "process", "timeout": 300, "retries": 1},
        store={"url": pg_server.url(), "lease": 30},
    )
    cmd = EmewsCommand(tmp_path)
    cmd.env.update(TRAINER_KILL_AT="3", TRAINER_LOG=str(tmp_path / "trainer.log"))
    cmd("launch", str(wf), "--workers", "2", "--pools", "1", "--exp-dir", "exp", timeout=300, check=True)
    exp = tmp_path / "exp"
    assert rows(exp, "SELECT DISTINCT status FROM results") == [("ok",)]
    steps = rows(exp, "SELECT trial, max(step) FROM reports GROUP BY trial ORDER BY trial")
    assert steps == [(0, 6), (1, 6), (2, 6)]
    events = [json.loads(line) for line in (tmp_path / "trainer.log").read_text().splitlines()]
    starts = sorted((e["task"], e["restored"]) for e in events if e["event"] == "start")
    assert starts == [(0, 0), (0, 3), (1, 0), (1, 3), (2, 0), (2, 3)], starts  # retried from step 3's checkpoint


def test_asha_decides_across_two_pools(pg_server: PgServer, tmp_path: Path) -> None:
    """``--pools 2`` with ASHA (its default, stopping variant): both pools train trials (every
    trial waits before its first report until both pools hold one), each pool's scheduler decides on its
    trials with every pool's reports, and the run completes with each trial stored once and the
    trials that were stopped ended before the last step."""
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": str(TESTS / "objectives" / "trainer.py"), "metric": "loss"},
        space={
            "rate": {"type": "ordered", "values": [0.1, 0.5, 0.2, 0.6, 0.3, 0.7]},
            "epochs": {"type": "constant", "value": 9},
        },
        budget={"evaluations": 6},
        task={"isolation": "inline", "timeout": 300},
        trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 1, "reduction_factor": 3}},
        store={"url": pg_server.url(), "lease": 30},
    )
    cmd = EmewsCommand(tmp_path)
    cmd.env.update(TRAINER_GATE=str(tmp_path / "open"), TRAINER_GATE_AT="1")
    exp, results = _launch_on_two_pools(cmd, wf, tmp_path)
    assert [i for i, _ in results] == list(range(6)) and {p for _, p in results} == {1, 2}
    stopped = {t for (t,) in rows(exp, "SELECT trial FROM decisions WHERE action = 'stop'")}
    assert stopped, "ASHA stopped no trial"
    last = dict(rows(exp, "SELECT trial, max(step) FROM reports GROUP BY trial"))
    assert all(last[t] < 9 for t in stopped) and all(last[t] == 9 for t in range(6) if t not in stopped)


def test_a_time_budget_ends_a_pooled_run(pg_server: PgServer, tmp_path: Path) -> None:
    """``budget: {time: 2s}`` with ``--pools``: once the time is spent, the tasks no pool claimed
    are cancelled while the claimed ones still run (the gate is closed), and those end the run
    normally once they are stored (exit 0, "time budget reached"), each once; nothing is left
    queued or leased. (The run went on proposing for as long as it was let, the budget unseen.)"""
    wf = write_workflow(
        tmp_path,
        objective={"module": str(GATED), "function": "run"},
        budget={"time": "2s"},
        task={"timeout": 120, "isolation": "inline"},
        store={"url": pg_server.url(), "lease": 30},
    )
    with pooled_run(tmp_path, wf, workers=2) as run:
        exp = run.exp
        cancelled = wait_until(lambda: seen(exp, "SELECT id FROM tasks WHERE state = 'cancelled'"), 120)
        assert cancelled, seen(exp, "SELECT id, state FROM tasks")
        running = [i for (i,) in rows(exp, "SELECT id FROM tasks WHERE state = 'leased'")]
        assert running and not (tmp_path / "open").exists()  # claimed before the budget ended, still running
    err = run.ended[run.launch].err
    assert "time budget reached" in err and "Traceback" not in err, err
    states = dict(rows(exp, "SELECT state, count(*) FROM tasks GROUP BY state"))
    assert set(states) == {"done", "cancelled"}, states
    results = [i for (i,) in rows(exp, "SELECT id FROM results ORDER BY id")]
    assert len(results) == len(set(results)) == states["done"] and set(running) <= set(results)
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["budget_reached"].startswith("time budget reached"), summary


def test_a_step_budget_is_refused_with_pools(pg_server: PgServer, tmp_path: Path) -> None:
    """Each pool's trials report their steps to that pool alone: ``budget.steps`` with ``--pools``
    is one line naming the key, exit 2, nothing made (it was never reached: the run went on); so is
    ``emews resume --set budget.steps=N`` of a pooled experiment, which leaves its workflow as it was."""
    wf = write_workflow(tmp_path, budget={"steps": 10}, store={"url": pg_server.url()})
    refused = EmewsCommand(tmp_path)("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert "budget.steps" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "exp").exists()
    cmd = gated_command(tmp_path)
    (tmp_path / "open").touch()
    pooled = gated_workflow(tmp_path, pg_server.url(), 2)
    cmd("launch", str(pooled), "--workers", "1", "--pools", "1", "--exp-dir", "exp", timeout=240, check=True)
    kept = (tmp_path / "exp" / "workflow.yaml").read_text()
    resumed = cmd("resume", "exp", "--set", "budget.steps=5", timeout=120)
    assert resumed.returncode == 2 and "Traceback" not in resumed.stderr, resumed.stderr
    assert "budget.steps" in resumed.stderr and len(resumed.stderr.strip().splitlines()) == 1
    assert (tmp_path / "exp" / "workflow.yaml").read_text() == kept
