"""``mv EXP EXP2`` while the experiment runs: the run ended with the optimizer rank's 'not an
experiment directory (no such folder; did you mean EXP2?)', a traceback in its log, MPI_Abort and
exit status 1, and wrote neither summary.json nor results.csv (nothing was lost: the store lived on
in EXP2). Now it says in one line where the directory went and writes its outputs there."""

from __future__ import annotations

import json
from pathlib import Path

from gated_job import launch_gated

from testutil import said, wait_until


def test_an_experiment_moved_while_it_runs_ends_with_its_outputs_where_it_went(emews_cmd, tmp_path: Path) -> None:
    gated = launch_gated(emews_cmd, tmp_path, evaluations=4, timeout=30)
    job, exp, moved = gated.job, gated.exp, tmp_path / "exp2"
    assert wait_until(lambda: len(gated.started()) >= 2, timeout=180), said(job)
    exp.rename(moved)
    gated.gate.touch()
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
