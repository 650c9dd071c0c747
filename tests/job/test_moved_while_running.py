"""``mv EXP EXP2`` while the experiment runs: the run ended with the optimizer rank's 'not an
experiment directory (no such folder; did you mean EXP2?)', a traceback in its log, MPI_Abort and
exit status 1, and wrote neither summary.json nor results.csv (nothing was lost: the store lived on
in EXP2). Now it says in one line where the directory went and writes its outputs there."""

from __future__ import annotations

import json
from pathlib import Path

from testutil import said, wait_until, write_workflow

OBJECTIVE = '''\
import os, pathlib, time

def run(params):
    pathlib.Path(params["events"], f"started-{params['x']}").touch()
    while not os.path.exists(params["gate"]):
        time.sleep(0.01)
    return params["x"]
'''


def test_an_experiment_moved_while_it_runs_ends_with_its_outputs_where_it_went(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(OBJECTIVE)
    events, gate = tmp_path / "events", tmp_path / "gate"
    events.mkdir()
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "events": {"type": "constant", "value": str(events)},
                               "gate": {"type": "constant", "value": str(gate)}},
                        budget={"evaluations": 4})
    exp, moved = tmp_path / "exp", tmp_path / "exp2"
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", str(exp))
    assert wait_until(lambda: len(list(events.iterdir())) >= 2, timeout=180), said(job)
    exp.rename(moved)
    gate.touch()
    out, err = job.communicate(timeout=240)
    assert job.returncode == 0, err
    said_lines = [line for line in err.splitlines() if line.startswith("emews")]
    assert said_lines == [f"emews: the experiment directory {exp} was moved to {moved} while it ran: its summary "
                          f"and results.csv are written there (follow it with: emews status {moved})"], err
    assert "Traceback" not in err and "not an experiment directory" not in err and "Abort" not in err
    assert f"results: {moved / 'results.db'} and {moved / 'results.csv'}" in err
    assert json.loads((moved / "summary.json").read_text())["exit_status"] == 0
    assert len((moved / "results.csv").read_text().splitlines()) == 5
    assert not (moved / "lease.json").exists() and not exp.exists()
    status = emews_cmd("status", str(moved))
    assert status.returncode == 0 and "not running" in status.stdout and "4/4 evaluations: 4 ok" in status.stdout
