"""``emews status EXP | head -1``: a reader that goes away ends the command quietly (exit 141, as
after SIGPIPE), not with a BrokenPipeError traceback. ``emews launch`` on this machine leaves stdout
to the user's code and says everything of its own on stderr (docs/workflow-reference.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testutil import EmewsCommand


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "emews", "check", "random"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_a_local_launch_leaves_stdout_to_the_objective(tmp_path: Path) -> None:
    """What an inline objective prints is the launch's stdout, and only that: the experiment line,
    the progress and the closing summary (its ``results:`` line last) are on stderr, so that
    ``emews launch ... > out.txt`` keeps the user's output apart from emews'."""
    (tmp_path / "obj.py").write_text(
        "def run(params):\n    print('hello from the objective', flush=True)\n    return params['x'] ** 2\n")
    (tmp_path / "wf.yaml").write_text(
        "optimizer: {name: random, options: {seed: 1}}\nobjective: {module: obj.py, function: run}\n"
        "space: {x: {type: float, lower: 0, upper: 1}}\nbudget: {evaluations: 2}\ntask: {isolation: inline}\n")
    run = EmewsCommand(tmp_path)("launch", "wf.yaml", "--site", "local", "--workers", "1", "--exp-dir", "exp",
                                 timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["hello from the objective"] * 2, run.stdout
    said = run.stderr.splitlines()
    assert said[0] == f"experiment {tmp_path / 'exp'}: 1 worker", run.stderr
    assert said[-1].startswith("results: ") and "best objective" in run.stderr, run.stderr
