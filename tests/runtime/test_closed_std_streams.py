"""A task that closes its stdout and stderr (fd 1 and 2) and then opens a file (which gets fd 1).

The worker's process (the isolated child, or the rank itself inline) kept them closed for every
later task: their prints to stderr failed (``OSError: [Errno 9] Bad file descriptor``, the task
recorded failed) and their prints to stdout went into the first task's file. Now each task starts
with the standard streams its process was given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testutil import stored_rows, write_workflow

OBJECTIVE = '''\
import os, sys, emews

held = []

def run(params):
    task = emews.current_task().task_id
    if task == 0:
        os.close(1)
        os.close(2)
        held.append(open(params["held"], "w"))   # gets fd 1, and keeps it past the task
        sys.stderr.close()
        return 0.0
    print(f"task {task} out", flush=True)
    print(f"task {task} err", file=sys.stderr, flush=True)
    return float(task)
'''


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_task_that_closes_its_stdout_and_stderr_closes_them_for_itself_only(emews_cmd, tmp_path: Path,
                                                                             isolation: str) -> None:
    (tmp_path / "model.py").write_text(OBJECTIVE)
    held = tmp_path / "held.txt"
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "held": {"type": "constant", "value": str(held)}},
                        budget={"evaluations": 4}, task={"isolation": isolation, "timeout": 120})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    assert [(r["id"], r["status"]) for r in stored_rows(exp)] == [(i, "ok") for i in range(4)], stored_rows(exp)
    assert "task" not in held.read_text()                      # nothing of a later task in the first one's file
    for task in (1, 2, 3):
        if isolation == "process":
            run_dir = exp / "runs" / "000" / f"{task:06d}"
            assert (run_dir / "stdout.txt").read_text() == f"task {task} out\n"
            assert (run_dir / "stderr.txt").read_text() == f"task {task} err\n"
        else:                                                  # the rank's own: the job's output
            assert f"task {task} out" in proc.stdout and f"task {task} err" in proc.stderr, (proc.stdout, proc.stderr)
