"""A worker rank killed with ``kill -9`` (the OOM killer, a node's cleanup) under a real ``mpiexec``,
with a model program running on every worker (a ``command:`` objective's, or one a ``module:``
objective starts with ``subprocess``): the programs die with the job.

The programs run in a session of their own (a command's, so that ``task.timeout`` can kill its
process group) or below the isolated child, which Hydra's SIGKILL of the ranks never reached: each
went on training unsupervised, writing into its run dir (and CANDLE's checkpoints there), and
``emews resume`` then ran the task again in the same run dir beside it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from testutil import wait_until, write_workflow

#: a model that marks its start in its run dir and trains until told to stop (a file) or 10 minutes
MODEL = """\
import os, sys, time
open(f"started-{os.getpid()}", "w").close()
stop = sys.argv[1]
deadline = time.monotonic() + 600
while not os.path.exists(stop) and time.monotonic() < deadline:
    time.sleep(0.05)
print("val_loss 1.0")
"""


def _rank_pid(emews_cmd, rank: int) -> int | None:
    """The pid of MPI rank ``rank`` of the job ``emews_cmd`` started (Hydra's ``PMI_RANK``)."""
    for pid, line in emews_cmd.processes().items():
        if " -m emews run " not in line or "mpiexec" in Path(line.split()[0]).name:  # a rank, not mpiexec
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"PMI_RANK={rank}".encode() in env:
            return pid
    return None


#: a ``module:`` objective that runs the model program in its run dir and reads its last line
RUNNER = """\
import subprocess, sys
import emews

def run(params):
    ctx = emews.current_task()
    ctx.run_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, {model!r}, {stop!r}]
    out = subprocess.run(argv, cwd=ctx.run_dir, capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])
"""


@pytest.mark.parametrize(("kind", "isolation"), [("command", "process"), ("command", "inline"), ("module", "process")])
def test_a_killed_worker_rank_leaves_no_model_program_running(
    emews_cmd, tmp_path: Path, kind: str, isolation: str
) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    stop = tmp_path / "stop"
    (tmp_path / "runner.py").write_text(RUNNER.format(model=str(tmp_path / "model.py"), stop=str(stop)))
    command = {"command": [sys.executable, str(tmp_path / "model.py"), str(stop)], "metric": "val_loss"}
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective=command if kind == "command" else {"module": str(tmp_path / "runner.py")},
        space={"x": {"type": "categorical", "values": [1, 2]}},
        budget={"evaluations": 2},
        task={"timeout": 600, "isolation": isolation},
    )
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    try:
        assert wait_until(lambda: len(list(exp.glob("runs/*/*/started-*"))) == 2, 120), job.stderr
        models = {int(p.name.split("-")[1]) for p in exp.glob("runs/*/*/started-*")}
        rank = wait_until(lambda: _rank_pid(emews_cmd, 2), 30)
        assert rank, emews_cmd.processes()
        os.kill(rank, signal.SIGKILL)
        job.communicate(timeout=120)
        assert job.returncode == 1
        # every model program went with the job: none trains on, unsupervised, in its run dir
        assert wait_until(lambda: not any(Path(f"/proc/{pid}").exists() for pid in models), 30), models
        assert emews_cmd.leftovers_after_exit() == []
    finally:
        stop.touch()
        emews_cmd.kill_all()
