"""Run the objective in a persistent child process that is replaced after a crash.

A segfault, an OOM kill or a hang then costs one task, not the MPI job.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emews.core.errors import EmewsError
from emews.core.failure_cause import with_output
from emews.core.followed_dir import FollowedDir
from emews.core.results import Outcome, Status, Task
from emews.objective.context import TaskContext
from emews.objective.function import ObjectiveSpec
from emews.objective.team import Team
from emews.objective.worker_context import WorkerContext
from emews.processes.channel import Aborted, ChildExited, ChildProcess, ReplyTimeout
from emews.processes.oom import OomWatch
from emews.processes.tree import become_subreaper, kill_trees, strays
from emews.runtime.child import ChildConfig, ChildPost, ChildShutdown, ChildStopped, ChildTake, ChildTask
from emews.runtime.setup_bound import setup_bound
from emews.runtime.spool import OutputNotKept, keep_output, output_tail, runs_root_of
from emews.runtime.worker import IdleProcessLost
from emews.training.checkpoints import remove_temps_of, trial_folder
from emews.training.messages import LinkClosed

if TYPE_CHECKING:
    from emews.runtime.worker import TaskInbox

#: how long the child may take to run ``teardown`` and exit
TEARDOWN_TIMEOUT = 60.0


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


class TeardownFailed(EmewsError, RuntimeError):
    """The objective's ``teardown`` raised, hung, or its process died while stopping."""


