"""A pooled run that went on without a worker rank of one of its pools said so in ``emews status``
only once it ended (summary.json's ``lost_ranks``): while it ran, the status had no word of it,
though the pool had told the store (``PoolQueue.lost_ranks``) at its next round. Now the status of a
running pooled experiment shows the ranks its pools went on without so far."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from gated_job import write_gated
from pgserver import PgServer
from pooled import held_by, pooled_run, seen

from testutil import EmewsCommand, said, wait_until


def test_a_running_pooled_run_shows_the_rank_a_pool_went_on_without(pg_server: PgServer, tmp_path: Path) -> None:
    gated = write_gated(tmp_path, evaluations=400, timeout=3, store={"url": pg_server.url()})
    first, second = EmewsCommand(tmp_path), EmewsCommand(tmp_path)
    for command in (first, second):
        command.env.update(EMEWS_SETUP_TIMEOUT="1", EMEWS_STRANDED_GRACE="2")
        gated.arm(command, deadline=1)  # each task waits at the gate 1 s at most: the run goes on, slowly
    with pooled_run(tmp_path, gated.workflow, workers=1, command=first, gates=(gated.gate.name,)) as run:
        exp = run.exp
        assert wait_until(lambda: seen(exp, "SELECT id FROM results"), 180), said(run.launch)
        attached = run.attach(2, command=second)
        marks = lambda: [gated.started()[t] for t in held_by(exp, 2) if t in gated.started()]  # noqa: E731
        assert wait_until(lambda: len({m.rank for m in marks()}) >= 2, 180), said(attached)
        mark = marks()[0]
        os.kill(mark.pid, signal.SIGSTOP)  # the pool's distributor goes on without this rank
        answers: list[str] = []

        def said_or_over() -> bool:
            """Whether status says the rank is lost, or the run is over (its summary written)."""
            if (exp / "summary.json").exists():
                return True
            status = first("status", "exp", timeout=120)
            answers.append(status.stdout + status.stderr)
            return f"pool 2's rank {mark.rank} lost at" in status.stdout

        assert wait_until(said_or_over, 240), answers[-1:]
        # said while the run ran: its summary (the only place it was said before) not written yet
        assert not (exp / "summary.json").exists(), ("said only once the run was over", answers[-1:])
        assert run.launch.poll() is None and attached.poll() is None, said(attached)
