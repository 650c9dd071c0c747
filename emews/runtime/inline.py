"""Run the objective in the worker's own process (cheap objectives; no crash protection)."""

from __future__ import annotations

import signal
import threading
import time
import traceback
from typing import Callable

from emews.results import Outcome, Status, Task
from emews.runtime.objective import LoadedObjective, ObjectiveRef, TaskContext, outcome_from_return


class _TaskTimedOut(BaseException):
    """Raised inside the objective by the timer (a BaseException so user code rarely swallows it)."""


class InlineRunner:
    """Calls the objective directly; a timeout uses SIGALRM when on the main thread."""

    def __init__(self, ref: ObjectiveRef, *, timeout: float | None = None,
                 make_context: Callable[[Task], TaskContext]) -> None:
        self._ref = ref
        self._timeout = timeout
        self._make_context = make_context
        self._objective: LoadedObjective | None = None
        self._setup_error: str | None = None
        self._can_alarm = threading.current_thread() is threading.main_thread()

    def start(self) -> None:
        try:
            self._objective = self._ref.load()
            self._objective.setup(None)
        except Exception:
            self._setup_error = "objective setup failed:\n" + traceback.format_exc()

    def run(self, task: Task, should_abort: Callable[[], bool]) -> Outcome | None:
        context = self._make_context(task)
        where = dict(rank=context.rank, host=context.host)
        started = time.time()
        if self._setup_error or self._objective is None:
            return Outcome(task.id, Status.FAILED, error=self._setup_error, started=started,
                           finished=time.time(), **where)
        try:
            with self._alarm(self._timeout):
                returned = self._objective.call(task.params, context)
        except _TaskTimedOut:
            return Outcome(task.id, Status.TIMEOUT, error=f"ran past the task timeout of {self._timeout:g} s",
                           started=started, finished=time.time(), **where)
        except Exception:
            return Outcome(task.id, Status.FAILED, error=traceback.format_exc(), started=started,
                           finished=time.time(), **where)
        return outcome_from_return(task.id, returned, self._ref.metric, started=started,
                                   finished=time.time(), **where)

    def close(self) -> None:
        if self._objective is not None and self._setup_error is None:
            self._objective.teardown()

    def _alarm(self, seconds: float | None) -> "_Alarm":
        return _Alarm(seconds if self._can_alarm else None)


class _Alarm:
    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        if self.seconds:
            signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc: object) -> None:
        if self.seconds:
            signal.setitimer(signal.ITIMER_REAL, 0)

    @staticmethod
    def _fire(signum: int, frame: object) -> None:
        raise _TaskTimedOut()
