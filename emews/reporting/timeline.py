"""When the workers were busy: the runs of an experiment, load over time and utilization.

Pure arithmetic on the results frame (numpy), shared by the load plot, the header and
``emews status``. Times are the store's wall-clock seconds.

* A task is *in flight* from its submission (for a task run again after a resume: its new
  start) to its end. The *runs* of an experiment are the stretches in which some task was in
  flight, where a stretch of nothing in flight longer than ``RUN_GAP`` seconds (and ten times
  the median task) separates two runs: the time between a stop and ``emews resume``.
* *Utilization* is busy worker-time over ``workers`` x the runs' length; a multi-rank task
  (``task.ranks``: its ``ranks`` column) is busy on each of its ranks. Its complement, idle
  worker-time, is split at every instant into *dispatch* (a submitted task had not started
  yet: it was on its way to its ranks) and *waiting for the optimizer* (no task was ready).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

#: seconds of nothing in flight that separate two runs of one experiment (at least)
RUN_GAP = 60.0


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
    """The evaluations that ran (a start and an end), with ``ready``: when each was in flight from."""
    ran = results[results["started"].notna() & results["finished"].notna()]
    ready = ran["submitted"].where(ran["submitted"].notna() & (ran["attempt"] == 0), ran["started"])
    return ran.assign(ready=np.minimum(ready.to_numpy(float), ran["started"].to_numpy(float)))


def runs(results: pd.DataFrame) -> list[tuple[float, float]]:
    """The (start, end) of each run of the experiment, in time order."""
    ran = timed(results)
    if ran.empty:
        return []
    order = np.argsort(ran["ready"].to_numpy(), kind="stable")
    lo, hi = ran["ready"].to_numpy()[order], ran["finished"].to_numpy()[order]
    gap = max(RUN_GAP, 10.0 * float(np.median(ran["finished"] - ran["started"])))
    reach = np.maximum.accumulate(hi)  # the latest end among the tasks in flight so far
    breaks = np.flatnonzero(lo[1:] - reach[:-1] > gap) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks - 1, [len(lo) - 1]))
    return [(float(lo[a]), float(reach[b])) for a, b in zip(starts, ends, strict=True)]


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
