"""An objective process killed from outside as it starts (SIGKILL, the OOM killer) is a crash, and
``task.retries`` runs the task again.

Found by the chaos harness (tests/chaos, ``SIGKILL to child at start #2``): the kill came while
the worker waited for its new objective process to say it was ready, and the task ended
``failed`` ("objective process failed to start: ... died of signal SIGKILL") with its retry
unused, as an import error does, though the same kill a moment later was a ``crashed`` attempt
run again. Real ``mpiexec``; the objective's setup kills its own process on its first start."""

from __future__ import annotations

from pathlib import Path

from testutil import EmewsCommand, query, stored_rows, write_workflow

KILLED_AT_SETUP = """\
import os, pathlib, signal

def setup():
    first = pathlib.Path(os.environ["KILLED_MARK"])
    if not first.exists():
        first.touch()
        os.kill(os.getpid(), signal.SIGKILL)

def run(params):
    return params["x"]
"""


def test_a_task_whose_process_is_killed_as_it_starts_runs_again(emews_cmd: EmewsCommand, tmp_path: Path) -> None:
    module = tmp_path / "killed_at_setup.py"
    module.write_text(KILLED_AT_SETUP)
    emews_cmd.env["KILLED_MARK"] = str(tmp_path / "killed-once")
    wf = write_workflow(
        tmp_path,
        objective={"module": str(module)},
        space={"x": {"type": "float", "lower": 0, "upper": 1}},
        budget={"evaluations": 1},
        task={"isolation": "process", "timeout": 120, "retries": 1},
    )
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    [row] = stored_rows(tmp_path / "exp")
    assert row["status"] == "ok", row
    [(status, error)] = query(tmp_path / "exp", "SELECT status, error FROM attempts")
    assert status == "crashed" and "failed to start" in error and "SIGKILL" in error
