"""Chaos harness on pools: the harness of test_kill_resume.py on a pooled experiment (PostgreSQL
store, ``emews launch --pools 1``: the lead's job runs the optimizer and a pool of 2 workers, maybe a
second pool of 1 worker beside it, ``emews attach``). At a moment drawn at random (``start``,
``mid-task``: the objective's N-th answered report, ``result``: a task returned and its result not
stored yet) a process drawn at random is stopped by a signal drawn at random: a worker rank of a pool
(the lead's or the attached one's), the attached pool whole (kill -9 of every process of its job), the
lead's launcher, or the lead's job whole. The surviving pools then finish (the killed pool's leases run
out, ``store.lease`` 3 s, and another pool runs its tasks) or, the lead's optimizer gone, ``emews
resume`` goes on with the pools still there. The same promises must hold: one ok result per point of
the budget (store, ``results.csv`` and ``emews status`` alike), no foreign checkpoint restored, no
process of any job left, no ``/dev/shm`` segment left by a job whose launcher lived or by the resume.

Copy and move are not drawn: a pooled experiment's store is its PostgreSQL schema, which the folder
names and does not hold ("a copy of the directory reads and writes the same schema as the original",
docs/postgres.md), so a copy's resume writes the original's store by design and "the copy leaves the
original untouched" does not apply; and docs/postgres.md says to move a pooled experiment only when
no pool runs.

CI runs :data:`EXAMPLES` examples (one by default); ``--chaos-examples N`` soaks (both harnesses),
``EMEWS_CHAOS_RECORD=FILE`` records each case.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from chaos_verdicts import recorded
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from pgserver import PgServer
from pooled import seen
from test_kill_resume import BLOB, BUDGET, Watched, check_promises, reports, role_pids, start, workflow

from testutil import EmewsCommand, events

EXAMPLES = max(1, int(os.environ.get("EMEWS_CHAOS_EXAMPLES", "2")) // 2)
MOMENTS = ("start", "mid-task", "result")
#: whom a stop hits: a worker rank of the lead's pool or of the attached pool, the attached pool whole,
#: the lead's launcher (the drawn signal), the lead's job whole (kill -9 of every process)
TARGETS = ("lead rank", "pool rank", "pool", "launcher", "lead")


@dataclass
class PoolCase:
    """One drawn stop of a pooled run: when, whom, how, and whether a second pool is attached."""

    moment: str
    nth: int
    target: str
    sig: str
    second: bool
    pick: int = 0

    def __str__(self) -> str:
        pools = "two pools" if self.second else "one pool"
        return f"{pools}: {self.sig} to {self.target} (pick {self.pick}) at {self.moment} #{self.nth}"


def _case(second: bool) -> st.SearchStrategy[PoolCase]:
    return st.builds(
        PoolCase,
        moment=st.sampled_from(MOMENTS),
        nth=st.integers(0, 2),
        target=st.sampled_from(TARGETS if second else tuple(t for t in TARGETS if "pool" not in t)),
        sig=st.sampled_from(["SIGKILL", "SIGTERM"]),
        second=st.just(second),
        pick=st.integers(0, 1),
    )


CASES = st.booleans().flatmap(_case)


def pooled_workflow(folder: Path, url: str) -> Path:
    """The chaos workflow (test_kill_resume.py's) on the PostgreSQL store at ``url``, leases of 3 s."""
    path = workflow(folder)
    spec = yaml.safe_load(path.read_text())
    spec["store"] = {"url": url, "lease": 3}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def result_rows(exp: Path) -> list[dict]:
    """The store's results as dicts in id order (PostgreSQL's, read as emews reads it)."""
    names = ("id", "status", "error")
    return [
        dict(zip(names, row, strict=True)) for row in seen(exp, "SELECT id, status, error FROM results ORDER BY id")
    ]


def moment_reached(case: PoolCase, log: Path, exp: Path, target: Watched | None) -> Callable[[], bool]:
    """Whether the run is at the drawn moment (``start``: the experiment is made, a pool registered,
    and the worker ranks of ``target``, the job whose rank the case stops, run)."""
    if case.moment == "start":
        return lambda: (
            (exp / "experiment.json").exists()
            and bool(seen(exp, "SELECT id FROM pools"))
            and (target is None or bool(role_pids(target.cmd, target.proc.pid)["worker"]))
        )
    if case.moment == "mid-task":
        return lambda: reports(log) > case.nth
    ended = lambda: sum(e["event"] == "end" for e in events(log))  # noqa: E731
    return lambda: ended() > case.nth and ended() > len(seen(exp, "SELECT id FROM results"))


def stop(case: PoolCase, lead: Watched, pool: Watched | None) -> Any:
    """Send the drawn stop; what was killed (a pid, a job, or ``None``: no such process then)."""
    if case.target == "lead":
        lead.cmd.kill_all()
        return "lead's job"
    if case.target == "pool":
        assert pool is not None
        pool.cmd.kill_all()
        return "pool's job"
    if case.target == "launcher":
        os.kill(lead.proc.pid, getattr(signal, case.sig))
        return lead.proc.pid
    job = lead if case.target == "lead rank" else pool
    assert job is not None
    ranks = role_pids(job.cmd, job.proc.pid)["worker"]
    if not ranks:
        return None
    pid = ranks[case.pick % len(ranks)]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, getattr(signal, case.sig))
    return pid


