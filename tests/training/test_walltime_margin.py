"""The walltime margin under a real ``emews launch``: from the pause time no new task starts, the
running trials pause, and the run stops itself, reported as the walltime's stop (not a signal).

Found in review: with ``walltime: {limit: "00:00:30", margin: 15}`` tasks kept being dispatched after
the pause time (each trained one epoch and paused), and the run ended as "stopped by SIGTERM" (exit
143, ``summary.json`` too), although nobody sent a signal: the walltime watcher sent SIGTERM to its
own process. Synchronized on rank 0's log line at the pause time and the objective's log, never on
sleeps; the pause time itself is compared with the start times the trials logged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testutil import events, query, stored_rows, trainer_workflow, walltime_pause_time, write_workflow

RATES = [0.5, 0.1, 0.9, 0.3, 0.05, 0.7, 0.2, 0.4]


def test_no_task_starts_after_the_pause_time_and_the_stop_is_the_walltimes(emews_cmd, tmp_path: Path) -> None:
    """Two workers, eight points (the sweep keeps more queued than the workers hold), the pause time
    10 s into the job (the trials start within a second or two, even on a loaded machine). Trials 0 and 1 start at once and hold before their step-2 report until rank 0
    logged the pause time; then each step-2 report is answered pause. Nothing else starts (before the
    fix tasks 2, 3, ... started after the pause time and paused at step 1). The run stops itself:
    exit 3, last line "stopped at the walltime margin", ``summary.json`` says so; both trials are
    stored paused at step 2, no result."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_GATE=str(gate), TRAINER_GATE_AT="2")
    wf = trainer_workflow(tmp_path, RATES, task={"isolation": "process"},
                        trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 3}},
                        walltime={"limit": "00:00:20", "margin": 10})
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    pause_at = walltime_pause_time(exp)
    assert pause_at is not None, job.communicate(timeout=60)
    gate.touch()
    out, err = job.communicate(timeout=240)
    assert job.returncode == 3, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("emews: stopped at the walltime margin: 0/8 evaluations stored; "
                           "continue with: emews resume "), err
    assert "SIGTERM" not in err and "BAD TERMINATION" not in out + err
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["interrupted"] == "stopped at the walltime margin" and summary["exit_status"] == 3
    starts = [e for e in events(log) if e["event"] == "start"]
    assert sorted(e["task"] for e in starts) == [0, 1]          # both started before the pause time ...
    assert all(e["time"] < pause_at for e in starts), (pause_at, starts)
    assert all(r["started"] < pause_at for r in stored_rows(exp))  # ... and nothing after it
    assert sorted(query(exp, "SELECT task, step FROM pauses")) == [(0, 2), (1, 2)]
    assert sorted(t for (t,) in query(exp, "SELECT id FROM tasks")) == [0, 1]
    assert stored_rows(exp) == []
    assert emews_cmd.leftovers_after_exit() == []


@pytest.mark.parametrize(("limit", "margin", "used"), [("00:00:45", 20, 20.0), ("00:05:00", 300, 150.0),
                                                       ("00:10:00", 3600, 300.0), (None, 300, 300.0)])
def test_the_margin_takes_at_most_half_the_allocation(tmp_path: Path, limit: str | None, margin: float,
                                                      used: float) -> None:
    """From the pause time nothing starts, so a margin as long as the allocation (a 5-minute debug
    job, the default margin of 300 s) would run nothing: it is cut to half the allocation."""
    from emews.config.workflow import load_workflow
    from emews.job.rank_zero import run_spec, set_allocation
    from emews.site import load_site

    walltime = {"margin": margin, **({"limit": limit} if limit else {})}
    workflow = load_workflow(str(write_workflow(tmp_path, walltime=walltime)), check_imports=False)
    spec = run_spec(workflow, tmp_path)
    set_allocation(spec, workflow, load_site("local"), 1000.0)
    assert spec.pause_margin == used
    assert spec.walltime_end == (None if limit is None else 1000.0 + sum(
        int(p) * f for p, f in zip(limit.split(":"), (3600, 60, 1))))
