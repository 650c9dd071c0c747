"""When the workers were busy: the runs of an experiment, load over time and utilization.

Pure arithmetic on the results frame (numpy), shared by the load plot, the header and
``emews status``. Times are the store's wall-clock seconds.

* A task is *in flight* from its submission (for a task run again after a resume: its new
  start) to its end. The *runs* of an experiment are the stretches in which some task was in
  flight (:mod:`emews.reporting.runs`, which ``emews status`` reads without frames).
* *Utilization* is busy worker-time over ``workers`` x the runs' length; a multi-rank task
  (``task.ranks``: its ``ranks`` column) is busy on each of its ranks. Its complement, idle
  worker-time, is split at every instant into *dispatch* (a submitted task had not started
  yet: it was on its way to its ranks) and *waiting for the optimizer* (no task was ready).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from emews.reporting import runs as run_spans


@dataclass(frozen=True)
class Utilization:
    """Worker-time of the runs, in seconds and as fractions of ``workers`` x ``elapsed``."""

    workers: int
    elapsed: float  # the runs' total length
    busy_seconds: float
    idle_optimizer_seconds: float
    idle_dispatch_seconds: float

    @property
    def capacity(self) -> float:
        return self.workers * self.elapsed

    @property
    def busy(self) -> float:
        return self.busy_seconds / self.capacity if self.capacity > 0 else 0.0

    @property
    def idle_optimizer(self) -> float:
        return self.idle_optimizer_seconds / self.capacity if self.capacity > 0 else 0.0

    @property
    def idle_dispatch(self) -> float:
        return self.idle_dispatch_seconds / self.capacity if self.capacity > 0 else 0.0


def timed(results: pd.DataFrame) -> pd.DataFrame:
    """The evaluations that ran (a start and an end), with ``ready``: when each was in flight from
    (:func:`~emews.reporting.runs.ready_at`)."""
    ran = results[results["started"].notna() & results["finished"].notna()]
    ready = [
        run_spans.ready_at(None if pd.isna(submitted) else float(submitted), float(started), int(attempt))
        for submitted, started, attempt in zip(ran["submitted"], ran["started"], ran["attempt"], strict=True)
    ]
    return ran.assign(ready=np.array(ready, dtype=float))


def runs(results: pd.DataFrame) -> list[tuple[float, float]]:
    """The (start, end) of each run of the experiment, in time order (:func:`emews.reporting.runs.runs`)."""
    ran = timed(results)
    return run_spans.runs(
        list(zip(ran["ready"].tolist(), ran["started"].tolist(), ran["finished"].tolist(), strict=True))
    )


@dataclass(frozen=True)
class Load:
    """Step functions over time: ``busy[i]`` and ``waiting[i]`` hold from ``times[i]`` to ``times[i+1]``."""

    times: np.ndarray
    busy: np.ndarray  # worker ranks running tasks
    waiting: np.ndarray  # worker ranks the tasks submitted and not started yet need


def ranks(results: pd.DataFrame) -> np.ndarray:
    """The worker ranks each row occupied (1 for a frame without a ``ranks`` column)."""
    if "ranks" not in results.columns:
        return np.ones(len(results))
    return results["ranks"].to_numpy(float)


def load(results: pd.DataFrame) -> Load:
    ran = timed(results)
    queued = ran[ran["ready"] < ran["started"]]
    size, queued_size = ranks(ran), ranks(queued)
    times = np.concatenate((ran["started"], ran["finished"], queued["ready"], queued["started"]))
    busy_step = np.concatenate((size, -size, np.zeros(2 * len(queued))))
    wait_step = np.concatenate((np.zeros(2 * len(ran)), queued_size, -queued_size))
    order = np.argsort(times, kind="stable")
    times, busy_step, wait_step = times[order], busy_step[order], wait_step[order]
    keep = np.append(times[1:] != times[:-1], True) if len(times) else np.zeros(0, bool)  # last of each instant
    return Load(times[keep], np.cumsum(busy_step)[keep], np.cumsum(wait_step)[keep])


def utilization(results: pd.DataFrame, workers: int) -> Utilization:
    spans = runs(results)
    ran = timed(results)
    elapsed = sum(b - a for a, b in spans)
    busy = float(((ran["finished"] - ran["started"]).clip(lower=0) * ranks(ran)).sum())
    curve = load(results)
    if len(curve.times) < 2:
        return Utilization(workers, elapsed, busy, 0.0, 0.0)
    dt = np.diff(curve.times)
    mid = curve.times[:-1] + dt / 2
    inside = np.zeros(len(dt), bool)
    for a, b in spans:
        inside |= (mid >= a) & (mid <= b)
    idle = np.clip(workers - curve.busy[:-1], 0, None)
    dispatch = np.minimum(idle, curve.waiting[:-1])
    idle_dispatch = float(np.sum((dispatch * dt)[inside]))
    idle_total = max(workers * elapsed - busy, 0.0)
    return Utilization(workers, elapsed, busy, max(idle_total - idle_dispatch, 0.0), idle_dispatch)
