"""The worker loop: receive a task, run the objective, send the outcome back."""

from __future__ import annotations

import socket
import time
import traceback
from typing import Protocol

from emews.results import Outcome, Status, Task
from emews.runtime.backoff import Backoff
from emews.runtime.transport import Message, Tag, Transport


class Runner(Protocol):
    def start(self) -> None: ...

    def run(self, task: Task, should_abort: "AbortCheck") -> Outcome | None: ...

    def close(self) -> None: ...


class AbortCheck(Protocol):
    def __call__(self) -> bool: ...


class StopWatch:
    """Polls the transport during a task for a STOP; remembers it once seen."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self.stop: Message | None = None

    def __call__(self) -> bool:
        if self.stop is None:
            msg = self._transport.poll()
            if msg is not None and msg.tag is Tag.STOP:
                self.stop = msg
        return self.stop is not None and bool(self.stop.payload)


def worker_loop(transport: Transport, runner: Runner, *, optimizer_rank: int = 0) -> int:
    """Serve tasks until told to stop; return the number of tasks run."""
    backoff = Backoff()
    watch = StopWatch(transport)
    served = 0
    runner.start()
    try:
        while watch.stop is None:
            msg = transport.poll()
            if msg is None:
                backoff.idle()
                continue
            backoff.reset()
            if msg.tag is Tag.STOP:
                break
            outcome = _run_guarded(runner, msg.payload, watch, transport.rank)
            if outcome is None:  # aborted mid-task
                break
            transport.send(outcome, optimizer_rank, Tag.OUTCOME)
            served += 1
    finally:
        runner.close()
        transport.send(served, optimizer_rank, Tag.STOPPED)
    return served


def _run_guarded(runner: Runner, task: Task, watch: StopWatch, rank: int) -> Outcome | None:
    """Run one task; a fault in the runner itself becomes a failed result, not a dead worker."""
    try:
        return runner.run(task, watch)
    except Exception:
        return Outcome(task.id, Status.FAILED, error="worker error:\n" + traceback.format_exc(),
                       rank=rank, host=socket.gethostname(), finished=time.time())
