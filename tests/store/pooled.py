"""What the tests of pooled experiments share (tests/store and tests/site): a workflow of the gated
objective (``tests/objectives/marked.py``: each task marks its start, then waits for the gate file)
on a PostgreSQL store, the command that runs it with the gate and the marks in the test's folder,
the store's rows read while the job may still be making it, and the waits every pool test starts
with: the first pool holding what it can while tasks wait in the queue, and a pool running tasks
(their marks there); and a pool that joins while every result waits at the gate. The store tests' fixtures (``pg_server``, ``schema``, ``stores``) are in
tests/store/conftest.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from emews.store import open_store
from testutil import TESTS, EmewsCommand, wait_until, write_workflow

MARKED = TESTS / "objectives" / "marked.py"


def gated_workflow(folder: Path, url: str | None, evaluations: int, *, store: dict[str, Any] | None = None,
                   **sections: Any) -> Path:
    """The gated objective, inline, ``evaluations`` of them, on the store at ``url`` (``store``:
    more of its keys; ``url`` ``None``: SQLite)."""
    return write_workflow(
        folder, objective={"module": str(MARKED), "function": "run"}, budget={"evaluations": evaluations},
        task={"timeout": 120, "isolation": "inline"},
        **({"store": {"url": url, **(store or {})}} if url else {}), **sections)


def gated_command(folder: Path) -> EmewsCommand:
    """An ``emews`` command whose tasks mark ``folder/marks/<id>`` and wait for ``folder/open``."""
    cmd = EmewsCommand(folder)
    (folder / "marks").mkdir(exist_ok=True)
    cmd.env.update(GATE_FILE=str(folder / "open"), MARK_DIR=str(folder / "marks"))
    return cmd


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


def join_while_gated(folder: Path, url: str, evaluations: int, optimizer: dict[str, Any], *,
                     first_holds: Callable[[Path], object]) -> None:
    """A pool joins while every result waits at the gate: the first pool (1 worker) of a launch of
    :func:`gated_workflow` (``optimizer``, leases of 600 s) runs until ``first_holds(exp)``; a pool
    of 3 workers attaches and each of its workers must start a task while no result is stored; then
    the gate opens and the run ends with every one of its ``evaluations`` results."""
    wf = gated_workflow(folder, url, evaluations, optimizer=optimizer, store={"lease": 600})
    first, second = gated_command(folder), gated_command(folder)
    launch = first.popen("launch", str(wf), "--workers", "1", "--pools", "1", "--exp-dir", "exp")
    exp = folder / "exp"
    try:
        assert wait_until(lambda: first_holds(exp), 180), seen(exp, "SELECT id, state, pool FROM tasks")
        attached = second.popen("attach", "exp", "--workers", "3")
        running = wait_until(lambda: len(running_on(exp, 2)) >= 3, 240)
        stored = rows(exp, "SELECT id, pool FROM results")
        assert running and stored == [], (running_on(exp, 2), stored, seen(exp, "SELECT id, state, pool FROM tasks"))
        (folder / "open").touch()
        _, err = launch.communicate(timeout=300)
        assert launch.returncode == 0, err
        assert attached.wait(timeout=120) == 0
    finally:
        (folder / "open").touch()
        first.kill_all()
        second.kill_all()
    assert [i for (i,) in rows(exp, "SELECT id FROM results ORDER BY id")] == list(range(evaluations))


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