def stop_and_finish(case: PoolCase, folder: Path, url: str) -> None:
    """Run ``case`` in ``folder`` and check every promise; every job's processes are killed whatever happens."""
    log, exp = folder / "log.jsonl", folder / "exp"
    commands = [EmewsCommand(folder) for _ in range(3)]  # the lead, the attached pool, the resume
    for cmd in commands:
        cmd.env.update(CHAOS_LOG=str(log), CHAOS_BLOB=str(BLOB))
    seen_: dict[str, Any] = {}
    wf = pooled_workflow(folder, url)
    with recorded(case, seen_), contextlib.ExitStack() as cleanup:
        for cmd in commands:
            cleanup.callback(cmd.kill_all)
        lead = start(
            commands[0],
            "launch",
            str(wf),
            "--workers",
            "2",
            "--pools",
            "1",
            "--exp-dir",
            "exp",
            out=folder / "launch.txt",
        )
        pool = None
        if case.second:
            assert lead.wait_for(lambda: bool(seen(exp, "SELECT id FROM pools")), poll=0.05), lead.said()
            pool = start(commands[1], "attach", "exp", "--workers", "1", out=folder / "attach.txt")
        ranks_of = {"lead rank": lead, "pool rank": pool}.get(case.target)
        hit = lead.wait_for(moment_reached(case, log, exp, ranks_of), poll=0.002 if case.moment == "result" else 0.02)
        seen_["hit"] = hit
        if hit:
            lead.look()
            if pool is not None:
                pool.look()
            seen_["killed"] = stop(case, lead, pool)
        seen_["lead exit"] = lead_status = lead.wait_watching()
        note(f"lead: exit {lead_status}, killed {seen_.get('killed')}\n{lead.said()[-3000:]}")
        assert lead_status is not None, lead.said()
        # its ranks may outlive a killed launcher a moment (a resume then finds the experiment in use)
        assert commands[0].leftovers_after_exit(timeout=60) == [], "left running after the lead's launcher ended"
        jobs = [lead] + ([pool] if pool is not None else [])
        if not finished(exp) or not told_done(exp):  # the lead's optimizer is gone before its end: resume it
            complete = finished(exp)  # then the resume has nothing to run: it tells the pools they are done
            resumed = start(commands[2], "resume", "exp", out=folder / "resume.txt")
            seen_["resume exit"] = resumed.wait_watching()
            note(f"resume: exit {seen_['resume exit']}\n{resumed.said()[-3000:]}")
            assert seen_["resume exit"] == 0 or (complete and "nothing to resume" in resumed.said()), resumed.said()
            jobs.append(resumed)
        if pool is not None:
            seen_["pool exit"] = pool.wait_watching()
            note(f"attached pool: exit {seen_['pool exit']}\n{pool.said()[-3000:]}")
            assert seen_["pool exit"] is not None, pool.said()
        for cmd in commands:
            assert cmd.leftovers_after_exit(timeout=60) == []
        killed_whole = {"lead": lead, "pool": pool}.get(case.target) if hit else None
        launcher_killed = hit and case.target == "launcher" and case.sig == "SIGKILL"
        watched = [j for j in jobs if j is not killed_whole and not (launcher_killed and j is lead)]
        left = sorted(s for j in watched for s in j.segments if (Path("/dev/shm") / s).exists())
        assert left == [], f"segments left in /dev/shm: {left}"
        check_promises(commands[0], exp, log, rows_of=result_rows)


def told_done(exp: Path) -> bool:
    """Whether the pools were told the optimizer is done (a lead killed after the budget's last result
    never told them: they wait until ``emews resume`` or ``serve`` finds nothing left and tells them)."""
    return bool(seen(exp, "SELECT value FROM emews_meta WHERE key = 'pools_finished'"))


def finished(exp: Path) -> bool:
    """Every evaluation of the budget has its result in the store."""
    return len(seen(exp, "SELECT id FROM results")) >= BUDGET


@settings(
    max_examples=EXAMPLES,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    deadline=None,
)
@given(case=CASES)
def test_a_pooled_run_stopped_at_any_moment_finishes_and_keeps_every_promise(
    case: PoolCase, pg_server: PgServer
) -> None:
    note(str(case))
    folder = Path(tempfile.mkdtemp(prefix=f"chaos-pool-{uuid.uuid4().hex[:6]}-"))
    stop_and_finish(case, folder, pg_server.url())
    shutil.rmtree(folder, ignore_errors=True)  # kept after a failure, to look at
