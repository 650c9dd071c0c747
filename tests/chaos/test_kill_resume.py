"""Chaos harness: a real ``emews launch`` (local site, ``mpiexec``, 3 worker ranks, tasks in their own
processes) of a PyTorch training objective with checkpoints (``tests/objectives/chaos_digits.py``)
is stopped at a moment drawn at random, by a signal drawn at random, sent to a process drawn at
random; the experiment is then maybe copied or moved, and resumed (``emews resume``), a resume
maybe killed whole in its turn and resumed again. Whatever was
drawn, emews' promises must hold:

- every point of the budget has exactly one final result, none lost, none twice (store and
  ``results.csv`` alike), and ``emews status`` counts the same;
- a restored checkpoint is the trial's own (the objective checks the trial id, parameters and step
  its checkpoint names, and logs a ``foreign`` event otherwise);
- the original of a copy is untouched by the copy's resume (byte for byte, the store's WAL index
  aside);
- no process of the run is left, and no ``/dev/shm`` segment that its processes mapped outlives
  the run's launcher or, the launcher killed too, the resume.

Moments come from events, never sleeps: ``start`` (the experiment is made, its ranks may not be),
``mid-task`` (the objective's N-th answered report), ``checkpoint`` (a checkpoint's temporary file
is being written: the objective's checkpoints carry an 8 MB blob so that the write lasts),
``result`` (a task has returned and its result is not stored yet). Each example is a fresh
experiment. CI runs a few examples (:data:`EXAMPLES`); ``pytest --chaos-examples N`` (or
``EMEWS_CHAOS_EXAMPLES=N``) soaks longer. ``EMEWS_CHAOS_RECORD=FILE`` appends each drawn case and
what was seen (JSON lines) to FILE.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from chaos_verdicts import recorded
from hypothesis import Phase, given, note, settings
from hypothesis import strategies as st

from testutil import TESTS, EmewsCommand, events, read_only, stored_rows

#: examples per run: a few in CI (each is a launch and a resume of 4 trials), more for a soak
EXAMPLES = int(os.environ.get("EMEWS_CHAOS_EXAMPLES", "2"))
BUDGET = 4
EPOCHS = 2
BLOB = 8 * 2**20
MOMENTS = ("start", "mid-task", "checkpoint", "result")
TARGETS = ("launcher", "rank 0", "worker", "child", "job")


@dataclass
class Case:
    """One drawn stop: when, whom, how, and what is done with the folder before the resume."""

    moment: str
    nth: int
    target: str
    sig: str
    relocate: str
    pick: int = 0
    #: the resume killed too (every process, SIGKILL) after this many of its answered reports, then
    #: resumed again (``None``: it runs to its end)
    again: int | None = None

    def __str__(self) -> str:
        twice = "" if self.again is None else f", its resume killed at report #{self.again} and resumed again"
        return (
            f"{self.sig} to {self.target} (pick {self.pick}) at {self.moment} #{self.nth}, then {self.relocate}{twice}"
        )


CASES = st.builds(
    Case,
    moment=st.sampled_from(MOMENTS),
    nth=st.integers(0, 2),
    target=st.sampled_from(TARGETS),
    sig=st.sampled_from(["SIGKILL", "SIGTERM"]),
    relocate=st.sampled_from(["none", "copy", "move"]),
    pick=st.integers(0, 2),
    again=st.none() | st.integers(0, 2),
)


def workflow(folder: Path) -> Path:
    path = folder / "wf.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "optimizer": {"name": "random", "options": {"seed": 1}},
                "objective": {"module": str(TESTS / "objectives" / "chaos_digits.py"), "metric": "val_loss"},
                "space": {
                    "lr": {"type": "float", "lower": 0.01, "upper": 0.2, "log": True},
                    "units": {"type": "ordered", "values": [8, 16]},
                    "epochs": {"type": "constant", "value": EPOCHS},
                },
                "budget": {"evaluations": BUDGET},
                "task": {"timeout": 300, "isolation": "process", "retries": 1},
            },
            sort_keys=False,
        )
    )
    return path


@dataclass
class Watched:
    """A command of the job run in its own session (output to files, so that orphans holding its
    pipes never block the test) and the ``/dev/shm`` segments its processes were seen mapping."""

    cmd: EmewsCommand
    proc: subprocess.Popen
    out: Path
    segments: set[str] = field(default_factory=set)

    def look(self) -> None:
        """Add the segments the job's live processes map now."""
        for pid in self.cmd.processes():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                    if "/dev/shm/mpich_shm_" in line:
                        self.segments.add(line.rsplit("/", 1)[1].split()[0])

    def wait_for(self, reached: Callable[[], bool], poll: float, timeout: float = 300) -> bool:
        """Until ``reached()`` (true) or the command's end (false), asking every ``poll`` seconds and
        looking at its segments meanwhile."""
        deadline, polls = time.monotonic() + timeout, 0
        while self.proc.poll() is None and time.monotonic() < deadline:
            if reached():
                return self.proc.poll() is None
            polls += 1
            if polls % int(0.1 / poll) == 0:
                self.look()
            time.sleep(poll)
        return False

    def wait_watching(self, timeout: float = 300) -> int | None:
        """Until the command ends (its exit status), looking at its segments meanwhile."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.look()
            time.sleep(0.05)
        return self.proc.poll()

    def said(self) -> str:
        return self.out.read_text() if self.out.exists() else ""


def start(cmd: EmewsCommand, *args: str, out: Path) -> Watched:
    with out.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "emews", *args],
            cwd=cmd.cwd,
            env=cmd.env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    return Watched(cmd, proc, out)


def role_pids(cmd: EmewsCommand, launcher: int) -> dict[str, list[int]]:
    """The job's processes by role: launcher, rank 0, worker (ranks 1..), child (a rank's objective process)."""
    roles: dict[str, list[int]] = {"launcher": [launcher], "rank 0": [], "worker": [], "child": []}
    ranks: dict[int, int] = {}
    for pid in cmd.processes():
        with contextlib.suppress(OSError):
            env = dict(
                item.split(b"=", 1) for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in item
            )
            if b"PMI_RANK" in env:
                ranks[pid] = int(env[b"PMI_RANK"])
    for pid, rank in sorted(ranks.items(), key=lambda item: item[1]):
        roles["rank 0" if rank == 0 else "worker"].append(pid)
    for pid in cmd.processes():
        with contextlib.suppress(OSError, IndexError):
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if ranks.get(parent, 0) > 0:
                roles["child"].append(pid)
    return roles


def moment_reached(case: Case, cmd: EmewsCommand, launcher: int, exp: Path, log: Path) -> Callable[[], bool]:
    """Whether the run is at the drawn moment now (at ``start``: the experiment is made and the
    drawn target runs, no task has reported yet)."""
    if case.moment == "start":
        return lambda: (
            (exp / "experiment.json").exists()
            and (case.target in ("launcher", "job") or bool(role_pids(cmd, launcher)[case.target]))
        )
    if case.moment == "mid-task":
        return lambda: reports(log) > case.nth
    if case.moment == "checkpoint":
        return lambda: any(True for _ in (exp / "checkpoints").glob("*/.*.tmp"))
    ended = lambda: sum(e["event"] == "end" for e in events(log))  # noqa: E731
    return lambda: ended() > case.nth and ended() > len(read_only(exp, "SELECT id FROM results"))


def reports(log: Path) -> int:
    """How many reports the objective logged answered, in every run so far."""
    return sum(e["event"] == "reported" for e in events(log))


def files_of(exp: Path) -> dict[str, str]:
    """Every file under ``exp`` and its content's digest (not SQLite's WAL index, which readers write)."""
    return {
        str(p.relative_to(exp)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(exp.rglob("*"))
        if p.is_file() and not p.name.endswith("-shm")
    }


def stop_and_resume(case: Case, folder: Path) -> None:
    """Run ``case`` in ``folder`` and check every promise; the job's processes are killed whatever happens."""
    cmd = EmewsCommand(folder)
    log, exp = folder / "log.jsonl", folder / "exp"
    cmd.env.update(CHAOS_LOG=str(log), CHAOS_BLOB=str(BLOB))
    seen: dict[str, Any] = {}
    with recorded(case, seen), contextlib.ExitStack() as cleanup:
        cleanup.callback(cmd.kill_all)
        first = start(
            cmd, "launch", str(workflow(folder)), "--workers", "3", "--exp-dir", "exp", out=folder / "launch.txt"
        )
        reached = moment_reached(case, cmd, first.proc.pid, exp, log)
        hit = first.wait_for(reached, poll=0.002 if case.moment in ("checkpoint", "result") else 0.02)
        seen["hit"] = hit
        if hit:
            first.look()
            roles = role_pids(cmd, first.proc.pid)
            if case.target == "job":
                cmd.kill_all()
                seen["killed"] = "all"
            elif roles[case.target]:
                pid = roles[case.target][case.pick % len(roles[case.target])]
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, getattr(signal, case.sig))
                seen["killed"] = pid
            else:
                seen["killed"] = None  # no such process at that moment (no child yet)
        first_status = first.wait_watching()
        seen["first exit"] = first_status
        assert first_status is not None, f"the first run did not end\n{first.said()}"
        leftovers = cmd.leftovers_after_exit(timeout=60)
        assert leftovers == [], f"left running after the first run ended: {leftovers}"
        note(f"first run: exit {first_status}, killed {seen.get('killed')}\n{first.said()[-3000:]}")
        survived = case.target != "job" and (case.target, case.sig) != ("launcher", "SIGKILL")
        if survived or not hit:  # its launcher saw the end (a job's kill is SIGKILL whatever was drawn)
            left = sorted(s for s in first.segments if (Path("/dev/shm") / s).exists())
            assert left == [], f"segments of the first run left in /dev/shm: {left}"

        target = exp
        original: dict[str, str] = {}
        if case.relocate == "copy":
            target = folder / "copy"
            shutil.copytree(exp, target, symlinks=True)
            original = files_of(exp)
        elif case.relocate == "move":
            target = folder / "moved"
            exp.rename(target)
        second = start(cmd, "resume", target.name, out=folder / "resume.txt")
        if case.again is not None:
            earlier = reports(log)
            if second.wait_for(lambda: reports(log) > earlier + case.again, poll=0.02):
                cmd.kill_all()
                seen["resume killed"] = True
            killed_status = second.wait_watching()
            note(f"killed resume: exit {killed_status}\n{second.said()[-3000:]}")
            assert cmd.leftovers_after_exit(timeout=60) == []
            segments = second.segments
            second = start(cmd, "resume", target.name, out=folder / "resume-again.txt")
            second.segments |= segments
        second_status = second.wait_watching()
        seen["resume exit"] = second_status
        note(f"resume: exit {second_status}\n{second.said()[-3000:]}")
        # nothing left: it exits with the last run's status (a worker's idle objective process killed
        # after the last result is a warning, 0: tests/runtime/test_idle_child_killed.py); the promises still hold
        assert second_status == 0 or "emews: nothing to resume" in second.said(), second.said()
        assert cmd.leftovers_after_exit(timeout=60) == []
        left = sorted(s for s in first.segments | second.segments if (Path("/dev/shm") / s).exists())
        assert left == [], f"segments of the first run or the resume left in /dev/shm: {left}"
        check_promises(cmd, target, log, stops=2 if seen.get("resume killed") else 1)
        if case.relocate == "copy":
            assert files_of(exp) == original, "the copy's resume changed the original"


