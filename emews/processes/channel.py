"""One way to run a Python child process that talks to its parent: spawn, handshake, request/reply, kill.

Serves the isolated objective child (:mod:`emews.runtime.child`) and the model processes of
``bayes`` (``emews.optimizers._bayes._server``) and the wide GA
(``emews.optimizers._ga.breeding_process``); any later helper process (a report channel, say)
should use it too. The parent side is :class:`ChildProcess`; the child side is :func:`child_main`,
which the parent runs as ``python -c ... MODULE PARENT_PID FD`` and which hands the connection
and the config to ``MODULE.serve(conn, config)``. A child that answers requests one by one
serves them with :func:`serve_requests`.

The child is a plain ``subprocess`` (no ``fork`` of an MPI rank, no re-import of the user's
``__main__`` as with ``multiprocessing``'s spawn), started in a session of its own, with the
MPI process-manager variables removed (it is not a rank). It dies with its parent
(parent-death signal, armed before anything slow and checked against the race where the
parent died first) and leaves stop signals (SIGTERM, SIGINT) to its parent. Messages are
pickled over one socket pair. Its death is noticed by waiting on the process itself, not only
on end-of-file: a grandchild it forked may hold its end of the socket open.
"""

from __future__ import annotations

import importlib
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from emews.core.errors import EmewsError
from emews.processes.environ import PROCESS_MANAGER_PREFIXES, scrubbed_environ
from emews.processes.tree import descendants, die_with, kill_trees

#: how often a waiting parent checks whether the child died or it should stop waiting
POLL_SLICE = 0.05
#: how long the parent waits for a child that closed its socket to exit, before killing it
EXIT_GRACE = 5.0
# run through ``-c`` (not ``-m``) so the classes of the child's module pickle under their real module
_BOOT = "import sys; from emews.processes.channel import child_main; child_main(sys.argv[1:])"


@dataclass(frozen=True)
class Ready:
    """The child's first message: it is ready to serve, or could not start (``error`` says why)."""

    error: str | None = None


class ChildExited(EmewsError, EOFError):
    """The child process is gone (an ``EOFError``, as for a closed connection)."""

    def __init__(self, returncode: int) -> None:
        super().__init__(f"the child process exited with status {returncode}")
        self.returncode = returncode


class ReplyTimeout(EmewsError):
    """No message from the child within the time given."""


class Aborted(EmewsError):
    """``should_abort`` said to stop waiting."""


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the MPI process-manager variables, plus ``extra``."""
    env = scrubbed_environ(os.environ, PROCESS_MANAGER_PREFIXES)
    env.update(extra or {})
    return env


class ChildProcess:
    """A Python child running ``module.serve(conn, config)``; ``config`` is sent at once.

    Starting does not wait for the child: see :meth:`wait_ready`. Raises ``OSError`` when
    the process cannot be started.
    """

    def __init__(self, module: str, config: Any = None, *, env: Mapping[str, str] | None = None) -> None:
        parent_end, child_end = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, module, str(os.getpid()), str(child_end.fileno())],
                pass_fds=(child_end.fileno(),),
                stdin=subprocess.DEVNULL,
                env=child_environment(env),
                start_new_session=True,
            )
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()
        self._conn = Connection(parent_end.detach())
        self.pid = self._proc.pid
        self._conn.send(config)

    @property
    def returncode(self) -> int | None:
        """The exit status once the child has exited (negative: killed by that signal), else ``None``."""
        return self._proc.poll()

    def send(self, message: Any) -> None:
        """Raises ``OSError`` when the child is gone."""
        self._conn.send(message)

    def receive(self, timeout: float | None = None, should_abort: Callable[[], bool] | None = None) -> Any:
        """The child's next message.

        Raises :class:`ChildExited` when the child died (seen on the process, even while a
        grandchild keeps the socket open), :class:`Aborted` as soon as ``should_abort()`` is
        true (checked first) and :class:`ReplyTimeout` after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SLICE if deadline is None else min(POLL_SLICE, max(0.0, deadline - time.monotonic()))
            if self._conn.poll(left):
                break
            if should_abort is not None and should_abort():
                raise Aborted()
            if self._proc.poll() is not None and not self._conn.poll(0):
                raise ChildExited(self._proc.returncode)
            if deadline is not None and time.monotonic() >= deadline:
                raise ReplyTimeout()
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            raise ChildExited(self.wait_exit()) from None

    def request(
        self, message: Any, timeout: float | None = None, should_abort: Callable[[], bool] | None = None
    ) -> Any:
        """Send ``message`` and return the reply; raises as :meth:`send` and :meth:`receive`."""
        self.send(message)
        return self.receive(timeout, should_abort)

    def wait_ready(self, timeout: float | None = 0.0) -> Ready | None:
        """The child's :class:`Ready` message, or ``None`` when it has not come within ``timeout``
        (0: never blocks). Raises :class:`ChildExited` when the child died during start-up."""
        try:
            ready = self.receive(timeout)
        except ReplyTimeout:
            return None
        except OSError:
            raise ChildExited(self.wait_exit()) from None
        if not isinstance(ready, Ready):
            return Ready(f"the child's first message was {ready!r}, not Ready")
        return ready

    def wait_exit(self, timeout: float = EXIT_GRACE) -> int:
        """Wait up to ``timeout`` for the child to exit (killing it after that); its exit status."""
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self._proc.wait()

    def close(self, timeout: float = EXIT_GRACE) -> None:
        """Close the connection (a child reading it gets end-of-file), give the child up to
        ``timeout`` to exit, then kill it and everything below it."""
        self._conn.close()
        try:
            self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        self.kill()

    def kill(self) -> None:
        """Kill the child and every process below it now; the connection stays as it is."""
        if self._proc.poll() is None:
            kill_trees(descendants(self._proc.pid))
            self._proc.kill()
            self._proc.wait()


