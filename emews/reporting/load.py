"""Load over time (the CANDLE plot): busy workers against time, with the utilization figures."""

from __future__ import annotations

import numpy as np

from emews.reporting import timeline
from emews.reporting.data import ExperimentData
from emews.reporting.figures import Plot, ReportPlot, new_figure
from emews.reporting.trajectory import time_unit

#: a load curve with more steps than this is drawn as the mean of as many time bins
MAX_STEPS = 4_000


def resample(times: np.ndarray, values: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """The time-weighted mean of a step function over ``bins`` equal bins (edges, means)."""
    edges = np.linspace(times[0], times[-1], bins + 1)
    # the integral of the step function at each edge, by interpolating its running integral
    area = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(times))))
    at_edges = np.interp(edges, times, area)
    return edges, np.diff(at_edges) / np.diff(edges)


class Load(ReportPlot):
    """Busy workers and tasks ready against wall time."""

    name = "load"

    def make(self, data: ExperimentData) -> Plot | None:
        curve = timeline.load(data.results)
        if len(curve.times) < 2:
            return None
        use = timeline.utilization(data.results, data.workers)
        t0 = curve.times[0]
        scale, unit = time_unit(curve.times[-1] - t0)
        times, busy, waiting = curve.times, curve.busy, curve.waiting
        if len(times) > MAX_STEPS:
            times, busy = resample(curve.times, curve.busy, MAX_STEPS)
            _, waiting = resample(curve.times, curve.waiting, MAX_STEPS)
            busy, waiting = np.append(busy, busy[-1]), np.append(waiting, waiting[-1])
        x = (times - t0) / scale
        fig, ax = new_figure()
        ax.fill_between(x, busy, step="post", alpha=0.35, color="#2b8cbe", linewidth=0)
        ax.step(x, busy, where="post", color="#2b8cbe", linewidth=1, label="busy workers")
        ax.step(
            x,
            np.minimum(waiting, data.workers),
            where="post",
            color="#fdae61",
            linewidth=1,
            label="tasks ready, not yet started",
        )
        ax.axhline(data.workers, color="black", linestyle="--", linewidth=1, label=f"workers ({data.workers})")
        for a, _end in timeline.runs(data.results)[1:]:
            ax.axvline((a - t0) / scale, color="grey", linestyle=":", linewidth=1)
        ax.set_ylim(0, data.workers * 1.1 + 0.5)
        ax.set_xlabel(f"wall time since the first submission ({unit})")
        ax.set_ylabel("workers")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_title(
            f"utilization {use.busy:.1%}: idle {use.idle_optimizer:.1%} waiting for the optimizer, "
            f"{use.idle_dispatch:.1%} in dispatch"
        )
        return Plot(
            self.name,
            "Load over time",
            fig,
            "Busy workers against time. Utilization is busy worker-time over workers x the runs' length; "
            "idle time is waiting for the optimizer (no task was ready) or dispatch (a task was ready but "
            "not yet running: on its way to a worker, queued behind another task the worker holds, or "
            "waiting for the worker's process to start). Dotted lines mark where a resumed run began.",
        )
