"""Checkpoint retention (``checkpoints.keep_last`` ...) under pools: each pool deletes what the rules
no longer keep, over every pool's checkpoints, and never a file a stored row (not deleted) names
(docs/training.md, "Retention"; docs/postgres.md, "Pools")."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import pooled_run, rows, seen, trainer_command

from emews.store import open_store
from emews.training.retention import Retention
from testutil import events, trainer_workflow, wait_until


def _what_retention_leaves(exp: Path, policy: Retention) -> tuple[set[str], set[str]]:
    """The paths of the checkpoints the rules keep over every checkpoint the experiment made, and
    those of the rows not marked deleted."""
    with open_store(exp, readonly=True) as store:
        every = store.checkpoints(("staged", "durable", "deleted"))  # type: ignore[attr-defined]
        doomed = set(policy.to_delete(every, store.pinned()))  # type: ignore[attr-defined]
        kept = {Path(r.path).relative_to(exp.absolute()).as_posix() for r in every if r.id not in doomed}
        live = {Path(r.path).relative_to(exp.absolute()).as_posix() for r in every if r.state != "deleted"}
    return kept, live


def test_keep_last_holds_for_a_trial_that_moved_to_another_pool(pg_server: PgServer, tmp_path: Path) -> None:
    """``keep_last: 1``. Pool 1 (1 worker) holds trials 0 and 1 and has made a checkpoint durable
    (its retention has looked at the store) before pool 2 exists; pool 2 trains trial 2 to step 3
    and is killed (-9). Pool 1 finishes its trials, then trial 2 from its step-3 checkpoint. At the
    end each trial has one checkpoint, its last (what the rules keep over every checkpoint made),
    every file on disk is a row's that is not deleted, and every such row's file is there. Before,
    trial 2's steps 2 and 3 (pool 2's) stayed: pool 1's retention looked only at its own."""
    policy = Retention(keep_last=1)
    wf = trainer_workflow(
        tmp_path, [0.1, 0.2, 0.3], epochs=6, task={"isolation": "process", "timeout": 300},
        store={"url": pg_server.url(), "lease": 10},  # 2 s: a pool late for a heartbeat under load is not counted
        checkpoints={"keep_last": 1, "background": False},  # a checkpoint is durable with the next report
    )
    log = tmp_path / "trainer.log"
    first, second = trainer_command(tmp_path, 3, "open-1"), trainer_command(tmp_path, 4, "open-2")
    with pooled_run(tmp_path, wf, workers=1, command=first, gates=("open-1", "open-2")) as run:
        exp = run.exp
        durable = "SELECT 1 FROM checkpoints WHERE trial = 0 AND step = 2 AND state = 'durable'"  # at the gate
        assert wait_until(lambda: seen(exp, durable), 180), events(log)
        attached = run.attach(1, command=second)
        step_3 = exp / "checkpoints" / "000002" / "step-00000003-002.ckpt"
        assert wait_until(lambda: seen(exp, "SELECT 1 FROM reports WHERE trial = 2 AND step = 3") and step_3.exists(),
                          180), events(log)
        second.kill_all()
        attached.wait(timeout=60)
    assert rows(exp, "SELECT id, status, pool FROM results ORDER BY id") == [(0, "ok", 1), (1, "ok", 1), (2, "ok", 1)]
    assert [(e["task"], e["restored"]) for e in events(log) if e["event"] == "start"][-1] == (2, 3)
    kept, live = _what_retention_leaves(exp, policy)
    on_disk = {p.relative_to(exp).as_posix() for p in (exp / "checkpoints").rglob("*.ckpt")}
    assert on_disk == live, (on_disk, live)  # no row's file deleted, no file without a live row
    assert live == kept, sorted(live - kept)
    assert rows(exp, "SELECT trial, step FROM checkpoints WHERE state <> 'deleted' ORDER BY trial") == [
        (0, 6), (1, 6), (2, 6)]


def test_keep_best_experiment_counts_every_pools_checkpoints(pg_server: PgServer, tmp_path: Path) -> None:
    """``keep_last: 1, keep_best_experiment: 1`` on two pools of 1 worker, four trials whose losses
    are noisy (the trainer's fixed noise: trial 2's best is its step 5, the experiment's best is
    trial 0's step 6); every trial waits before step 3 until both pools have stored a report. At
    the end exactly what the rules keep over every checkpoint made is left: each trial's last and
    the experiment's one best, every file a live row's. Before, each pool kept the best of the
    checkpoints it had seen (trial 2's step 5 stayed beside trial 0's step 6)."""
    policy = Retention(keep_last=1, keep_best_experiment=1)
    wf = trainer_workflow(
        tmp_path, [0.2, 0.3, 0.1, 0.4], epochs=6, task={"isolation": "inline", "timeout": 300},
        store={"url": pg_server.url(), "lease": 30},
        checkpoints={"keep_last": 1, "keep_best_experiment": 1, "background": False},
    )
    cmd = trainer_command(tmp_path, 3, TRAINER_NOISE="0.5")
    with pooled_run(tmp_path, wf, workers=1, pools=2, command=cmd) as run:
        exp = run.exp
        reported = "SELECT DISTINCT t.pool FROM reports r JOIN tasks t ON t.id = r.trial WHERE r.step = 2"
        assert wait_until(lambda: len(seen(exp, reported)) == 2, 180), seen(exp, "SELECT id, state, pool FROM tasks")
    assert len(rows(exp, "SELECT id FROM results WHERE status = 'ok'")) == 4
    kept, live = _what_retention_leaves(exp, policy)
    on_disk = {p.relative_to(exp).as_posix() for p in (exp / "checkpoints").rglob("*.ckpt")}
    assert on_disk == live, (on_disk, live)
    assert live == kept, (sorted(live - kept), sorted(kept - live), rows(exp, "SELECT id, pool FROM results"))
