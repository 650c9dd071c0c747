"""A pytest-xdist worker that dies (SIGKILL: no teardown, no ``atexit``) leaves nothing running: the
controller kills what it had started (``tests/worker_cleanup.py``), as the suite's session-scoped
servers (loopback Slurm, PostgreSQL, Chromium) are started: in sessions of their own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from testutil import REPO, wait_until

DYING = """
import os, signal, subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def server():
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)  # as LoopbackSlurm starts its daemons
    Path(os.environ["SERVER_PID_FILE"]).write_text(str(proc.pid))
    yield proc
    proc.kill()


def test_worker_dies(server):
    os.kill(os.getpid(), signal.SIGKILL)  # the worker: no teardown runs
"""


def marked(pid: int, token: str) -> bool:
    """Whether ``pid`` runs and is the process this test's inner run started (its token)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X") and token.encode() in Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError):
        return False


def test_what_a_crashed_worker_started_in_a_session_of_its_own_is_killed_at_the_end(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_dying.py").write_text(DYING)
    token = uuid.uuid4().hex
    pid_file = tmp_path / "server.pid"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH")])),
        "SERVER_PID_FILE": str(pid_file),
        "WORKER_CLEANUP_TEST_TOKEN": token,
    }
    argv = [sys.executable, "-m", "pytest", "-n", "1", "-p", "worker_cleanup", "-p", "no:randomly"]
    proc = subprocess.run(
        [*argv, "-p", "no:cacheprovider", "test_dying.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    pid = int(pid_file.read_text())
    try:
        assert "crashed" in proc.stdout + proc.stderr, proc.stdout + proc.stderr  # the worker did die
        assert wait_until(lambda: not marked(pid, token), 30), (
            f"the server {pid} outlived its dead worker\n{proc.stdout}"
        )
    finally:
        if marked(pid, token):
            os.kill(pid, signal.SIGKILL)
