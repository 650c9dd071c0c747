"""Run statistics kept by the distributor and the live progress line that shows them."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from emews.core.replicates import point_label
from emews.core.results import Result
from emews.core.wording import noun_for, rate_text


@dataclass
class Progress:
    """Counters written by the distributor thread only; read by the reporter."""

    budget: int | None  # evaluations (None: only steps or time limit the run)
    workers: int
    done: int = 0
    failed: int = 0
    busy: int = 0  # workers busy; of a pooled run (``pooled``): its tasks queued or running in the pools
    best: Result | None = None
    started: float = field(default_factory=time.monotonic)
    #: each point runs this many times (``replicates: N``): the best is then a point's mean
    replicates: int = 1
    #: the run's tasks go through the shared queue to pools (this job's workers are one pool of
    #: several, or none): the line counts the tasks out in the pools, not workers
    pooled: bool = False
    #: of a pooled run: how many of its tasks are out in the pools now (read at each line)
    out_in_pools: Callable[[], int] | None = None
    #: of a resumed run: the evaluations of earlier runs in ``done``, which this run's rate leaves out
    earlier: int = 0
    #: of an ensemble: per point, the sums of its successful replicates' losses and objectives, and their count
    #: (each entry is replaced whole, so the reporter thread never reads one half-updated)
    _points: dict[str, tuple[float, float, int]] = field(default_factory=dict)

    def record(self, results: Sequence[Result], busy: int) -> None:
        self.busy = busy
        for r in results:
            self.done += 1
            if not r.ok:
                self.failed += 1
                continue
            if self.best is None or r.loss < self.best.loss:
                self.best = r
            if self.replicates > 1 and r.objective is not None:
                label = point_label(r.params)
                loss, objective, count = self._points.get(label, (0.0, 0.0, 0))
                self._points[label] = (loss + r.loss, objective + r.objective, count + 1)

    def best_objective(self) -> float | None:
        """The best evaluation's objective; of an ensemble, the best point's mean (as the optimizer
        sees it, and ``emews status`` shows it)."""
        if self.replicates > 1:
            sums = list(self._points.values())  # the distributor thread adds to it meanwhile
            best = min(sums, key=lambda s: s[0] / s[2], default=None)
            return None if best is None else best[1] / best[2]
        return None if self.best is None else self.best.objective

    def line(self) -> str:
        objective = self.best_objective()
        best = "-" if objective is None else f"{objective:.6g}"
        rate = (self.done - self.earlier) / max(time.monotonic() - self.started, 1e-9)
        done = self.done if self.budget is None else f"{self.done}/{self.budget}"
        out = self.busy if self.out_in_pools is None else self.out_in_pools()
        busy = (
            f"{out} {noun_for(out, 'task')} queued or running in the pools"
            if self.pooled
            else f"{self.busy}/{self.workers} {noun_for(self.workers, 'worker')} busy"
        )
        return f"{done} evaluations, {self.failed} failed, best {best}, {busy}, {rate_text(rate)}/s"


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
