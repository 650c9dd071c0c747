"""Run the objective in a persistent child process that is replaced after a crash.

A segfault, an OOM kill or a hang then costs one task, not the MPI job.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Callable

from pathlib import Path

from emews.results import Outcome, Status, Task
from emews.runtime.child import ChildConfig, ChildReady, ChildShutdown, ChildStopped, ChildTask, keep_output
from emews.runtime.objective import ObjectiveRef, TaskContext
from emews.runtime.processes import become_subreaper, descendants, kill_trees, strays

#: how often the worker checks for a stop request while a task runs
_POLL_SLICE = 0.05
_STARTUP_TIMEOUT = 300.0
#: how long the child may take to run ``teardown`` and exit
TEARDOWN_TIMEOUT = 60.0
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


#: children of the runners in this process (several when workers are threads, in tests)
_LIVE_CHILDREN: set[int] = set()


class TeardownFailed(RuntimeError):
    """The objective's ``teardown`` raised, hung, or its process died while stopping."""


class ProcessRunner:
    """Keeps one child process alive and feeds it tasks; restarts it when it dies.

    The child's death is noticed by waiting on the process itself (not only on its
    socket, which a forked grandchild may hold open). This rank is a child
    subreaper, so whatever the objective left behind is found and killed with it.
    """

    def __init__(self, ref: ObjectiveRef, *, timeout: float | None = None,
                 memory_limit: int | None = None, make_context: Callable[[Task], TaskContext],
                 spool: Path | None = None) -> None:
        self._config = ChildConfig(ref, memory_limit, None if spool is None else str(spool))
        self._timeout = timeout
        self._make_context = make_context
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._setup_error: str | None = None
        # a worker rank owns its process; workers that are threads (tests) must not touch
        # the other children of the process they share
        self._owns_process = threading.current_thread() is threading.main_thread()

    def start(self) -> None:
        """Children start lazily, on the first task, so a stop before any work is instant."""
        if self._owns_process:
            become_subreaper()

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
        assert self._conn is not None and self._proc is not None
        try:
            self._conn.send(ChildTask(task.id, dict(task.params), context))
        except OSError:
            return self._crashed(task, context, started, where)
        deadline = None if not self._timeout else time.monotonic() + self._timeout
        while not self._conn.poll(_POLL_SLICE):
            if should_abort():
                self._kill()
                return None
            if self._proc.poll() is not None:
                return self._crashed(task, context, started, where)
            if deadline is not None and time.monotonic() > deadline:
                self._kill()
                self._keep_output(context)
                return Outcome(task.id, Status.TIMEOUT, error=f"ran past the task timeout of {self._timeout:g} s; "
                               "its process was killed", started=started, finished=time.time(), **where)
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            return self._crashed(task, context, started, where)

    def close(self) -> None:
        """Ask the child to run ``teardown`` and exit; kill it (and anything left) if it does not.

        Raises :class:`TeardownFailed` when teardown raised or did not finish in time.
        """
        error = None
        if self._conn is not None and self._proc is not None:
            try:
                self._conn.send(ChildShutdown())
                if self._conn.poll(TEARDOWN_TIMEOUT):
                    stopped: ChildStopped = self._conn.recv()
                    error = stopped.teardown_error
                else:
                    error = f"objective teardown did not finish within {TEARDOWN_TIMEOUT:g} s; killed"
            except (EOFError, OSError):
                error = f"objective process died while stopping: {describe_exit(self._proc.wait())}"
            try:
                self._proc.wait(timeout=TEARDOWN_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        self._kill()
        if error:
            raise TeardownFailed(error)

    def _crashed(self, task: Task, context: TaskContext, started: float, where: dict) -> Outcome:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._kill()
            code = -9
        self._kill()  # whatever it left behind
        self._keep_output(context)
        return Outcome(task.id, Status.CRASHED, error=describe_exit(code), started=started,
                       finished=time.time(), **where)

    def _keep_output(self, context: TaskContext) -> None:
        """What a killed or crashed child wrote for this task goes into the task's run dir."""
        keep_output(self._config.spool, context.runs_root, context.task_id)

    def _spawn(self) -> None:
        parent_end, child_end = socket.socketpair()
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, str(child_end.fileno())],
            pass_fds=(child_end.fileno(),), env=_child_environment(), start_new_session=True)
        child_end.close()
        _LIVE_CHILDREN.add(proc.pid)
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
        """Kill the child and every process below this worker (a subreaper: orphans are ours)."""
        if self._proc is not None:
            _LIVE_CHILDREN.discard(self._proc.pid)
            if self._proc.poll() is None:
                kill_trees(descendants(self._proc.pid))
                self._proc.kill()
                self._proc.wait()
        if self._owns_process:
            kill_trees(strays(os.getpid(), keep=_LIVE_CHILDREN))
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn = None, None
