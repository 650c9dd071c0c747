"""``emews status --watch`` while the experiment directory is renamed under it.

It said ``not an experiment directory (no such folder; did you mean '...'?)``, suggesting another
experiment of the folder, as if the path had been mistyped. Now one line says the directory it
watched is gone (renamed, moved or deleted) and how to follow it where it is now; exit status 2.
"""

from __future__ import annotations

from pathlib import Path

from stores import count

from testutil import GATED, EmewsCommand, wait_until, write_workflow


def test_watch_of_an_experiment_renamed_meanwhile_says_it_is_gone(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    wf = write_workflow(tmp_path, objective={"module": str(GATED), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}}, budget={"evaluations": 4},
                        task={"timeout": 600, "isolation": "process"})
    cmd = EmewsCommand(tmp_path)
    cmd.env.update(GATE_FILE=str(gate), GATE_FROM="2", GATE_TIMEOUT="600")
    (tmp_path / "exp-0").mkdir()                      # a neighbour a "did you mean" would have named
    job = cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    try:
        in_flight = "SELECT COUNT(*) FROM tasks t LEFT JOIN results r ON r.id = t.id WHERE r.id IS NULL"
        assert wait_until(lambda: count(exp, in_flight) >= 2, timeout=180)  # both workers held at the gate
        watch = cmd.popen("status", "exp", "--watch", "--interval", "0.2")
        line = watch.stdout.readline()
        while line and line.strip() != "job: local, running":
            line = watch.stdout.readline()
        assert line, watch.stderr.read()
        exp.rename(tmp_path / "exp-moved")
        _, err = watch.communicate(timeout=120)
        assert watch.returncode == 2, err
        assert err.splitlines() == [
            f"emews: error: {exp}: the experiment directory is gone while it was watched (renamed, moved or "
            "deleted) (allowed: emews status NEW_PATH --watch where it is now)"], err
    finally:
        gate.touch()
        job.wait(timeout=300)
