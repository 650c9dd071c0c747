"""The worker loop: receive a task, run the objective, send the outcome back."""

from __future__ import annotations

import socket
from collections import deque
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


class Inbox:
    """The worker's view of its messages; polled during a task to notice an abort.

    Tasks that arrive while one runs (prefetched) are kept, in order, for later.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        self._held: deque[Message] = deque()
        self.stop: Message | None = None

    def next(self) -> Message | None:
        if self._held:
            return self._held.popleft()
        if self.stop is not None:
            return self.stop
        return self._transport.poll()

    def __call__(self) -> bool:
        """Whether the running task must be abandoned (an abort arrived)."""
        if self.stop is None:
            msg = self._transport.poll()
            if msg is not None:
                if msg.tag is Tag.STOP:
                    self.stop = msg
                else:
                    self._held.append(msg)
        return self.stop is not None and bool(self.stop.payload)


#: outcomes of short tasks run back to back travel together, but none waits longer than this
OUTCOME_BATCH_SECONDS = 100e-6


def worker_loop(transport: Transport, runner: Runner, *, optimizer_rank: int = 0) -> int:
    """Serve tasks until told to stop; return the number of tasks run.

    Tasks handed over ahead of time (prefetch) wait in a local queue. An
    outcome is sent as soon as its task ends, unless more queued tasks follow
    at once: then outcomes are sent together, at least every
    ``OUTCOME_BATCH_SECONDS``, so short tasks cost the optimizer rank fewer messages.
    """
    backoff = Backoff()
    inbox = Inbox(transport)
    queued: deque[Task] = deque()
    unsent: list[Outcome] = []
    oldest = 0.0
    served = 0
    runner.start()
    try:
        while True:
            if queued:
                outcome = _run_guarded(runner, queued.popleft(), inbox, transport.rank)
                if outcome is None:  # aborted mid-task
                    break
                if not unsent:
                    oldest = time.perf_counter()
                unsent.append(outcome)
                served += 1
                if not queued or time.perf_counter() - oldest >= OUTCOME_BATCH_SECONDS:
                    transport.send(unsent, optimizer_rank, Tag.OUTCOME)
                    unsent = []
                continue
            msg = inbox.next()
            if msg is None:
                backoff.idle()
                continue
            backoff.reset()
            if msg.tag is Tag.STOP:
                break
            queued.extend(msg.payload)
    finally:
        runner.close()
        transport.send(served, optimizer_rank, Tag.STOPPED)
    return served


def _run_guarded(runner: Runner, task: Task, inbox: Inbox, rank: int) -> Outcome | None:
    """Run one task; a fault in the runner itself becomes a failed result, not a dead worker."""
    try:
        return runner.run(task, inbox)
    except Exception:
        return Outcome(task.id, Status.FAILED, error="worker error:\n" + traceback.format_exc(),
                       rank=rank, host=socket.gethostname(), finished=time.time())
