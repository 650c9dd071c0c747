"""An experiment outlives the emews that made it: a real experiment an older emews made and stopped,
resumed by this one (``tests/data/old-experiments/README.md`` says which commit and command made it).

The store has no schema version yet (2026-11-23), absolute checkpoint paths, and the workflow's
``scheduler:`` key from before ``trial_scheduler:``; its experiment has moved since (the test's
folder) and so has its objective (the recorded path is the one place that names it)."""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import yaml

from emews.store.results_store import SCHEMA_VERSION
from testutil import TESTS, EmewsCommand, query, stored_rows

OLD = TESTS / "data" / "old-experiments"


def older_experiment(tmp_path: Path, name: str) -> Path:
    """A copy of the fixture ``name`` whose workflow names the fixture's objective where it is now."""
    exp = tmp_path / "exp"
    shutil.copytree(OLD / name, exp)
    objective = shutil.copy(OLD / "trial.py", tmp_path / "trial.py")
    recorded = exp / "workflow.yaml"
    text = recorded.read_text()
    recorded.write_text(text.replace(yaml.safe_load(text)["objective"]["module"], str(objective)))
    return exp


def test_an_asha_experiment_stopped_by_859fce6_resumes_where_it_stopped(
    emews_cmd: EmewsCommand, tmp_path: Path
) -> None:
    exp = older_experiment(tmp_path, "asha-859fce6")
    before = stored_rows(exp)
    assert [r["id"] for r in before] == [0, 2, 3, 4] and query(exp, "PRAGMA user_version") == [(0,)]
    assert query(exp, "SELECT task, step FROM pauses") == [(1, 8)]  # trial 1 paused at step 8 by the stop

    proc = emews_cmd("resume", str(exp), "--workers", "2", timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "notice" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr

    rows = {r["id"]: r for r in stored_rows(exp)}
    assert sorted(rows) == list(range(8))  # nothing lost, nothing twice, the ids of the older run kept
    # the objective fails a task that restores another trial's checkpoint, or another step than it says
    assert {r["status"] for r in rows.values()} == {"ok"}, [r["error"] for r in rows.values()]
    for old in before:
        assert {key: rows[old["id"]][key] for key in old} == old
    # trial 1 went on from its checkpoint of step 8: a restart would have reported step 1 again
    assert [s for (s,) in query(exp, "SELECT step FROM reports WHERE trial = 1 ORDER BY seq")] == list(range(1, 10))
    assert query(exp, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(exp, "SELECT COUNT(*) FROM checkpoints WHERE path LIKE '/%'") == [(0,)]  # made relative
    durable = [path for (path,) in query(exp, "SELECT path FROM checkpoints WHERE state = 'durable'")]
    assert durable and all((exp / path).is_file() for path in durable)


def trained_to_max_t_by_859fce6(exp: Path, trial: int) -> None:
    """``trial`` of the fixture, made one that trained its full course (``max_t`` 9) as 859fce6 wrote
    such a trial: reports up to step 9, its scheduler's answer at step 9 ``stop`` (it said ``stop``
    at ``max_t`` until f3134cc; the fixture's trials were all stopped at a rung)."""
    db = sqlite3.connect(exp / "results.db")
    with db:
        (last,) = db.execute("SELECT MAX(step) FROM reports WHERE trial = ?", (trial,)).fetchone()
        db.execute("DELETE FROM decisions WHERE trial = ?", (trial,))
        db.executemany(
            "INSERT INTO reports (trial, step, metrics, time) VALUES (?, ?, ?, ?)",
            [
                (trial, step, json.dumps({"val_loss": 1.0 / step}), 1795993966.9 + step / 100)
                for step in range(last + 1, 10)
            ],
        )
        db.execute("INSERT INTO decisions (trial, step, action, time) VALUES (?, 9, 'stop', 1795993967.0)", (trial,))
    db.close()


def endings_in_csv(exp: Path) -> dict[int, str]:
    with (exp / "results.csv").open() as fh:
        return {int(row["id"]): row["t:ended"] for row in csv.DictReader(fh)}


def test_a_trial_859fce6_stopped_at_max_t_reads_completed_before_and_after_a_resume(
    emews_cmd: EmewsCommand, tmp_path: Path
) -> None:
    exp = older_experiment(tmp_path, "asha-859fce6")
    trained_to_max_t_by_859fce6(exp, 0)

    # read as it is, not resumed (the readers migrate nothing): trial 0 trained fully, the others stopped at a rung
    said = emews_cmd("results", str(exp), check=True).stdout
    assert "3 stopped early, 1 completed" in said, said
    assert endings_in_csv(exp) == {0: "completed", 2: "stopped early", 3: "stopped early", 4: "stopped early"}
    status = emews_cmd("status", str(exp), check=True).stdout
    assert "3 stopped early, 1 completed" in status, status
    assert query(exp, "SELECT action FROM decisions WHERE trial = 0") == [("stop",)]  # nothing written

    proc = emews_cmd("resume", str(exp), "--workers", "2", timeout=600)
    assert proc.returncode == 0, proc.stderr
    # the resumed run stored the answer as this emews names it: its own readers (results.csv as it
    # writes it, Optuna's pruned trials) and later ones read it so
    assert query(exp, "SELECT step, action FROM decisions WHERE trial = 0") == [(9, "complete")]
    endings = endings_in_csv(exp)
    assert endings[0] == "completed" and [endings[t] for t in (2, 3, 4)] == ["stopped early"] * 3, endings


def test_resume_set_budget_of_an_859fce6_experiment_keeps_its_records_keys(
    emews_cmd: EmewsCommand, tmp_path: Path
) -> None:
    """``resume --set budget...`` writes the budget into the record before the job migrates the
    store; the rest of the file stays as 859fce6 wrote it (``scheduler:``), so a job that fails
    before the migration leaves the old emews an experiment it still reads. This emews runs it."""
    exp = older_experiment(tmp_path, "asha-859fce6")
    before = yaml.safe_load((exp / "workflow.yaml").read_text())
    proc = emews_cmd("resume", str(exp), "--workers", "2", "--set", "budget.evaluations=9", timeout=600)
    assert proc.returncode == 0 and "notice" not in proc.stderr, proc.stderr
    assert yaml.safe_load((exp / "workflow.yaml").read_text()) == {**before, "budget": {"evaluations": 9}}
    assert sorted(r["id"] for r in stored_rows(exp)) == list(range(9))
