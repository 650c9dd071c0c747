"""Each task's output in its own run dir when two pools of one experiment run isolated children at
once, on a real PostgreSQL and real mpiexec jobs (docs/postgres.md, "Pools"): the optimizer's job
(pool 1) and an attached pool both have a worker rank 1, and their children must not share one
spool (before: the attached pool's child truncated pool 1's spool and both appended to it, so a
task's stdout.txt held another task's lines, or lost its own)."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import QUEUED, gated_command, pooled_run, rows, running_on, seen

from testutil import said, wait_until, write_workflow

OBJECTIVE = """\
import os, sys, time
from pathlib import Path
import emews

def run(params):
    task = emews.current_task().task_id
    print(f"task {task} before the gate", flush=True)
    Path(os.environ["MARK_DIR"], str(task)).touch()
    while not Path(os.environ["GATE_FILE"]).exists():
        time.sleep(0.02)
    print(f"task {task} after the gate", file=sys.stderr, flush=True)
    return params["x"] ** 2
"""


def test_two_pools_keep_each_tasks_output_apart(pg_server: PgServer, tmp_path: Path) -> None:
    """Pool 1 (1 worker) and an attached pool (1 worker) each hold a task at the gate, both printed;
    once the gate opens every task's run dir holds its own two lines and nothing else."""
    (tmp_path / "printer.py").write_text(OBJECTIVE)
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "random", "options": {"seed": 1, "backlog": 4}},  # all 4 points queued at once: pool 1
        # leases two (one running, one ahead), the attached pool finds the others queued
        objective={"module": str(tmp_path / "printer.py"), "function": "run"},
        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
        budget={"evaluations": 4},
        task={"timeout": 600, "isolation": "process"},
        store={"url": pg_server.url(), "lease": 60},
    )
    marks = tmp_path / "marks"
    with pooled_run(tmp_path, wf, workers=1, command=gated_command(tmp_path)) as run:
        exp, launch, cmd = run.exp, run.launch, run.first
        assert (
            wait_until(
                lambda: seen(exp, QUEUED) and any(marks.iterdir()) or launch.poll() is not None,
                180,
            )
            and launch.poll() is None
        ), said(launch)
        attached = run.attach(1, command=cmd)
        both = wait_until(
            lambda: running_on(exp, 2) or attached.poll() is not None,
            180,
        )
        assert both and attached.poll() is None, said(attached)
    pools = dict(rows(exp, "SELECT id, pool FROM results"))
    assert set(pools.values()) == {1, 2} and len(pools) == 4
    for task in pools:
        run_dir = exp / "runs" / "000" / f"{task:06d}"
        assert sorted(p.name for p in run_dir.iterdir()) == ["stderr.txt", "stdout.txt"], task
        assert (run_dir / "stdout.txt").read_text() == f"task {task} before the gate\n", task
        assert (run_dir / "stderr.txt").read_text() == f"task {task} after the gate\n", task
