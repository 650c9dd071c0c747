"""The isolated child process: imports the objective once, then runs tasks sent over a pipe.

Started by :class:`emews.runtime.isolated.ProcessRunner` as
``python -c "...child import main; main(...)" FD`` where FD is its end of a socket pair. Each task's stdout and
stderr go to files in its run directory.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

from emews.results import Outcome, Status
from emews.runtime.objective import ObjectiveRef, TaskContext, outcome_from_return


@dataclass(frozen=True)
class ChildConfig:
    """Sent first: what to load and how to behave."""

    ref: ObjectiveRef
    memory_limit: int | None = None


@dataclass(frozen=True)
class ChildReady:
    setup_error: str | None = None


@dataclass(frozen=True)
class ChildTask:
    task_id: int
    params: dict
    context: TaskContext


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when the worker rank that started it dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _redirect_output(run_dir: os.PathLike[str]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        target = os.open(os.path.join(run_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)


def serve(conn: Connection) -> None:
    config: ChildConfig = conn.recv()
    if config.memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (config.memory_limit, config.memory_limit))
    try:
        objective = config.ref.load()
        objective.setup(None)
        conn.send(ChildReady())
    except Exception:
        conn.send(ChildReady("objective setup failed:\n" + traceback.format_exc()))
        return
    try:
        while True:
            try:
                job: ChildTask = conn.recv()
            except EOFError:
                return
            ctx = job.context
            where = dict(rank=ctx.rank, host=ctx.host)
            _redirect_output(ctx.run_dir)
            started = time.time()
            try:
                returned = objective.call(job.params, ctx)
                outcome = outcome_from_return(job.task_id, returned, config.ref.metric,
                                              started=started, finished=time.time(), **where)
            except BaseException as exc:  # SystemExit and KeyboardInterrupt are failures too
                if isinstance(exc, MemoryError):
                    error = "MemoryError: the objective ran out of memory\n" + traceback.format_exc()
                else:
                    error = traceback.format_exc()
                outcome = Outcome(job.task_id, Status.FAILED, error=error, started=started,
                                  finished=time.time(), **where)
            sys.stdout.flush()
            sys.stderr.flush()
            conn.send(outcome)
    finally:
        objective.teardown()


def main(argv: list[str]) -> None:
    _die_with_parent()
    fd = int(argv[0])
    os.set_inheritable(fd, False)
    serve(Connection(fd))

