"""``results.csv`` followed during a pooled resume (the CSV child rank 0 starts when it has a core to
spare; here started as rank 0 starts it) steps over the ids ``emews cancel --queued`` cancelled in
an earlier run: they never get a result, and the rows after them are written during the run."""

from __future__ import annotations

import signal
from pathlib import Path

from pgserver import PgServer
from pooled import gated_workflow, pooled_run, rows, stored, wait_for_queued

from emews.job.issued_ids import highest_id_on_disk
from emews.output.csvfollow import CsvFollower
from testutil import wait_until

BUDGET = 12


def test_results_csv_followed_during_a_pooled_resume_steps_over_ids_cancelled_earlier(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """The first run is stopped (SIGTERM) with tasks queued; ``emews cancel --queued`` cancels them;
    during the resume the followed CSV stopped at the first cancelled id (no row until the run's
    end, where the whole file was written): it now has every row before the follower finishes."""
    wf = gated_workflow(tmp_path, pg_server.url(), BUDGET, store={"lease": 60})
    with pooled_run(tmp_path, wf, workers=2) as run:
        exp, launch, cmd = run.exp, run.launch, run.first
        wait_for_queued(exp)
        launch.send_signal(signal.SIGTERM)
        assert launch.wait(timeout=120) == 143
        cmd("cancel", "exp", "--queued", timeout=120, check=True)
        gone = [i for (i,) in rows(exp, "SELECT id FROM tasks WHERE state = 'cancelled' ORDER BY id")]
        assert gone
        follower = CsvFollower(exp, ["x", "mode"], interval=0.01, settled_below=highest_id_on_disk(exp) + 1)
        followed = wait_until(lambda: next(exp.glob(".results.csv.*.tmp"), None), timeout=60)
        assert followed is not None
        run.open()
        resumed = cmd("resume", "exp", timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        ids = stored(exp)
        assert len(ids) == BUDGET and not set(ids) & set(gone), (ids, gone)
        exported = (exp / "results.csv").read_bytes()
        # the rows after the cancelled ids are followed during the run, not left to its end
        assert wait_until(lambda: len(followed.read_text().splitlines()) == 1 + BUDGET, timeout=60), (
            followed.read_text()
        )
        assert follower.finish() == BUDGET
    assert (exp / "results.csv").read_bytes() == exported
