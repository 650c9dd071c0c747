"""A task killed (``kill -9`` of the whole job) before rank 0 recorded it keeps its id to itself.

Under a real ``mpiexec``: the objective's first attempt stops every process of the job (SIGSTOP)
the moment it starts, so rank 0 cannot record the task (it records a task after half a second of
running), prints its point and waits at a gate; the job is then killed and resumed with the gate
open and an unseeded optimizer (a new point). Before: the store knew no task of that id, so the
resumed run gave the id to the new point, whose run folder then held the killed point's output
(``stdout.killed.txt``) and whatever the killed attempt wrote there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testutil import read_only, said, stored_rows, wait_until, write_workflow

OBJECTIVE = """\
import os, signal, sqlite3, time
from pathlib import Path

def run(params, ctx):
    print(f"task {ctx.task_id} x={params['x']!r}", flush=True)
    (ctx.run_dir / "mine.json").write_text(repr(params["x"]))
    gate = Path(os.environ["GATE_FILE"])
    if gate.exists():
        return params["x"] ** 2
    token = os.environ["EMEWS_TEST_TOKEN"].encode()
    for entry in Path("/proc").iterdir():  # the whole job stops: rank 0 records nothing more
        try:
            if entry.name.isdigit() and int(entry.name) != os.getpid() and token in (entry / "environ").read_bytes():
                os.kill(int(entry.name), signal.SIGSTOP)
        except OSError:
            pass
    db = sqlite3.connect(f"file:{os.environ['EXP']}/results.db?mode=ro", uri=True)
    try:
        recorded = bool(db.execute("SELECT id FROM tasks WHERE id = ?", (ctx.task_id,)).fetchall())
    except sqlite3.OperationalError:
        recorded = False
    Path(os.environ["PRINTED"]).write_text(str(recorded))
    while not gate.exists():
        time.sleep(0.02)
    return params["x"] ** 2
"""


def killed_before_recorded(emews_cmd, tmp_path: Path, optimizer: dict, evaluations: int) -> tuple[Path, Path]:
    """Launch ``OBJECTIVE`` on one worker, kill the whole job while its first task holds (before
    rank 0 recorded it: else the test is skipped) and return the experiment and the gate file."""
    objective = tmp_path / "holder.py"
    objective.write_text(OBJECTIVE)
    gate, printed, exp = tmp_path / "gate", tmp_path / "printed", tmp_path / "exp"
    emews_cmd.env.update(GATE_FILE=str(gate), PRINTED=str(printed), EXP=str(exp))
    wf = write_workflow(
        tmp_path,
        optimizer=optimizer,
        objective={"module": str(objective), "function": "run"},
        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
        budget={"evaluations": evaluations},
        task={"timeout": 600, "isolation": "process"},
    )
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", "exp")
    assert wait_until(lambda: printed.exists() or job.poll() is not None, timeout=240) and job.poll() is None, said(job)
    emews_cmd.kill_all()
    job.wait()
    assert emews_cmd.leftovers_after_exit() == []
    if printed.read_text() == "True":
        pytest.skip("rank 0 recorded the task before it stopped (over half a second to start it)")
    assert read_only(exp, "SELECT id FROM tasks") == [] and read_only(exp, "SELECT id FROM results") == []
    return exp, gate


def test_a_new_point_never_gets_the_id_of_a_task_killed_before_it_was_recorded(emews_cmd, tmp_path: Path) -> None:
    # unseeded: the resumed run proposes another point
    exp, gate = killed_before_recorded(emews_cmd, tmp_path, {"name": "random"}, evaluations=1)

    gate.touch()
    resumed = emews_cmd("resume", "exp", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    killed = exp / "runs" / "000" / "000000"
    (line,) = (killed / "stdout.killed.txt").read_text().splitlines()
    killed_x = float(line.split("x=")[1])
    assert line.startswith("task 0 ")
    (row,) = stored_rows(exp)
    new_x = json.loads(row["params"])["x"]
    assert new_x != killed_x
    assert row["id"] != 0, "the new point took the killed task's id"
    mine = exp / "runs" / f"{row['id'] // 1000:03d}" / f"{row['id']:06d}"
    assert (mine / "stdout.txt").read_text() == f"task {row['id']} x={new_x!r}\n"
    assert float((mine / "mine.json").read_text()) == new_x
    assert not (mine / "stdout.killed.txt").exists()
    assert float((killed / "mine.json").read_text()) == killed_x  # the killed attempt's files stay its own
    assert not (killed / "stdout.txt").exists()


def test_results_csv_followed_during_the_resume_steps_over_the_killed_tasks_id(emews_cmd, tmp_path: Path) -> None:
    """The killed, unrecorded task 0 leaves id 0 a gap that no task fills. ``results.csv``
    written while the resumed run goes on (the CSV child rank 0 starts when it has a core to
    spare, here started as rank 0 starts it, before the resume) stopped at that gap: no row
    until the run's end, where the whole file was written. It now steps over ids below every id
    on disk at the start that the store holds no task of."""
    from emews.job.issued_ids import highest_id_on_disk
    from emews.output.csvfollow import CsvFollower

    exp, gate = killed_before_recorded(emews_cmd, tmp_path, {"name": "random", "options": {"seed": 3}}, evaluations=4)

    follower = CsvFollower(exp, ["x"], interval=0.01, settled_below=highest_id_on_disk(exp) + 1)
    try:
        followed = wait_until(lambda: next(exp.glob(".results.csv.*.tmp"), None), timeout=60)
        assert followed is not None
        gate.touch()
        resumed = emews_cmd("resume", "exp", timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert [row["id"] for row in stored_rows(exp)] == [1, 2, 3, 4]
        exported = (exp / "results.csv").read_bytes()
        # the rows after the gap are followed during the run, not left to its end
        assert wait_until(lambda: len(followed.read_text().splitlines()) == 1 + 4, timeout=60), followed.read_text()
        assert follower.finish() == 4
    finally:
        gate.touch()
    assert (exp / "results.csv").read_bytes() == exported
