"""An objective the kernel's OOM killer takes (a memory cgroup's limit, as Slurm's
``ConstrainRAMSpace`` sets one) is recorded as out of memory, with the cgroup's limit, not only as
a ``SIGKILL`` that may have come from anyone (review rev90: "objective process died of signal
SIGKILL (killed: out of memory or by an outside kill)", and for a command objective "command python3
died of signal SIGKILL and wrote nothing to stdout", with no word of memory). A ``kill -9`` from
outside is still said as a SIGKILL only. Real ``mpiexec`` inside a real memory cgroup of 400 MiB
(:mod:`memory_cgroup`); one worker, so that no other task runs while one is killed. With ``isolation:
inline`` the OOM killer takes the worker rank, and ``emews launch`` says so."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memory_cgroup import OOM_AT_400 as OOM
from memory_cgroup import MemoryCgroup, mode_workflow

from testutil import EmewsCommand, stored_rows

#: a model script: ``--mode oom-rss`` writes memory until the OOM killer takes it, else reports 1
PROGRAM = """\
import sys
if "oom-rss" in sys.argv:
    blocks = []
    while True:
        blocks.append(b"\\x01" * (16 * 2**20))
print("value 1")
"""


def _launch(emews_cmd: EmewsCommand, cgroup: MemoryCgroup, wf: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "emews", "launch", str(wf), "--workers", "1", "--exp-dir", "exp"]
    return subprocess.run(
        cgroup.wrap(argv), cwd=emews_cmd.cwd, env=emews_cmd.env, capture_output=True, text=True, timeout=300
    )


def _by_mode(exp: Path) -> dict[str, dict]:
    return {json.loads(r["params"])["mode"]: r for r in stored_rows(exp)}


def _oom_error(emews_cmd: EmewsCommand, cgroup: MemoryCgroup, wf: Path, statuses: dict[str, str]) -> list[str]:
    """Launch ``wf`` (exit 0, each mode's row of ``statuses``); the ``oom-rss`` row's error lines, the
    first of which names the OOM kill."""
    proc = _launch(emews_cmd, cgroup, wf)
    assert proc.returncode == 0, proc.stderr
    rows = _by_mode(Path(emews_cmd.cwd) / "exp")
    assert {m: r["status"] for m, r in rows.items()} == statuses, proc.stderr
    oom = rows["oom-rss"]["error"].splitlines()
    assert oom[0] == OOM, oom
    return oom


def test_an_objective_process_the_oom_killer_takes_is_recorded_out_of_memory(
    emews_cmd: EmewsCommand, memory_cgroup: MemoryCgroup, tmp_path: Path
) -> None:
    modes = ["oom-rss", "kill", "ok"]
    wf = mode_workflow(tmp_path, modes, "process")
    proc = _launch(emews_cmd, memory_cgroup, wf)
    assert proc.returncode == 0, proc.stderr
    rows = _by_mode(tmp_path / "exp")
    assert {m: r["status"] for m, r in rows.items()} == {"oom-rss": "crashed", "kill": "crashed", "ok": "ok"}
    oom = rows["oom-rss"]["error"].splitlines()
    assert oom[0] == OOM, oom  # the line that names the failure (the summary, status, the report)
    assert oom[1] == "objective process died of signal SIGKILL (killed: out of memory or by an outside kill)", oom
    # a kill -9 from outside (here the objective's own) is no OOM kill
    assert rows["kill"]["error"].startswith("objective process died of signal SIGKILL"), rows["kill"]
    assert "OOM killer" not in rows["kill"]["error"]
    assert f"most frequent failure: 1x {OOM}" in proc.stdout + proc.stderr
    assert emews_cmd.leftovers_after_exit() == []
    assert memory_cgroup.pids() == []


def test_a_command_the_oom_killer_takes_is_recorded_out_of_memory(
    emews_cmd: EmewsCommand, memory_cgroup: MemoryCgroup, tmp_path: Path
) -> None:
    program = tmp_path / "model.py"
    program.write_text(PROGRAM)
    modes = ["oom-rss", "ok"]
    wf = mode_workflow(
        tmp_path, modes, "process", objective={"command": [sys.executable, str(program)], "metric": "value"}
    )
    oom = _oom_error(emews_cmd, memory_cgroup, wf, {"oom-rss": "crashed", "ok": "ok"})
    assert oom[1] == f"command {sys.executable} died of signal SIGKILL and wrote nothing to stdout", oom
    assert emews_cmd.leftovers_after_exit() == []


def test_a_model_sh_whose_program_the_oom_killer_takes_is_recorded_out_of_memory(
    emews_cmd: EmewsCommand, memory_cgroup: MemoryCgroup, tmp_path: Path
) -> None:
    """A CANDLE-style ``model.sh`` runs the model: the OOM killer takes the model, and the script exits
    137 with bash's "Killed" line, which was the whole record ("... Killed  python3 model.py ...",
    status failed)."""
    (tmp_path / "model.py").write_text(PROGRAM)
    script = tmp_path / "model.sh"
    script.write_text(f'#!/bin/sh\n{sys.executable} {tmp_path / "model.py"} "$@"\n')
    script.chmod(0o755)
    wf = mode_workflow(tmp_path, ["oom-rss", "ok"], "process", objective={"command": [str(script)], "metric": "value"})
    oom = _oom_error(emews_cmd, memory_cgroup, wf, {"oom-rss": "failed", "ok": "ok"})
    assert f"command {script} exited with status 137; last lines of stderr:" in oom, oom


def test_a_worker_rank_the_oom_killer_takes_ends_the_job_saying_out_of_memory(
    emews_cmd: EmewsCommand, memory_cgroup: MemoryCgroup, tmp_path: Path
) -> None:
    """``isolation: inline``: the objective runs out of memory in its worker rank, which the OOM killer
    takes; the job ends (a rank killed under plain MPI) and ``emews launch`` said only "a rank was
    killed or exited". It says out of memory now, with the cgroup's limit, and how to go on."""
    wf = mode_workflow(tmp_path, ["oom-rss"], "inline")
    proc = _launch(emews_cmd, memory_cgroup, wf)
    assert proc.returncode == 1, proc.stderr
    said = [line for line in proc.stderr.splitlines() if line.startswith("emews: the job ended before its run did")]
    assert len(said) == 1, proc.stderr
    assert (
        ": out of memory: the kernel's OOM killer killed a rank (the memory cgroup's limit: 400 MiB); see emews.log)"
        in said[0]
    ), said
    assert said[0].endswith(f"continue with: emews resume {tmp_path / 'exp'}"), said
    assert "out of memory: the kernel's OOM killer killed a rank" in (tmp_path / "exp" / "emews.log").read_text()
    assert emews_cmd.leftovers_after_exit() == []