class ProcessRunner:
    """Keeps one child process alive and feeds it tasks; restarts it when it dies.

    The child's death is noticed by waiting on the process itself (not only on its
    socket, which a forked grandchild may hold open). This rank is a child
    subreaper, so whatever the objective left behind is found and killed with it.
    """

    def __init__(
        self,
        ref: ObjectiveSpec,
        *,
        timeout: float | None = None,
        memory_limit: int | None = None,
        make_context: Callable[..., TaskContext],
        spool: Path | None = None,
        worker: WorkerContext | None = None,
    ) -> None:
        self._config = ChildConfig(ref, memory_limit, None if spool is None else str(spool), worker)
        # the experiment the spool lies in, followed: a child started after ``mv EXP EXP2`` spools there
        self._spool_home = None if spool is None else FollowedDir(runs_root_of(spool).parent)
        self._spool_in_home = None if spool is None else spool.relative_to(runs_root_of(spool).parent)
        self._timeout = timeout
        self._make_context = make_context
        self._child: ChildProcess | None = None
        self._setup_error: str | None = None
        self._setup_status = Status.FAILED  # how the tasks end while _setup_error stands
        # a worker rank owns its process; workers that are threads (tests) must not touch
        # the other children of the process they share
        self._owns_process = threading.current_thread() is threading.main_thread()

    def start(self) -> None:
        """Children start lazily, on the first task, so a stop before any work is instant."""
        if self._owns_process:
            become_subreaper()

    def run(self, task: Task, should_abort: TaskInbox, team: Team | None = None) -> Outcome | None:
        """Run ``task`` in the child; a member of a multi-rank task whose part failed replaces its
        child (its collective state is broken once a peer failed)."""
        outcome = self._run(task, should_abort, team)
        if team is not None and (outcome is None or outcome.status is not Status.OK):
            self._kill()
        return outcome

    def _run(self, task: Task, should_abort: TaskInbox, team: Team | None) -> Outcome | None:
        context = self._make_context(task, team)  # its trial link is the child's (ChildLink)
        where: dict[str, Any] = dict(rank=context.rank, host=context.host)  # Outcome's rank and host
        started = time.time()
        if (death := self._idle_death()) is not None:  # no task of its: this one runs in a new one
            print(
                f"emews: warning: rank {context.rank} ({context.host}): {death} while idle, between tasks;"
                f" no task was running; task {task.id} runs in a new one",
                file=sys.stderr,
                flush=True,
            )
        if self._child is None:
            self._spawn()
        if self._setup_error:
            error, self._setup_error = self._setup_error, None
            status, self._setup_status = self._setup_status, Status.FAILED
            self._kill()
            return Outcome(task.id, status, error=error, started=started, finished=time.time(), **where)
        assert self._child is not None
        oom = OomWatch()  # a SIGKILL of the OOM killer is said as out of memory
        try:
            return self._serve(ChildTask(task.id, dict(task.params), context), should_abort)
        except (Aborted, LinkClosed):
            self._kill()
            return None
        except ReplyTimeout:
            self._kill_mid_task(context)
            self._keep_output(context)
            return Outcome(
                task.id,
                Status.TIMEOUT,
                error=f"ran past the task timeout of {self._timeout:g} s; its process was killed",
                started=started,
                finished=time.time(),
                **where,
            )
        except (ChildExited, OSError):
            return self._crashed(task, context, started, where, oom)

    def _serve(self, job: ChildTask, inbox: TaskInbox) -> Outcome:
        """Send the task; pass the trial messages the objective sends on to the optimizer rank
        (and their replies back) until the outcome comes. The task timeout covers it all."""
        assert self._child is not None
        deadline = None if not self._timeout else time.monotonic() + self._timeout
        message = self._child.request(job, self._timeout or None, inbox)
        while isinstance(message, (ChildPost, ChildTake)):
            message.forward(inbox, self._child)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            message = self._child.receive(left, inbox)
        if not isinstance(message, Outcome):  # the child's own code failed (it says why on its way out)
            raise ChildExited(self._child.wait_exit())
        return message

    def close(self) -> None:
        """Ask the child to run ``teardown`` and exit; kill it (and anything left) if it does not.

        Raises :class:`TeardownFailed` when teardown raised or did not finish in time, and
        :class:`~emews.runtime.worker.IdleProcessLost` when a signal from outside had killed the child
        before it was asked (it lost no work; its ``teardown`` does not run).
        """
        error = None
        if (death := self._idle_death()) is not None:
            raise IdleProcessLost(f"{death} while idle, before the run's end; no task was running")
        if self._child is not None:
            try:
                stopped: ChildStopped = self._child.request(ChildShutdown(), TEARDOWN_TIMEOUT)
                error = stopped.teardown_error
            except ReplyTimeout:
                error = f"objective teardown did not finish within {TEARDOWN_TIMEOUT:g} s; killed"
            except (ChildExited, OSError):
                error = f"objective process died while stopping: {describe_exit(self._child.wait_exit())}"
            self._child.close(TEARDOWN_TIMEOUT)
        self._kill()
        if error:
            raise TeardownFailed(error)

    def _idle_death(self) -> str | None:
        """How the child died, when a signal from outside killed it while it ran no task (it is
        then killed with what it started, :meth:`_kill`); ``None`` when it lives, or none is there."""
        code = None if self._child is None else self._child.returncode
        if code is None or code >= 0:
            return None
        self._kill()
        return describe_exit(code)

    def _crashed(
        self, task: Task, context: TaskContext, started: float, where: dict[str, Any], oom: OomWatch
    ) -> Outcome:
        assert self._child is not None
        code = self._child.wait_exit()
        self._kill_mid_task(context)  # whatever it left behind
        error = describe_exit(code)
        spool = self._spool_now()
        tail = output_tail(spool) if spool else ""
        if tail:  # where a native library says why it ended the process (read before it is moved)
            error = with_output(error, "stderr", tail, errors_only=code < 0)
        self._keep_output(context)
        error = oom.named(error, code)
        return Outcome(task.id, Status.CRASHED, error=error, started=started, finished=time.time(), **where)

    def _kill_mid_task(self, context: TaskContext) -> None:
        """:meth:`_kill` a child that ran the task of ``context``; the temporary file of a checkpoint
        its writer was writing then goes too (the task's next run, or the next task, starts clean)."""
        assert self._child is not None
        pid = self._child.pid
        self._kill()
        root = context.checkpoints_root
        if root is not None:
            remove_temps_of(trial_folder(root, context.task_id), pid)

    def _keep_output(self, context: TaskContext) -> None:
        """What a killed or crashed child wrote for this task goes into the task's run dir."""
        try:
            keep_output(self._spool_now(), context.runs_now, context.task_id, context.team_rank)
        except OutputNotKept as exc:  # a full disk: the task's outcome stands
            print(f"emews: task {context.task_id}: what it printed was not kept: {exc}", file=sys.stderr, flush=True)

    def _spool_now(self) -> str | None:
        """The spool where the experiment is now (``mv EXP EXP2`` while the run goes on)."""
        if self._spool_home is None or self._spool_in_home is None:
            return self._config.spool
        return str(self._spool_home.current() / self._spool_in_home)

    def _spawn(self) -> None:
        self._config = replace(self._config, spool=self._spool_now())
        oom = OomWatch()  # a setup that outgrows the memory (a dataset loaded per worker) is said so
        self._child = child = ChildProcess("emews.runtime.child", self._config)
        _LIVE_CHILDREN.add(child.pid)
        try:
            ready = child.wait_ready(bound := setup_bound(self._timeout))
        except ChildExited as exc:
            failed = f"objective process failed to start: {describe_exit(exc.returncode)}"
            self._setup_error = oom.named(failed, exc.returncode)
            if exc.returncode < 0:  # killed (a signal, the OOM killer) as it started: a crash, retried
                self._setup_status = Status.CRASHED
            return
        if ready is None:  # a setup that hangs: its process goes, and every task fails saying so
            self._kill()
            self._setup_error = f"objective setup did not finish within {bound:g} s (EMEWS_SETUP_TIMEOUT, or the task timeout if longer)"
        else:
            self._setup_error = ready.error

    def _kill(self) -> None:
        """Kill the child and every process below this worker (a subreaper: orphans are ours)."""
        if self._child is not None:
            _LIVE_CHILDREN.discard(self._child.pid)
            self._child.close(0)
        if self._owns_process:
            kill_trees(strays(os.getpid(), keep=_LIVE_CHILDREN))
        self._child = None
