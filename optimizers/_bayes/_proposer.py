"""A background thread that owns the surrogate engine while a run is going on.

The main thread (which owns the evaluator) hands it results and a demand ("keep this many
proposals ready"); the thread fits once on everything that arrived since its last fit and
proposes the missing points. It never touches the evaluator, the queues or MPI.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Sequence

from ._engine import Engine


class Proposer:
    def __init__(self, engine: Engine, *, max_ahead: int = 0, min_cycle: float = 0.0) -> None:
        """``max_ahead``: most proposals made beyond the demand, and only after a fit that took
        ``min_cycle`` seconds or more (see :meth:`_ahead`)."""
        self.engine = engine
        self.max_ahead = max_ahead
        self.min_cycle = min_cycle
        self._arrivals: deque[float] = deque(maxlen=64)   # when results came in
        self._cycle = 0.0                                  # seconds the last fit + propose took
        self._cond = threading.Condition()
        self._new_x: list[list[Any]] = []
        self._new_y: list[float] = []
        self._pending: dict[int, list[Any]] = {}   # task id -> skopt point, submitted, untold
        self._buffer: list[list[Any]] = []
        self._demand = 0
        self._busy = False
        self._stop = False
        self.error: BaseException | None = None
        self.busy_time = 0.0
        self._thread = threading.Thread(target=self._loop, name="emews-bayes-model", daemon=True)

    def start(self) -> "Proposer":
        self._thread.start()
        return self

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=60.0)   # a fit in progress is left to finish on its own

    # -- main thread ----------------------------------------------------------------------------
    def take(self, n: int) -> list[list[Any]]:
        """Up to ``n`` ready proposals, without waiting."""
        with self._cond:
            self._raise()
            out, self._buffer = self._buffer[:n], self._buffer[n:]
            self._demand = max(self._demand - len(out), 0)
            return out

    def submitted(self, ids: Sequence[int], xs: Sequence[list[Any]]) -> None:
        with self._cond:
            self._pending.update(zip(ids, xs))

    def tell(self, ids: Sequence[int], xs: Sequence[list[Any] | None], ys: Sequence[float]) -> None:
        with self._cond:
            now = time.monotonic()
            self._arrivals.extend(now for _ in ids)
            for i, x, y in zip(ids, xs, ys):
                self._pending.pop(i, None)
                if x is not None:
                    self._new_x.append(x)
                    self._new_y.append(y)

    def request(self, n: int) -> None:
        """Keep ``n`` proposals ready (beyond those already taken)."""
        with self._cond:
            self._demand = n
            if n > len(self._buffer):
                self._cond.notify_all()

    @property
    def idle(self) -> bool:
        with self._cond:
            return not self._busy and self._demand <= len(self._buffer)

    def wait_ready(self, n: int = 1, timeout: float | None = None) -> None:
        """Block until ``n`` proposals are ready (or the thread failed, or ``timeout``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while len(self._buffer) < n and self.error is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                self._cond.wait(left)
            self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"the bayes model thread failed: {self.error!r}") from self.error

    # -- model thread ---------------------------------------------------------------------------
    def _ahead(self) -> int:
        """Points the main thread will want while the next fit runs (results/s x cycle time).

        Zero when the objective is slow next to the model (each fit then sees every result) or
        the fits are quick (``min_cycle``: a short wait is worth a better-informed model); up
        to ``max_ahead`` when results arrive faster than the model refits. Called locked.
        """
        if self.max_ahead <= 0 or len(self._arrivals) < 2 or self._cycle < self.min_cycle:
            return 0
        span = self._arrivals[-1] - self._arrivals[0]
        rate = (len(self._arrivals) - 1) / span if span > 0 else float("inf")
        return int(min(rate * self._cycle, self.max_ahead))

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._stop and self._demand <= len(self._buffer):
                        self._cond.wait()
                    if self._stop:
                        return
                    new_x, new_y = self._new_x, self._new_y
                    self._new_x, self._new_y = [], []
                    n = self._demand - len(self._buffer) + self._ahead()
                    pending = list(self._pending.values()) + list(self._buffer)
                    self._busy = True
                t0 = time.perf_counter()
                self.engine.tell(new_x, new_y)
                xs = self.engine.propose(n, pending)
                self._cycle = time.perf_counter() - t0
                self.busy_time += self._cycle
                with self._cond:
                    self._buffer.extend(xs)
                    self._busy = False
                    self._cond.notify_all()
        except BaseException as exc:  # reported to the main thread on its next call
            with self._cond:
                self.error = exc
                self._busy = False
                self._cond.notify_all()
