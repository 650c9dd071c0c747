"""A pooled job killed whole (every rank: a node failure, a walltime kill) while a checkpoint was
being written left its temporary file in the trial's folder and its row ``staged`` for good: the
worker that sees its objective die cleans up after it, and a job's own launch or resume does, but
no rank of a pooled job was left to, and the next pool or optimizer skipped the cleanup (another
node's writers looked dead from here). Now the next pool, ``emews serve`` or ``emews resume``
removes the temporary files of writers gone (on this host: their process ended; on another: their
trial's lease ended) and marks the rows of checkpoints never written ``lost``, but those of
trials a live pool holds."""

from __future__ import annotations

from pathlib import Path

from pgserver import PgServer
from pooled import rows, seen

from testutil import EmewsCommand, killed_workflow, said, wait_until

#: the leases of the killed job's tasks, held by nobody any more
LIVE_LEASES = "SELECT id FROM tasks WHERE state = 'leased' AND lease_until >= extract(epoch from clock_timestamp())"
CHECKPOINTS = "SELECT step, state FROM checkpoints WHERE trial = 0 ORDER BY step"


def test_the_next_optimizer_clears_what_a_pooled_job_killed_whole_left(pg_server: PgServer, tmp_path: Path) -> None:
    wf, _ = killed_workflow(tmp_path, "stuck", timeout=600, store={"url": pg_server.url(), "lease": 2})
    first = EmewsCommand(tmp_path)
    launch = first.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp")
    exp = tmp_path / "exp"
    trial = exp / "checkpoints" / "000000"
    try:  # step 2's write begun, then held: its temporary file is there, its row staged
        assert wait_until(lambda: list(trial.glob(".*.tmp")) and seen(exp, CHECKPOINTS) == [(1, "durable"), (2, "staged")],
                          240), (seen(exp, CHECKPOINTS), sorted(p.name for p in trial.glob("*")))
    finally:
        first.kill_all()  # every process of the job at once
    launch.wait(timeout=60)
    first.remove_killed_segments()  # its MPICH segment: no later job runs on this experiment here
    assert wait_until(lambda: not rows(exp, LIVE_LEASES), 120)  # nobody renews them: they end
    (temp,) = trial.glob(".*.tmp")
    assert rows(exp, CHECKPOINTS) == [(1, "durable"), (2, "staged")]
    elsewhere = trial / ".step-00000002-001.ckpt@node9.cluster.4242.1.tmp"  # the job's writer on another node
    elsewhere.write_bytes(b"partial")
    second = EmewsCommand(tmp_path)
    serve = second.popen("serve", "exp")  # no pool: nothing runs the trial again
    try:
        assert wait_until(lambda: rows(exp, CHECKPOINTS)[1:] == [(2, "lost")], 120), (rows(exp, CHECKPOINTS), said(serve))
        assert sorted(p.name for p in trial.iterdir()) == ["step-00000001-000.ckpt"]  # both temporary files gone
        assert serve.poll() is None, said(serve)
    finally:
        second.kill_all()
    serve.wait(timeout=60)