#: a task caught by two stops (the run and its resume killed) that wrote no checkpoint in the second is
#: not run a third time (docs/experiments.md: the tasks that were running are run again once)
GIVEN_UP = "the run stopped 2 times while this task ran; not run again"


def check_promises(
    cmd: EmewsCommand, exp: Path, log: Path, stops: int = 1, rows_of: Callable[[Path], list[dict]] = stored_rows
) -> None:
    """One ok result per point of the budget (``stops`` 2: a task the two stops caught may be given up
    as documented), the same in the store, results.csv and status; no foreign restore. The ids may
    skip one: a task proposed (its id issued) and never recorded before a kill -9 is proposed anew
    under a new id, so that no new point can take an old id's checkpoints. ``rows_of``: the store's
    result rows, as dicts in id order (SQLite's by default)."""
    rows = rows_of(exp)
    ids = [r["id"] for r in rows]  # not always 0..BUDGET-1: an id issued before a kill is never used again
    assert len(ids) == len(set(ids)) == BUDGET, [(r["id"], r["status"]) for r in rows]
    given_up = [r for r in rows if r["status"] == "failed" and r.get("error") == GIVEN_UP] if stops > 1 else []
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) + len(given_up) == BUDGET, [(r["id"], r["status"], r.get("error")) for r in rows]
    with (exp / "results.csv").open() as fh:
        listed = [int(row["id"]) for row in csv.DictReader(fh)]
    assert sorted(listed) == sorted(ids), listed
    foreign = [e for e in events(log) if e["event"] == "foreign"]
    assert foreign == [], foreign
    status = cmd("status", exp.name)
    assert (
        status.returncode == 0
        and f"{BUDGET}/{BUDGET} evaluations: {len(ok)} ok" in status.stdout
        and "not running" in status.stdout
    ), status.stdout + status.stderr


@settings(max_examples=EXAMPLES, phases=[Phase.explicit, Phase.reuse, Phase.generate], database=None)
@given(case=CASES)
def test_a_run_stopped_at_any_moment_resumes_and_keeps_every_promise(case: Case) -> None:
    note(str(case))
    folder = Path(tempfile.mkdtemp(prefix=f"chaos-{uuid.uuid4().hex[:6]}-"))
    stop_and_resume(case, folder)
    shutil.rmtree(folder, ignore_errors=True)  # kept after a failure, to look at
