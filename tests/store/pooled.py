"""What the tests of pooled experiments share (tests/store and tests/site): a workflow of the gated
objective (``tests/objectives/gated.py``: each task marks its start, then waits for the gate file)
on a PostgreSQL store, the command that runs it with the gate and the marks in the test's folder
(and the one that runs the training objective with its gate and log there), the store's rows read while the job may still be making it, and the waits every pool test starts
with: the first pool holding what it can while tasks wait in the queue, and a pool running tasks
(their marks there); the run of a launch and the jobs beside it (:func:`pooled_run`: it opens the
gates, waits for the jobs and kills what is left; the launch's job frozen while a second pool takes
its trial over); a pool that joins while every result waits at the gate; and the result a pool's
worker delivers (:func:`ok_result`, for the queue's own tests). The store tests' fixtures (``pg_server``, ``schema``, ``stores``) are in
tests/store/conftest.py."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emews.core.results import Result, Status, Task
from emews.store import open_store
from testutil import GATED, EmewsCommand, events, wait_until, write_workflow


def gated_workflow(folder: Path, url: str | None, evaluations: int, *, store: dict[str, Any] | None = None,
                   task: dict[str, Any] | None = None, **sections: Any) -> Path:
    """The gated objective, inline, ``evaluations`` of them, on the store at ``url`` (``store``:
    more of its keys; ``url`` ``None``: SQLite; ``task``: keys over the task's)."""
    return write_workflow(
        folder, objective={"module": str(GATED), "function": "run"}, budget={"evaluations": evaluations},
        task={"timeout": 120, "isolation": "inline", **(task or {})},
        **({"store": {"url": url, **(store or {})}} if url else {}), **sections)


def gated_command(folder: Path) -> EmewsCommand:
    """An ``emews`` command whose tasks mark ``folder/marks/<id>`` and wait for ``folder/open``."""
    cmd = EmewsCommand(folder)
    (folder / "marks").mkdir(exist_ok=True)
    cmd.env.update(GATE_FILE=str(folder / "open"), MARK_DIR=str(folder / "marks"))
    return cmd


def trainer_command(folder: Path, at: int, gate: str = "open", **env: str) -> EmewsCommand:
    """An ``emews`` command whose training trials (``tests/objectives/trainer.py``) log to
    ``folder/trainer.log`` and wait before step ``at`` for the file ``folder/GATE``; ``env``: more
    of its environment."""
    cmd = EmewsCommand(folder)
    cmd.env.update(TRAINER_GATE_AT=str(at), TRAINER_GATE=str(folder / gate), TRAINER_LOG=str(folder / "trainer.log"),
                   **env)
    return cmd


def ok_result(task: Task, value: float | None = None, *, host: str = "h", started: float = 1.0,
              finished: float = 2.0) -> Result:
    """An OK result of ``task`` from rank 1 on ``host``: objective and loss ``value`` (none: the
    task's ``x``), no metrics."""
    x = float(task.params["x"]) if value is None else value
    return Result(task.id, task.params, Status.OK, x, x, {}, None, 1, host, task.submitted, started, finished)


def trainer_reports(folder: Path, pid: int) -> list[dict]:
    """The reports the trainer process ``pid`` logged to ``folder/trainer.log``, in order."""
    return [e for e in events(folder / "trainer.log") if e["event"] == "report" and e["pid"] == pid]


def rows(exp: Path, sql: str) -> list[tuple]:
    """``sql``'s rows on the experiment's store."""
    with open_store(exp, readonly=True) as store:
        return [tuple(r) for r in store.connection.execute(sql).fetchall()]  # type: ignore[attr-defined]


def seen(exp: Path, sql: str) -> list[tuple]:
    """:func:`rows` while the job may still be making the store: nothing until it is there."""
    try:
        return rows(exp, sql)
    except Exception:  # the experiment's schema or tables are not made yet
        return []


#: the tasks waiting in the shared queue, claimed by no pool
QUEUED = "SELECT id FROM tasks WHERE state = 'queued'"


def wait_for_queued(exp: Path, timeout: float = 120) -> None:
    """Wait until a task waits in ``exp``'s shared queue (the first pool holds what it can)."""
    assert wait_until(lambda: seen(exp, QUEUED), timeout), seen(exp, "SELECT id, state, pool FROM tasks ORDER BY id")


def held_by(exp: Path, pool: int) -> list[int]:
    """The ids of the tasks leased to ``pool``, in order."""
    return [i for (i,) in seen(exp, f"SELECT id FROM tasks WHERE pool = {int(pool)} AND state = 'leased' ORDER BY id")]


def running_on(exp: Path, pool: int) -> list[int]:
    """The tasks ``pool`` holds that a worker runs (their marks, ``exp/../marks/<id>``, are there)."""
    marks = exp.parent / "marks"
    return [i for i in held_by(exp, pool) if (marks / str(i)).exists()]


def stored(exp: Path) -> list[int]:
    """The ids of the results ``exp``'s store holds, in order."""
    return [i for (i,) in rows(exp, "SELECT id FROM results ORDER BY id")]


@dataclass(frozen=True)
class Ended:
    """How a job of a :class:`PooledRun` ended: its exit status and what it printed."""

    returncode: int
    out: str
    err: str


class PooledRun:
    """``emews launch`` of a pooled experiment (``folder/exp``) and the jobs started beside it
    (:meth:`attach`, :meth:`start`), held by gate files in ``folder``: :func:`pooled_run`."""

    def __init__(self, folder: Path, command: EmewsCommand, gates: Sequence[str]) -> None:
        self.folder, self.exp = folder, folder / "exp"
        self.first = command  # the launch's command
        self.commands = [command]
        self.gates = [folder / gate for gate in gates]
        self.jobs: list[subprocess.Popen] = []
        self.ended: dict[subprocess.Popen, Ended] = {}

    @property
    def launch(self) -> subprocess.Popen:
        """The launch's job."""
        return self.jobs[0]

    def start(self, *args: str, command: EmewsCommand | None = None) -> subprocess.Popen:
        """``emews ARGS`` by ``command`` (the launch's if none), a job the run's end waits for."""
        command = command or self.first
        if command not in self.commands:
            self.commands.append(command)
        job = command.popen(*args)
        self.jobs.append(job)
        return job

    def attach(self, workers: int, *options: str, command: EmewsCommand | None = None) -> subprocess.Popen:
        """``emews attach exp --workers N OPTIONS``: a pool, by ``command`` (a new
        :func:`gated_command` if none)."""
        return self.start("attach", "exp", "--workers", str(workers), *options,
                          command=command or gated_command(self.folder))

    def frozen_while_pool_2_trains(self, second: EmewsCommand, until: str, gate: str = "open-1") -> None:
        """The launch's job frozen (SIGSTOP, every process: its leases run out) while a pool of one
        worker attached by ``second`` (a :func:`trainer_command`) takes its trial over, until
        ``until`` (SQL) has rows; then thawed (SIGCONT) and its ``gate`` opened."""
        frozen = set(self.first.processes())
        self.first._signal(frozen, signal.SIGSTOP)
        self.attach(1, command=second)
        assert wait_until(lambda: seen(self.exp, until), 180), events(self.folder / "trainer.log")
        self.first._signal(frozen, signal.SIGCONT)
        (self.folder / gate).touch()

    def open(self) -> None:
        """Open every gate."""
        for gate in self.gates:
            gate.touch()

    def kill(self) -> None:
        """kill -9 of every job now (:meth:`EmewsCommand.kill_all`), each waited for: the run's end
        has none left to wait for."""
        for command in self.commands:
            command.kill_all()
        for job in self.jobs:
            job.wait(timeout=60)

    def finish(self, timeout: float = 300) -> None:
        """Open the gates and wait for each job the test has not waited for (the launch first),
        which must exit 0; what each printed: :attr:`ended`."""
        self.open()
        for job in self.jobs:
            if job.returncode is None:
                out, err = job.communicate(timeout=timeout)
                self.ended[job] = Ended(job.returncode, out, err)
                assert job.returncode == 0, (job.args, job.returncode, err)


@contextmanager
def pooled_run(folder: Path, workflow: Path, workers: int, pools: int = 1, *,
               command: EmewsCommand | None = None, gates: Sequence[str] = ("open",)) -> Iterator[PooledRun]:
    """``emews launch WORKFLOW --workers W --pools P --exp-dir exp`` in ``folder`` by ``command``
    (a :func:`gated_command` if none), its gates (``gates``: files in ``folder``) closed: the body
    holds the run, starts the jobs beside it and makes them wait; at its end the run finishes
    (:meth:`PooledRun.finish`), and, whatever happened, every gate is opened and every process of
    every job is killed (kill -9: none outlives the test), and what the killed jobs left in /dev/shm
    is removed."""
    run = PooledRun(folder, command or gated_command(folder), gates)
    run.start("launch", str(workflow), "--workers", str(workers), "--pools", str(pools), "--exp-dir", "exp")
    try:
        yield run
        run.finish()
    finally:
        run.open()
        for cmd in run.commands:
            cmd.kill_all()
        for cmd in run.commands:
            cmd.remove_killed_segments()


def join_while_gated(folder: Path, url: str, evaluations: int, optimizer: dict[str, Any], *,
                     first_holds: Callable[[Path], object]) -> None:
    """A pool joins while every result waits at the gate: the first pool (1 worker) of a launch of
    :func:`gated_workflow` (``optimizer``, leases of 600 s) runs until ``first_holds(exp)``; a pool
    of 3 workers attaches and each of its workers must start a task while no result is stored; then
    the gate opens and the run ends with every one of its ``evaluations`` results."""
    wf = gated_workflow(folder, url, evaluations, optimizer=optimizer, store={"lease": 600})
    with pooled_run(folder, wf, workers=1) as run:
        exp = run.exp
        assert wait_until(lambda: first_holds(exp), 180), seen(exp, "SELECT id, state, pool FROM tasks")
        run.attach(3)
        running = wait_until(lambda: len(running_on(exp, 2)) >= 3, 240)
        results = rows(exp, "SELECT id, pool FROM results")
        assert running and results == [], (running_on(exp, 2), results, seen(exp, "SELECT id, state, pool FROM tasks"))
    assert stored(exp) == list(range(evaluations))


def rank_zero(cmd: EmewsCommand) -> int | None:
    """The pid of rank 0 of ``cmd``'s MPI job (the process whose environment has ``PMI_RANK=0``)."""
    for pid in cmd.processes():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"PMI_RANK=0" in environ:
            return pid
    return None
