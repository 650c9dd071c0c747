"""One optimizer per pooled experiment (docs/postgres.md, "Pools"), on a real PostgreSQL: taking
the store's optimizer lock is the one check a job's rank 0 (``lead``) and ``emews serve`` make
before their workers start, and the run keeps that very lock: of two optimizers starting at once
the second is refused at its check (exit 2, before any worker starts), and the first never fails
later for want of the lock. Races in threads through a barrier, and two real ``emews serve``
started together; no sleeps."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest
from pgserver import PgServer
from pooled import gated_workflow, pooled_run

from emews.config.workflow import load_workflow
from emews.core.queues import QueuePair
from emews.job.rank_zero import run_spec, take_optimizer_lock
from emews.job.wiring import SharedQueue
from emews.runtime.progress import Progress
from emews.store import open_store
from emews.store.pool_queue import OptimizerRunning, PoolQueue
from testutil import EmewsCommand, wait_until

RACES = 10


@pytest.fixture(scope="module")
def pooled(pg_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pooled experiment (launched with one pool of one worker, run to its end)."""
    folder = tmp_path_factory.mktemp("pooled")
    wf = gated_workflow(folder, pg_server.url(), 2)
    EmewsCommand(folder)(
        "launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp", timeout=300, check=True
    )
    return folder / "exp"


def _race(exp: Path) -> tuple[list[PoolQueue], list[BaseException]]:
    """Two threads take the experiment's optimizer lock at the same moment (a barrier)."""
    start = threading.Barrier(2)
    won: list[PoolQueue] = []
    refused: list[BaseException] = []

    def optimizer() -> None:
        start.wait(30.0)
        try:
            won.append(take_optimizer_lock(exp, "emews serve"))
        except OptimizerRunning as exc:
            refused.append(exc)

    threads = [threading.Thread(target=optimizer) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60.0)
    return won, refused


def test_of_two_optimizers_starting_at_once_one_is_refused_at_its_check(pooled: Path) -> None:
    """Each of RACES races: exactly one takes the lock, the other is refused with the one-line
    error (exit 2) naming the other optimizer; the winner builds its shared queue on the lock it
    holds (the point where, when the check let go of the lock, the first optimizer could find it
    taken and fail), and while that queue runs a third is refused too."""
    workflow = load_workflow(str(pooled / "workflow.yaml"), check_imports=False)
    for _ in range(RACES):
        won, refused = _race(pooled)
        assert len(won) == 1 and len(refused) == 1, (won, refused)
        assert "another optimizer serves this experiment" in str(refused[0])
        spec = run_spec(workflow, pooled)
        spec.pools, spec.optimizer_lock = True, won[0]
        store = open_store(pooled)
        try:
            shared = SharedQueue(spec, store, QueuePair(), None, [], Progress(budget=None, workers=0), None)
            try:
                with pytest.raises(OptimizerRunning):
                    take_optimizer_lock(pooled, "emews serve")
            finally:
                shared.close(RuntimeError("stopped"))  # stopped, not finished: the queue stays as it is
        finally:
            store.close()
        assert _released(pooled)  # the lock went with the run's connection (the server ends the
        again = take_optimizer_lock(pooled, "emews serve")  # session a moment after the client closed it)
        again.store.close()
        assert _released(pooled)  # before the next race


def _released(exp: Path) -> bool:
    """Whether the experiment's optimizer lock is free within 30 s (a closed connection's session,
    and its lock, end on the server a moment after the client closed it)."""
    with open_store(exp, readonly=True) as store:
        queue = PoolQueue(store)  # type: ignore[arg-type]
        return wait_until(lambda: not queue.optimizer_running(), 30.0)


def test_serve_is_refused_while_an_optimizer_holds_the_lock(pooled: Path) -> None:
    """``emews serve`` while an optimizer holds the lock: one line naming it, exit 2."""
    holder = take_optimizer_lock(pooled, "emews serve")
    try:
        refused = EmewsCommand(pooled.parent)("serve", "exp", timeout=120)
    finally:
        holder.store.close()
    assert refused.returncode == 2 and "another optimizer" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_two_serves_started_together_one_serves_one_is_refused(pg_server: PgServer, tmp_path: Path) -> None:
    """Two real ``emews serve`` of an experiment with work left, started together: whichever takes
    the lock first serves (no pool runs, so it holds the lock until stopped); the other is refused
    at its check, one line and exit 2. Stopped, the one serving ends as a stopped optimizer does,
    never with "the optimizer rank failed"."""
    wf = gated_workflow(tmp_path, pg_server.url(), 6, store={"lease": 60})
    with pooled_run(tmp_path, wf, workers=1) as run:
        launch, cmd = run.launch, run.first
        assert wait_until(lambda: any((tmp_path / "marks").iterdir()), 120), "no task ever started"
        launch.send_signal(signal.SIGTERM)  # the optimizer stops with its budget not done
        assert launch.wait(timeout=120) == 143
        serves = [cmd.popen("serve", "exp") for _ in range(2)]
        assert wait_until(lambda: any(s.poll() is not None for s in serves), 120), "neither serve ended"
        (refused,) = [s for s in serves if s.poll() is not None]
        (serving,) = [s for s in serves if s is not refused]
        err = refused.stderr.read()  # type: ignore[union-attr]
        assert refused.returncode == 2 and "another optimizer" in err and "Traceback" not in err, err
        assert serving.poll() is None  # it holds the lock: no pool runs its tasks
        serving.send_signal(signal.SIGTERM)
        serving.wait(timeout=120)
        out = serving.stderr.read()  # type: ignore[union-attr]
        assert "optimizer rank failed" not in out and "another optimizer" not in out, out
