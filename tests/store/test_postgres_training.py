"""A training experiment whose store is in PostgreSQL, under a real mpiexec: ASHA's hand-computed
case (tests/training/test_trial_runs.py) stores the same reports, decisions and checkpoints as
with SQLite, and ``results.csv``, ``emews checkpoints`` and ``emews status`` read them."""

from __future__ import annotations

import csv
from pathlib import Path

from pgserver import PgServer

from emews.store import DURABLE, open_store
from testutil import TESTS, EmewsCommand, write_workflow

TRAINER = TESTS / "objectives" / "trainer.py"
RATES = [0.5, 0.1, 0.9, 0.3, 0.05]


def test_asha_on_postgres(pg_server: PgServer, tmp_path: Path) -> None:
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"}, objective={"module": str(TRAINER), "metric": "loss"},
        space={"rate": {"type": "ordered", "values": RATES}, "epochs": {"type": "constant", "value": 9}},
        budget={"evaluations": len(RATES)}, task={"isolation": "inline", "timeout": 120},
        store={"url": pg_server.url()},
        trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 1, "reduction_factor": 3}})
    cmd = EmewsCommand(tmp_path)
    proc = cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    assert not (exp / "results.db").exists()
    with open_store(exp, readonly=True) as store:
        assert store.top_steps() == {0: 9, 1: 9, 2: 1, 3: 3, 4: 9}
        assert [r.objective for r in store] == [RATES[t] + 1 / [9, 9, 1, 3, 9][t] for t in range(5)]
        kept = store.checkpoints()
        assert {c.state for c in kept} == {DURABLE} and all(Path(c.path).is_file() for c in kept)
        assert all(Path(c.path).is_relative_to(exp) for c in kept)
    with open(exp / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["id"], r["t:step"], r["t:decision"]) for r in rows] == [
        ("0", "9", "complete"), ("1", "9", "complete"), ("2", "1", "stop"), ("3", "3", "stop"), ("4", "9", "complete")]
    listed = cmd("checkpoints", "exp", timeout=120, check=True)
    assert f"{len(kept)} checkpoints" in listed.stdout + listed.stderr
    status = cmd("status", "exp", timeout=120, check=True)
    assert "5/5 evaluations" in status.stdout and "stopped early" in status.stdout
