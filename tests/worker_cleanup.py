"""What an xdist worker that died leaves running is killed by the controller (a pytest plugin).

A worker killed outright (SIGKILL, a crash) runs no fixture teardown and no ``atexit``: its
session-scoped servers (the loopback Slurm's daemons, PostgreSQL, Chromium, jobs it had started in
sessions of their own) ran on for good, slowing every later test and run on the machine. So every
process a test process starts carries ``EMEWS_TEST_OWNER=RUN:PID`` in its environment (``RUN``: this
pytest run, ``PID``: the test process, a worker or the only one), set in ``os.environ`` before any
test runs and inherited by what it starts, sessions of their own and daemons included. When the
workers are gone, the controller SIGKILLs every process of its run whose owner no longer runs; a
worker that ended well had torn its things down already, and another run's processes carry
another ``RUN``.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

#: the run's id (set by the controller, inherited by its workers)
RUN_VARIABLE = "EMEWS_TEST_RUN"
#: ``RUN:PID`` of the test process that started a process (inherited by everything it starts)
OWNER_VARIABLE = "EMEWS_TEST_OWNER"


def pytest_configure(config: pytest.Config) -> None:
    """The run's id (controller, or a run without workers), then this test process's mark."""
    if not hasattr(config, "workerinput"):
        os.environ[RUN_VARIABLE] = uuid.uuid4().hex
    os.environ[OWNER_VARIABLE] = f"{os.environ.get(RUN_VARIABLE, '')}:{os.getpid()}"


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> Iterator[None]:
    """In the controller, after xdist has stopped its workers: kill what dead workers left."""
    yield
    if hasattr(session.config, "workerinput") or not os.environ.get(RUN_VARIABLE):
        return
    orphans = [pid for pid in orphans_of_dead_owners(os.environ[RUN_VARIABLE]) if kill_if_orphan(pid)]
    if orphans:
        print(f"\nkilled {len(orphans)} processes that crashed test workers left running: {sorted(orphans)}")


def orphans_of_dead_owners(run: str) -> list[int]:
    """Live processes marked as started by a test process of ``run`` that is no longer running."""
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and int(entry.name) != os.getpid() and _orphan_of(int(entry.name), run)
    ]


def kill_if_orphan(pid: int) -> bool:
    """SIGKILL ``pid`` if it is still an orphan of this run: checked through a pidfd, so that a pid
    given to another process since it was found is never signalled. Whether it was killed."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # ended meanwhile
        return False
    try:
        if not _orphan_of(pid, os.environ[RUN_VARIABLE]):  # the pidfd's process, now pinned
            return False
        for signum in (signal.SIGCONT, signal.SIGKILL):  # a stopped one too
            signal.pidfd_send_signal(pidfd, signum)
        return True
    except OSError:
        return False
    finally:
        os.close(pidfd)


def owner_of(pid: int) -> str | None:
    """``pid``'s mark (``RUN:PID`` of the test process that started it), ``None``: none, or gone."""
    prefix = f"{OWNER_VARIABLE}=".encode()
    try:
        environ = (Path(f"/proc/{pid}") / "environ").read_bytes()
    except OSError:
        return None
    return next((v[len(prefix) :].decode(errors="replace") for v in environ.split(b"\0") if v.startswith(prefix)), None)


def _orphan_of(pid: int, run: str) -> bool:
    """Whether ``pid`` runs and carries ``run``'s mark of a test process that no longer runs."""
    owner = owner_of(pid)
    if owner is None or not owner.startswith(f"{run}:"):
        return False
    test_process = owner[len(run) + 1 :]
    return test_process.isdigit() and not _running(int(test_process)) and _running(pid)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X", "x")