def serve_requests(conn: Connection, setup: Callable[[], Mapping[str, Callable[..., Any]]]) -> int:
    """The child side of a request/reply channel: ``setup()`` (the slow imports, the state) gives
    the handler of each request kind; the child says :class:`Ready` (or why it could not start,
    returning 1), then answers each ``(kind, *args)`` with ``("ok", handlers[kind](*args))`` or
    ``("error", traceback text)`` until the parent closes the connection or is gone."""
    try:
        handlers = setup()
    except BaseException:
        conn.send(Ready(traceback.format_exc(limit=3)))
        return 1
    conn.send(Ready())
    while True:
        try:
            kind, *args = conn.recv()
        except (EOFError, OSError):  # the parent is done (or gone)
            conn.close()
            os._exit(0)  # nothing to clean up; finalizing scipy and friends takes 0.2 s
        try:
            handler = handlers.get(kind)
            if handler is None:
                raise ValueError(f"unknown request {kind!r}, not one of {sorted(handlers)}")
            reply = handler(*args)
        except Exception:
            conn.send(("error", traceback.format_exc()))
            continue
        conn.send(("ok", reply))


def _leave_stop_signals_to_the_parent() -> None:
    """A batch system's SIGTERM reaches every process of the job: the parent decides what
    happens to its child (a do-nothing handler, not SIG_IGN, so programs the child starts
    with exec still get the default behaviour). The batch system's early warning, SIGUSR1, is
    ignored, by them too (:attr:`emews.runtime.interrupt.Interrupt.warning`)."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: None)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def child_main(argv: list[str]) -> None:
    """The child's side: ``MODULE PARENT_PID FD``. Dies with the parent, receives the config,
    then runs ``MODULE.serve(conn, config)``; its return value is the exit status."""
    module, parent_pid, fd = argv[0], int(argv[1]), int(argv[2])
    die_with(parent_pid)
    _leave_stop_signals_to_the_parent()
    os.set_inheritable(fd, False)
    conn = Connection(fd)
    try:
        config = conn.recv()
    except (EOFError, OSError):
        sys.exit(1)  # the parent gave up before sending it
    try:
        status = importlib.import_module(module).serve(conn, config)
    except (BrokenPipeError, ConnectionResetError):
        os._exit(0)  # the parent closed the connection (the run ended first): nothing to say
    sys.exit(status)
