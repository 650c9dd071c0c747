"""What the tasks running at a ``kill -9`` printed survives the resume (the crash reason is there).

Under a real ``mpiexec``: the objective prints a line naming its attempt to stdout and stderr, then
waits at a gate; once its task is recorded the whole job is killed (``kill -9``) and resumed with
the gate open. The killed attempt's output is kept in the task's run folder as
``stdout.killed.txt`` / ``stderr.killed.txt`` beside the new attempt's ``stdout.txt`` / ``stderr.txt``
(before: the resumed child truncated the spool, and the killed attempt's lines were gone).
"""

from __future__ import annotations

import os
from pathlib import Path

from testutil import read_only, said, wait_until, write_workflow

OBJECTIVE = """\
import os, sys, time
from pathlib import Path

def run(params):
    attempt = "resumed" if Path(os.environ["GATE_FILE"]).exists() else "killed"
    print(f"out of the {attempt} attempt", flush=True)
    print(f"err of the {attempt} attempt", file=sys.stderr, flush=True)
    Path(os.environ["PRINTED"]).touch()
    while not Path(os.environ["GATE_FILE"]).exists():
        time.sleep(0.02)
    return params["x"] ** 2
"""


def killed_then_resumed(emews_cmd, wf: Path, exp: Path, gate: Path, *, workers: int, printed: list[Path]) -> None:
    """Launch ``wf``; once task 0 printed (each of ``printed`` exists) and rank 0 recorded it (else
    its id is left unused), ``kill -9`` every process of the job at once; open the gate and resume."""
    job = emews_cmd.popen("launch", str(wf), "--workers", str(workers), "--exp-dir", exp.name)
    started = wait_until(
        lambda: (all(p.exists() for p in printed) and read_only(exp, "SELECT id FROM tasks WHERE id = 0"))
        or job.poll() is not None,
        240,
    )
    assert started and job.poll() is None, said(job)
    emews_cmd.kill_all()
    job.wait()
    assert emews_cmd.leftovers_after_exit() == []
    gate.touch()
    resumed = emews_cmd("resume", exp.name, timeout=300)
    assert resumed.returncode == 0, resumed.stderr


def test_the_output_of_a_task_killed_by_kill_9_is_kept_on_resume(emews_cmd, tmp_path: Path) -> None:
    objective = tmp_path / "printer.py"
    objective.write_text(OBJECTIVE)
    gate, printed = tmp_path / "gate", tmp_path / "printed"
    emews_cmd.env.update(GATE_FILE=str(gate), PRINTED=str(printed))
    wf = write_workflow(
        tmp_path,
        objective={"module": str(objective), "function": "run"},
        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
        budget={"evaluations": 1},
        task={"timeout": 600, "isolation": "process"},
    )
    exp = tmp_path / "exp"
    killed_then_resumed(emews_cmd, wf, exp, gate, workers=1, printed=[printed])
    run_dir = exp / "runs" / "000" / "000000"
    assert (run_dir / "stdout.killed.txt").read_text() == "out of the killed attempt\n"
    assert (run_dir / "stderr.killed.txt").read_text() == "err of the killed attempt\n"
    assert (run_dir / "stdout.txt").read_text() == "out of the resumed attempt\n"
    assert (run_dir / "stderr.txt").read_text() == "err of the resumed attempt\n"
    assert os.listdir(exp / "runs" / ".spool" / "rank1") and all(
        p.stat().st_size == 0 for p in (exp / "runs" / ".spool" / "rank1").iterdir() if p.name.endswith(".txt")
    )

    again = emews_cmd("resume", "exp", "--set", "budget.evaluations=2", timeout=300)  # a second resume
    assert again.returncode == 0, again.stderr
    assert (run_dir / "stdout.killed.txt").read_text() == "out of the killed attempt\n"
    assert (run_dir / "stdout.txt").read_text() == "out of the resumed attempt\n"


TEAM_OBJECTIVE = """\
import os, time
from pathlib import Path

def run(params, ctx):
    attempt = "resumed" if Path(os.environ["GATE_FILE"]).exists() else "killed"
    print(f"out of the {attempt} attempt of member {ctx.team_rank}", flush=True)
    Path(os.environ["PRINTED"] + str(ctx.team_rank)).touch()
    while not Path(os.environ["GATE_FILE"]).exists():
        time.sleep(0.02)
    return 1.0
"""


def test_each_team_members_output_at_a_kill_9_is_kept_in_its_own_file(emews_cmd, tmp_path: Path) -> None:
    """A 2-rank task killed by ``kill -9``: on resume both members' children moved their spools into
    the one ``stdout.killed.txt``, at once; member r's now goes to ``stdout.killed.rank-r.txt``."""
    objective = tmp_path / "printer.py"
    objective.write_text(TEAM_OBJECTIVE)
    gate, printed = tmp_path / "gate", tmp_path / "printed"
    emews_cmd.env.update(GATE_FILE=str(gate), PRINTED=str(printed))
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": str(objective), "function": "run"},
        space={"x": {"type": "ordered", "values": [1]}},
        budget={"evaluations": 1},
        task={"timeout": 600, "isolation": "process", "ranks": 2},
    )
    exp = tmp_path / "exp"
    killed_then_resumed(emews_cmd, wf, exp, gate, workers=2, printed=[Path(f"{printed}{r}") for r in (0, 1)])
    run_dir = exp / "runs" / "000" / "000000"
    assert (run_dir / "stdout.killed.txt").read_text() == "out of the killed attempt of member 0\n"
    assert (run_dir / "stdout.killed.rank-1.txt").read_text() == "out of the killed attempt of member 1\n"
    assert (run_dir / "stdout.txt").read_text() == "out of the resumed attempt of member 0\n"
    assert (run_dir / "stdout.rank-1.txt").read_text() == "out of the resumed attempt of member 1\n"
