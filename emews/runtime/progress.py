"""Run statistics kept by the distributor and the live progress line that shows them."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from emews.core.results import Result
from emews.core.wording import noun_for


@dataclass
class Progress:
    """Counters written by the distributor thread only; read by the reporter."""

    budget: int | None  # evaluations (None: only steps or time limit the run)
    workers: int
    done: int = 0
    failed: int = 0
    busy: int = 0
    best: Result | None = None
    started: float = field(default_factory=time.monotonic)

    def record(self, results: Sequence[Result], busy: int) -> None:
        self.busy = busy
        for r in results:
            self.done += 1
            if not r.ok:
                self.failed += 1
            elif self.best is None or r.loss < self.best.loss:
                self.best = r

    def line(self) -> str:
        best = "-" if self.best is None else f"{self.best.objective:.6g}"
        rate = self.done / max(time.monotonic() - self.started, 1e-9)
        done = self.done if self.budget is None else f"{self.done}/{self.budget}"
        return (
            f"{done} evaluations, {self.failed} failed, best {best}, "
            f"{self.busy}/{self.workers} {noun_for(self.workers, 'worker')} busy, {rate:,.{0 if rate >= 10 else 2}f}/s"
        )


class ProgressReporter:
    """Prints ``Progress.line()`` periodically: in place on a terminal, as log lines otherwise."""

    def __init__(self, progress: Progress, stream: TextIO = sys.stderr, interval: float | None = None) -> None:
        self._progress = progress
        self._stream = stream
        self._tty = stream.isatty() or os.environ.get("EMEWS_PROGRESS") == "tty"
        self._interval = interval if interval is not None else (0.5 if self._tty else 10.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="emews-progress", daemon=True)

    def __enter__(self) -> ProgressReporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._print(final=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._print()

    def _print(self, final: bool = False) -> None:
        text = self._progress.line()
        if self._tty:
            self._stream.write("\r\033[K" + text + ("\n" if final else ""))
        else:
            self._stream.write(text + "\n")
        self._stream.flush()
