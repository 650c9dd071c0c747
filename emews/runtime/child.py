"""The isolated child process: imports the objective once, then runs tasks sent over a pipe.

Started by :class:`emews.runtime.isolated.ProcessRunner` through
:class:`emews.processes.channel.ChildProcess`, which calls :func:`serve`.
Its stdout and stderr go to spool files; after a task that wrote something they
are copied into that task's run directory (a task that writes nothing gets no
directory; what a task killed with the whole job wrote is kept at the next start,
:mod:`emews.runtime.spool`). Processes the objective started during a task are killed when the
task ends; those started by ``setup`` live until the child exits.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from emews.core.errors import write_failure
from emews.core.followed_dir import FollowedDir
from emews.core.results import Outcome
from emews.objective.context import TaskContext, exit_if_forked
from emews.objective.function import ObjectiveSpec, outcome_from_exception, outcome_from_return
from emews.objective.worker_context import WorkerContext
from emews.processes.channel import Ready
from emews.processes.oom import prefer_as_victim
from emews.processes.stdio import StandardStreams
from emews.processes.tree import become_subreaper, kill_trees, strays, take_descendants_along
from emews.runtime.spool import OutputNotKept, keep_killed_output, keep_output, mark_task, spool_paths
from emews.training.messages import Reply

if TYPE_CHECKING:
    from emews.processes.channel import ChildProcess
    from emews.runtime.worker import TaskInbox


@dataclass(frozen=True)
class ChildConfig:
    """Sent first: what to load, how to behave, where to spool output."""

    ref: ObjectiveSpec
    memory_limit: int | None = None
    spool: str | None = None
    worker: WorkerContext | None = None  # what the objective's ``setup(ctx)`` gets


@dataclass(frozen=True)
class ChildTask:
    task_id: int
    params: dict
    context: TaskContext


@dataclass(frozen=True)
class ChildPost:
    """A trial message from the objective, for the parent to send on to the optimizer rank."""

    message: object

    def forward(self, inbox: TaskInbox, child: ChildProcess) -> None:
        inbox.post(self.message)


@dataclass(frozen=True)
class ChildTake:
    """The objective waits for (or, without ``block``, looks for) the reply to its session."""

    session: int
    block: bool

    def forward(self, inbox: TaskInbox, child: ChildProcess) -> None:
        child.send(inbox.take(self.session, self.block))


class ChildLink:
    """The objective's :class:`~emews.training.messages.TrialLink` in the child: through the parent."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def post(self, message: object) -> None:
        self._conn.send(ChildPost(message))

    def take(self, session: int, block: bool = True) -> Reply | None:
        self._conn.send(ChildTake(session, block))
        return self._conn.recv()


@dataclass(frozen=True)
class ChildShutdown:
    """Run teardown and exit."""


@dataclass(frozen=True)
class ChildStopped:
    teardown_error: str | None = None


class _Output:
    """The child's stdout and stderr: the spool's files (the job's own without a spool), put back
    after a task that closed or redirected them (:class:`StandardStreams`), so that it does not take
    later tasks' output with it; what the spool cannot keep (a full disk) is said on the job's
    stderr, the first time only."""

    def __init__(self, spool: str | None) -> None:
        self._job = StandardStreams()  # the rank's: the job's output
        self._said = False
        made = spool and self._redirect(spool)
        # the spool held open: a task that ends after ``mv EXP EXP2`` has its output kept from there
        self._spool = FollowedDir(Path(made)) if made else None
        self._streams = StandardStreams()

    @property
    def spool(self) -> str | None:
        """The spool where it is now (``None``: the output goes to the job's)."""
        return None if self._spool is None else str(self._spool.current())

    def _redirect(self, spool: str) -> str | None:
        """Point fd 1 and 2 at the spool's files (first keeping what a killed task left there); the
        spool, or ``None`` when it cannot be made (the output then goes to the job's)."""
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.makedirs(spool, exist_ok=True)
            self._keeping(keep_killed_output, spool)  # an earlier child's task that never ended: a kill -9 of the job
            targets = [
                os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o666) for path in spool_paths(spool)
            ]
        except OSError as exc:
            self.say(f"the objective's output goes to the job's output: {spool}: {write_failure(exc)}")
            return None
        for fd, target in zip((1, 2), targets, strict=True):  # stdout, stderr
            os.dup2(target, fd)
            os.close(target)
        return spool

    def mark(self, task_id: int, team_rank: int) -> None:
        if self.spool:
            mark_task(self.spool, task_id, team_rank)

    def keep(self, runs_root: Path | None, task_id: int, team_rank: int) -> None:
        """Put fd 1 and 2 back, flush what the task printed and move it into the task's run dir."""
        self._streams.restore()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        self._keeping(keep_output, self.spool, runs_root, task_id, team_rank)

    def _keeping(self, keep: Callable[..., object], *args: object) -> None:
        try:
            keep(*args)
        except OutputNotKept as exc:
            self.say(f"what a task printed was not kept: {exc}; the run goes on")

    def say(self, what: str) -> None:
        """One line on the job's stderr, the first time only (a full disk would say it every task)."""
        if not self._said:
            self._said = True
            self._job.say(f"emews: worker pid {os.getpid()}: {what}")


def serve(conn: Connection, config: ChildConfig) -> None:
    """Load the objective, run ``setup``, then run tasks until told to stop (or end-of-file)."""
    become_subreaper()
    take_descendants_along(os.getppid())  # a kill -9 of the worker leaves nothing it started running
    prefer_as_victim()  # out of memory, the OOM killer takes this process, not a rank (the job with it)
    output = _Output(config.spool)
    if config.memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (config.memory_limit, config.memory_limit))
    try:
        objective = config.ref.load()
        objective.setup(config.worker)
        conn.send(Ready())
    except BaseException:  # sys.exit() in setup too: said as its exception, not as the process's exit status
        conn.send(Ready("objective setup failed:\n" + traceback.format_exc()))
        return
    me = os.getpid()
    lifelong = set(strays(me))  # started by setup: they serve every task
    try:
        while True:
            try:
                job = conn.recv()
            except EOFError:
                return
            if isinstance(job, ChildShutdown):
                break
            conn.send(_run(objective, job, config, output, conn))
            kill_trees(strays(me, keep=lifelong))
    finally:
        error = None
        try:
            objective.teardown()
        except BaseException:
            error = "objective teardown failed:\n" + traceback.format_exc()
        kill_trees(strays(me))
        try:
            conn.send(ChildStopped(error))
        except OSError:
            pass


def _run(objective, job: ChildTask, config: ChildConfig, output: _Output, conn: Connection) -> Outcome:
    ctx = replace(job.context, link=ChildLink(conn))  # the worker's context, its trial link through the parent
    where = dict(rank=ctx.rank, host=ctx.host)
    output.mark(job.task_id, ctx.team_rank)
    started = time.time()
    try:
        returned = objective.call(job.params, ctx)
        exit_if_forked(ctx)
        outcome = outcome_from_return(
            job.task_id,
            returned,
            config.ref.metric,
            member=ctx.team_rank > 0,
            started=started,
            finished=time.time(),
            **where,
        )
    except BaseException as exc:  # SystemExit and KeyboardInterrupt are failures too
        exit_if_forked(ctx)
        outcome = outcome_from_exception(job.task_id, exc, started=started, finished=time.time(), **where)
    output.keep(ctx.runs_now, job.task_id, ctx.team_rank)
    return outcome
