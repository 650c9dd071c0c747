"""Run the objective in a persistent child process that is replaced after a crash.

A segfault, an OOM kill or a hang then costs one task, not the MPI job.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from typing import Callable

from emews.results import Outcome, Status, Task
from emews.runtime.child import ChildConfig, ChildReady, ChildTask
from emews.runtime.objective import ObjectiveRef, TaskContext

#: how often the worker checks for a stop request while a task runs
_POLL_SLICE = 0.05
_STARTUP_TIMEOUT = 300.0
# run through ``-c`` (not ``-m``) so the child's message classes pickle under their real module
_CHILD_MAIN = "import sys; from emews.runtime.child import main; main(sys.argv[1:])"


def _child_environment() -> dict[str, str]:
    """The worker's environment without the MPI process-manager variables (the child is not a rank)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_", "HYDRA_"))}


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        sig = signal.Signals(-returncode)
        hint = {
            signal.SIGSEGV: "segmentation fault",
            signal.SIGKILL: "killed: out of memory or by an outside kill",
            signal.SIGABRT: "aborted",
            signal.SIGBUS: "bus error",
        }.get(sig)
        return f"objective process died of signal {sig.name}" + (f" ({hint})" if hint else "")
    return f"objective process exited with status {returncode}"


class ProcessRunner:
    """Keeps one child process alive and feeds it tasks; restarts it when it dies."""

    def __init__(self, ref: ObjectiveRef, *, timeout: float | None = None,
                 memory_limit: int | None = None, make_context: Callable[[Task], TaskContext]) -> None:
        self._config = ChildConfig(ref, memory_limit)
        self._timeout = timeout
        self._make_context = make_context
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._setup_error: str | None = None

    def start(self) -> None:
        """Children start lazily, on the first task, so a stop before any work is instant."""

    def run(self, task: Task, should_abort: Callable[[], bool]) -> Outcome | None:
        context = self._make_context(task)
        where = dict(rank=context.rank, host=context.host)
        started = time.time()
        if self._conn is None:
            self._spawn()
        if self._setup_error:
            error, self._setup_error = self._setup_error, None
            self._kill()
            return Outcome(task.id, Status.FAILED, error=error, started=started, finished=time.time(), **where)
        assert self._conn is not None
        context.run_dir  # created here so the child can write its output files
        try:
            self._conn.send(ChildTask(task.id, dict(task.params), context))
        except OSError:
            return self._crashed(task, started, where)
        deadline = None if not self._timeout else time.monotonic() + self._timeout
        while not self._conn.poll(_POLL_SLICE):
            if should_abort():
                self._kill()
                return None
            if deadline is not None and time.monotonic() > deadline:
                self._kill()
                return Outcome(task.id, Status.TIMEOUT, error=f"ran past the task timeout of {self._timeout:g} s; "
                               "its process was killed", started=started, finished=time.time(), **where)
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            return self._crashed(task, started, where)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()  # EOF tells the child to run teardown and exit
            self._conn = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._kill()

    def _crashed(self, task: Task, started: float, where: dict) -> Outcome:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            code = self._proc.returncode if self._proc else -9
        self._proc, self._conn = None, None
        return Outcome(task.id, Status.CRASHED, error=describe_exit(code), started=started,
                       finished=time.time(), **where)

    def _spawn(self) -> None:
        parent_end, child_end = socket.socketpair()
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, str(child_end.fileno())],
            pass_fds=(child_end.fileno(),), env=_child_environment(), start_new_session=True)
        child_end.close()
        conn = Connection(parent_end.detach())
        conn.send(self._config)
        if not conn.poll(_STARTUP_TIMEOUT):
            self._proc, self._conn = proc, conn
            self._setup_error = f"objective process did not start within {_STARTUP_TIMEOUT:g} s"
            return
        try:
            ready: ChildReady = conn.recv()
            self._setup_error = ready.setup_error
        except (EOFError, OSError):
            self._setup_error = f"objective process failed to start: {describe_exit(proc.wait())}"
        self._proc, self._conn = proc, conn

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn = None, None