#: an optimizer whose rank holds 200 MiB (a large surrogate, an R session) and evaluates two points
HOG = """
from emews import Optimizer

class Hog(Optimizer):
    def run(self, evaluator):
        self.ballast = b"\\x01" * (200 * 2**20)
        evaluator.map([{"mode": "oom-rss"}, {"mode": "ok"}])
"""


def test_the_oom_killer_takes_the_objective_process_not_a_larger_rank(
    emews_cmd: EmewsCommand, memory_cgroup: MemoryCgroup, tmp_path: Path
) -> None:
    """The OOM killer takes the largest process of the cgroup: the optimizer's rank, holding 200 MiB,
    was larger than the objective process when the 400 MiB ran out, and its death ended the job (a task
    took the job down, where isolation: process is to cost one task). The objective's process is now
    the OOM killer's first choice (``oom_score_adj`` 1000, as Ray's workers): the task is recorded out of
    memory and the run ends as usual."""
    optimizer = tmp_path / "hog.py"
    optimizer.write_text(HOG)
    wf = mode_workflow(tmp_path, ["oom-rss", "ok"], "process", optimizer=f"{optimizer}:Hog")
    _oom_error(emews_cmd, memory_cgroup, wf, {"oom-rss": "crashed", "ok": "ok"})
    assert emews_cmd.leftovers_after_exit() == []


def test_the_oom_killer_takes_an_inline_workers_command_not_a_larger_rank(
    emews_cmd: EmewsCommand, memory_cgroup: MemoryCgroup, tmp_path: Path
) -> None:
    """The same with ``isolation: inline`` and a command objective: its program, started by the worker
    rank itself, is the OOM killer's first choice too (the rank of the optimizer, larger, was taken)."""
    program, optimizer = tmp_path / "model.py", tmp_path / "hog.py"
    program.write_text(PROGRAM)
    optimizer.write_text(HOG)
    wf = mode_workflow(
        tmp_path,
        ["oom-rss", "ok"],
        "inline",
        objective={"command": [sys.executable, str(program)], "metric": "value"},
        optimizer=f"{optimizer}:Hog",
    )
    _oom_error(emews_cmd, memory_cgroup, wf, {"oom-rss": "crashed", "ok": "ok"})
    assert emews_cmd.leftovers_after_exit() == []


#: a ``setup`` that loads more than the memory holds (a dataset read once per worker)
HUNGRY_SETUP = """\
def setup():
    global data
    data = [b"\\x01" * (16 * 2**20) for _ in range(64)]

def run(params):
    return 1.0
"""


def test_a_setup_the_oom_killer_takes_is_recorded_out_of_memory(
    emews_cmd: EmewsCommand, memory_cgroup: MemoryCgroup, tmp_path: Path
) -> None:
    """The objective process is taken while its ``setup`` loads 1 GiB: the task was recorded "objective
    process failed to start: objective process died of signal SIGKILL (killed: out of memory or by an
    outside kill)"; it is led by the out-of-memory line now."""
    module = tmp_path / "loads.py"
    module.write_text(HUNGRY_SETUP)
    wf = mode_workflow(tmp_path, ["ok"], "process", objective={"module": str(module)})
    proc = _launch(emews_cmd, memory_cgroup, wf)
    assert proc.returncode == 0, proc.stderr
    [row] = _by_mode(tmp_path / "exp").values()
    assert row["status"] == "crashed", row
    error = row["error"].splitlines()
    assert error[0] == OOM, error
    assert error[1].startswith("objective process failed to start: objective process died of signal SIGKILL"), error
    assert emews_cmd.leftovers_after_exit() == []
