"""A pooled experiment whose optimizer ended without telling the pools it is done, with every
result of its budget stored: ``emews resume`` or ``emews serve`` finds nothing left to run and tells
the pools for it, so an attached pool that waits for that word ends (docs/postgres.md, "Pools").

The lead's optimizer tells the pools when it finishes; one that fails (it raised, or its job's pool
failed) leaves the queue to the other pools and to ``emews resume``, and writes a summary that says
so. A lead killed outright (kill -9) writes no summary: its resume runs a job whose optimizer finds
the budget spent and tells the pools itself; the run that ended with its summary written and the
pools not told is the one that only the "nothing left" path of resume and serve can settle. Real
PostgreSQL, real jobs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pgserver import PgServer
from pooled import gated_command, gated_workflow, running_on, seen, stored

from testutil import wait_until

BUDGET = 3

#: an optimizer that evaluates its whole budget, then raises: its run fails after its last result
FAILS_AT_THE_END = f"""
from emews import Optimizer

class FailsAtTheEnd(Optimizer):
    def run(self, evaluator):
        evaluator.map([{{"x": i / 4, "mode": "ok"}} for i in range({BUDGET})])
        raise RuntimeError("failed after the last result")
"""


@pytest.mark.parametrize("then", ["resume", "serve"])
def test_an_attached_pool_ends_once_resume_or_serve_finds_nothing_left(
    pg_server: PgServer, tmp_path: Path, then: str
) -> None:
    """The lead (1 worker, holding 2 tasks at the gate) and an attached pool (1 worker, running the
    third) run the budget; the lead's optimizer raises after its last result: the lead exits
    non-zero with every result stored and the pools not told. ``emews resume`` (``serve``) has
    nothing to run and tells them: the attached pool ends, exit 0 (it waited for good before)."""
    (tmp_path / "fails.py").write_text(FAILS_AT_THE_END)
    wf = gated_workflow(
        tmp_path,
        pg_server.url(),
        BUDGET,
        optimizer={"name": str(tmp_path / "fails.py") + ":FailsAtTheEnd"},
        store={"lease": 600},
    )
    lead, attaching = gated_command(tmp_path), gated_command(tmp_path)
    exp = tmp_path / "exp"
    launch = lead.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp")
    attached = None
    try:
        assert wait_until(lambda: seen(exp, "SELECT id FROM pools") or launch.poll() is not None, 180)
        attached = attaching.popen("attach", "exp", "--workers", "1")
        assert wait_until(lambda: running_on(exp, 2) or attached.poll() is not None, 180), seen(
            exp, "SELECT id, state, pool FROM tasks ORDER BY id"
        )
        (tmp_path / "open").touch()
        out, err = launch.communicate(timeout=300)
        assert launch.returncode != 0 and "failed after the last result" in err, (launch.returncode, err)
        assert stored(exp) == list(range(BUDGET)), err
        assert seen(exp, "SELECT value FROM emews_meta WHERE key = 'pools_finished'") == [], "the lead told the pools"
        assert attached.poll() is None, attached.communicate()  # it waits for the optimizer's word
        ended = lead(then, "exp", timeout=300)
        assert f"nothing to {then}" in ended.stderr, ended.stderr
        assert wait_until(lambda: attached.poll() is not None, 120), "the attached pool still waits for the word"
        assert attached.returncode == 0, attached.communicate()
    finally:
        (tmp_path / "open").touch()
        for cmd in (lead, attaching):
            cmd.kill_all()
        for job in (launch, attached):
            if job is not None:
                job.communicate(timeout=60)
