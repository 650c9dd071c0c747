"""A pooled experiment whose PostgreSQL server goes away past ``store.retry`` (real server, real
``emews launch --pools``): the run ends with exit status 1, one line saying the store cannot be read
and how to go on, and a summary (it ended in a traceback and MPI_Abort, without summary.json);
once the server is back, ``emews resume`` completes the budget with each result stored once. While it
is away, ``emews status --watch`` says the store cannot be read now (it said "being made")."""

from __future__ import annotations

import json
from pathlib import Path

from pgserver import PgServer
from pooled import gated_workflow, pooled_run, seen, stored

from testutil import wait_until

EVALUATIONS = 6


def test_a_store_away_past_the_retry_ends_the_run_in_one_line_and_resume_completes_it(
        own_server: PgServer, tmp_path: Path) -> None:
    wf = gated_workflow(tmp_path, own_server.url(), EVALUATIONS, store={"lease": 5, "retry": 2})
    with pooled_run(tmp_path, wf, workers=2) as run:
        exp, launch, cmd = run.exp, run.launch, run.first
        leased = "SELECT id FROM tasks WHERE state = 'leased'"
        assert wait_until(lambda: len(list((tmp_path / "marks").iterdir())) == 2 and seen(exp, leased), 120)
        own_server.stop()
        watch = cmd.popen("status", "exp", "--watch", "--interval", "0.2")  # while the job runs
        try:
            first = watch.stdout.readline()
        finally:
            watch.kill()
            watch.communicate()
        assert first.startswith("job: local, running; the results store cannot be read now: cannot connect"), first
        run.open()  # the tasks end, and their results cannot be stored
        out, err = launch.communicate(timeout=300)
    assert launch.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("emews: the results store cannot be read: ") and last.endswith(f"emews resume {exp}"), err
    assert "Traceback" not in err and "MPI_Abort" not in err
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["exit_status"] == 1 and "the results store cannot be read" in summary["error"]

    own_server.restart()
    resumed = cmd("resume", "exp", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert stored(exp) == list(range(EVALUATIONS))
