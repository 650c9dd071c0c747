"""Run the objective in the worker's own process (cheap objectives; no crash protection).

Forks: a process the objective starts (``subprocess``, ``multiprocessing``,
``os.fork``) is killed when its task ends, as with process isolation; a forked copy of
the worker that returns from ``run`` exits at once instead of acting as the worker.
``memory_limit`` needs process isolation (the whole rank would be limited).
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from emews.core.results import Outcome, Status, Task
from emews.objective.context import TaskContext, exit_if_forked
from emews.objective.function import Objective, ObjectiveSpec, outcome_from_exception, outcome_from_return
from emews.objective.team import Team
from emews.objective.worker_context import WorkerContext
from emews.processes.stdio import StandardStreams
from emews.processes.tree import become_subreaper, has_children, kill_trees, strays
from emews.runtime.interrupt import Interrupt, Interrupted
from emews.runtime.setup_bound import setup_bound
from emews.training.messages import LinkClosed

if TYPE_CHECKING:
    from emews.runtime.worker import TaskInbox

#: longest timer ``setitimer`` is given; a longer timeout (or ``inf``) means no timer at all
MAX_ALARM_SECONDS = 1e8
#: what is left of a timer put back after its time ran out: it fires at once
MIN_ALARM_SECONDS = 1e-6
#: how long ``teardown`` may run before the worker gives up on it
TEARDOWN_TIMEOUT = 60.0


class _TaskTimedOut(BaseException):
    """Raised inside the objective by the timer (a BaseException so user code rarely swallows it)."""


class InlineRunner:
    """Calls the objective directly; a timeout uses SIGALRM when on the main thread.

    A member of a multi-rank task gets ``ctx.comm``, a communicator of the team's ranks only,
    from ``team_comm`` (freed when the task ends); a team's members cannot be cancelled here (a
    fault of one member is not isolated either: use process isolation for that), and one blocked in
    ``ctx.comm`` not even by the timer: the optimizer rank ends the job (``teams.TeamStranded``).
    """

    def __init__(
        self,
        ref: ObjectiveSpec,
        *,
        timeout: float | None = None,
        make_context: Callable[..., TaskContext],
        interrupt: Interrupt | None = None,
        team_comm: Callable[[Team | None], Any] | None = None,
        worker: WorkerContext | None = None,
    ) -> None:
        self._ref = ref
        self._worker = worker  # what the objective's ``setup(ctx)`` gets
        self._team_comm = team_comm
        self._timeout = timeout
        self._interrupt = interrupt or Interrupt()
        self._lifelong: set[int] = set()
        self._make_context = make_context
        self._objective: Objective | None = None
        self._setup_error: str | None = None
        self._can_alarm = threading.current_thread() is threading.main_thread()
        self._streams: StandardStreams | None = None  # the rank's stdout and stderr, when it owns its process

    def start(self) -> None:
        if self._can_alarm:
            become_subreaper()  # what an objective's process leaves orphaned stays ours to kill
            self._streams = StandardStreams()  # a task that closes fd 1 or 2 closes them for itself only
        bound = setup_bound(self._timeout)
        try:
            with self._alarm(bound):
                self._objective = self._ref.load()
                self._objective.setup(self._worker)
        except _TaskTimedOut:
            self._setup_error = f"objective setup did not finish within {bound:g} s (EMEWS_SETUP_TIMEOUT, or the task timeout if longer)"
        except BaseException:  # sys.exit() too: it would end the worker, and the job with it
            self._setup_error = "objective setup failed:\n" + traceback.format_exc()
        self._lifelong = set(strays(os.getpid())) if self._can_alarm else set()  # started by setup

    def run(self, task: Task, should_abort: TaskInbox, team: Team | None = None) -> Outcome | None:
        """Run ``task``; the context gets ``should_abort`` as its trial link and, in a multi-rank
        run, ``ctx.comm``: the team's communicator while it runs (``COMM_SELF`` for a single-rank
        task, so the same code runs at any size; a team's is freed when the task ends)."""
        self._interrupt.defer = lambda: should_abort.reported  # a stop signal pauses a training trial
        comm = None if self._team_comm is None else self._team_comm(team)
        try:
            return self._run(task, self._make_context(task, team, link=should_abort, comm=comm))
        finally:
            if team is not None and comm is not None:
                comm.Free()

    def _run(self, task: Task, context: TaskContext) -> Outcome | None:
        where: dict[str, Any] = dict(rank=context.rank, host=context.host)  # Outcome's rank and host
        started = time.time()
        if self._setup_error or self._objective is None:
            return Outcome(
                task.id, Status.FAILED, error=self._setup_error, started=started, finished=time.time(), **where
            )
        try:
            try:
                with self._interrupt.raising(), self._alarm(self._timeout):
                    returned = self._objective.call(task.params, context)
            finally:
                exit_if_forked(context)
                self._kill_strays(self._lifelong)
                if self._streams is not None:
                    self._streams.restore()
        except (Interrupted, LinkClosed):
            return None  # stopping: the task stays unfinished and is run again on resume
        except _TaskTimedOut:
            return Outcome(
                task.id,
                Status.TIMEOUT,
                error=f"ran past the task timeout of {self._timeout:g} s",
                started=started,
                finished=time.time(),
                **where,
            )
        except BaseException as exc:  # sys.exit() and KeyboardInterrupt of the objective's own too (argparse
            # exits on bad arguments): a failed result, not a dead worker (stop signals raise Interrupted)
            return outcome_from_exception(task.id, exc, started=started, finished=time.time(), **where)
        return outcome_from_return(
            task.id,
            returned,
            self._ref.metric,
            member=context.team_rank > 0,
            started=started,
            finished=time.time(),
            **where,
        )

    def close(self) -> None:
        """Run ``teardown`` (bounded by a timer on the main thread), then kill what is left."""
        try:
            if self._objective is not None and self._setup_error is None:
                try:
                    with self._alarm(TEARDOWN_TIMEOUT):
                        self._objective.teardown()
                except _TaskTimedOut:
                    raise RuntimeError(f"objective teardown did not finish within {TEARDOWN_TIMEOUT:g} s") from None
        finally:
            self._kill_strays(())

    def _kill_strays(self, keep: set[int] | tuple[()]) -> None:
        """Kill the processes the objective left running (only when this rank owns its process:
        workers that are threads, in tests, share theirs)."""
        if self._can_alarm and has_children():
            kill_trees(strays(os.getpid(), keep=keep))

    def _alarm(self, seconds: float | None) -> _Alarm:
        usable = self._can_alarm and seconds is not None and seconds < MAX_ALARM_SECONDS
        return _Alarm(seconds if usable else None)


class _Alarm:
    """The task's timer: ``seconds`` after entry (``None``: no timer) SIGALRM raises
    :class:`_TaskTimedOut`; on exit the SIGALRM handler and the ``ITIMER_REAL`` timer found on entry
    are back (an objective's own, set by its ``setup``), that timer less the time spent inside
    (one that ran out meanwhile fires at once)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._handler: Any = None
        self._timer: tuple[float, float] = (0.0, 0.0)
        self._entered = 0.0

    def __enter__(self) -> None:
        if self.seconds:
            self._handler = signal.signal(signal.SIGALRM, self._fire)
            self._entered = time.monotonic()
            self._timer = signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc: object) -> None:
        if not self.seconds:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        if self._handler is not None:  # None: one not installed from Python, which cannot be put back
            signal.signal(signal.SIGALRM, self._handler)
        delay, interval = self._timer
        if delay > 0:
            left = delay - (time.monotonic() - self._entered)
            signal.setitimer(signal.ITIMER_REAL, max(left, MIN_ALARM_SECONDS), interval)

    @staticmethod
    def _fire(signum: int, frame: object) -> None:
        raise _TaskTimedOut()
