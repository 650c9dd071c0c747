"""Best-so-far against evaluations and against wall time, every evaluation a point."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.transforms import blended_transform_factory

from emews.reporting.data import ExperimentData
from emews.reporting.figures import RASTER_ABOVE, Plot, ReportPlot, colour, new_figure
from emews.reporting.yrange import mark_clipped, robust

#: at most this many evaluations are drawn as points (a random sample beyond, every improvement kept)
MAX_POINTS = 20_000


def shown(n: int, keep: np.ndarray, seed: int = 0) -> np.ndarray:
    """A mask of ``n`` points: all when few, else ``MAX_POINTS`` at random plus those in ``keep``."""
    if n <= MAX_POINTS:
        return np.ones(n, bool)
    mask = np.zeros(n, bool)
    mask[np.random.default_rng(seed).choice(n, MAX_POINTS, replace=False)] = True
    return mask | keep


def time_unit(seconds: float) -> tuple[float, str]:
    """A divisor and a name that keep a time axis readable."""
    if seconds >= 3 * 3600:
        return 3600.0, "h"
    if seconds >= 3 * 60:
        return 60.0, "min"
    return 1.0, "s"


@dataclass(frozen=True)
class BestSoFar:
    """An experiment's evaluations in the order they finished, and the best objective so far."""

    done: pd.DataFrame  # the results, in that order
    n: np.ndarray  # 1, 2, ...: evaluations finished
    when: np.ndarray  # seconds from the first submission (or start) to each one's end
    values: np.ndarray  # each one's objective in the metric's own sign (not finite: failed)
    best: np.ndarray  # the best objective so far (inf-signed until the first success)


def best_so_far(data: ExperimentData) -> BestSoFar:
    """The evaluations of ``data`` in the order they finished (then by id), the best so far of each."""
    res = data.results
    order = np.lexsort((res["id"].to_numpy(), res["finished"].fillna(np.inf).to_numpy()))
    done = res.iloc[order]
    loss = done["loss"].fillna(np.inf).to_numpy(float)
    sign = data.direction.sign  # losses back to the metric's values
    t0 = float(np.nanmin(res[["submitted", "started"]].to_numpy(float))) if res["started"].notna().any() else 0.0
    return BestSoFar(
        done,
        np.arange(1, len(done) + 1),
        done["finished"].to_numpy(float) - t0,
        loss * sign,
        np.minimum.accumulate(loss) * sign if len(loss) else loss,
    )


class Trajectory(ReportPlot):
    """The best objective so far against wall time."""

    name = "trajectory"

    def make(self, data: ExperimentData) -> Plot | None:
        res = data.results
        if res.empty:
            return None
        curve = best_so_far(data)
        done, n, when, values, best = curve.done, curve.n, curve.when, curve.values, curve.best
        scale, unit = time_unit(float(np.nanmax(when)) if np.isfinite(when).any() else 0.0)
        improved = np.append(True, best[1:] != best[:-1])
        drawn = shown(len(done), improved)
        yrange = robust(values)
        fig, (by_n, by_t) = new_figure(ncols=2, sharey=True)
        yrange.apply(by_n)
        for ax, x, label in (
            (by_n, n, "evaluations (in the order they finished)"),
            (by_t, when / scale, f"wall time since the first submission ({unit})"),
        ):
            ok = np.isfinite(values) & np.isfinite(x) & drawn
            inside = ok & yrange.inside(values)
            ax.scatter(
                x[inside],
                values[inside],
                s=6,
                alpha=0.5,
                color=colour("ok"),
                label="ok",
                rasterized=inside.sum() > RASTER_ABOVE,
            )
            mark_clipped(ax, yrange, x[ok], values[ok])
            finite = np.isfinite(best) & np.isfinite(x)
            ax.step(x[finite], best[finite], where="post", color="black", linewidth=1.5, label="best so far")
            edge = blended_transform_factory(ax.transData, ax.transAxes)
            for status in sorted(set(done["status"]) - {"ok"}):
                failed = (done["status"] == status).to_numpy() & np.isfinite(x)
                mask = failed & drawn
                ax.scatter(
                    x[mask],
                    np.full(mask.sum(), 0.02),
                    transform=edge,
                    marker="x",
                    s=18,
                    color=colour(status),
                    label=f"{status} ({failed.sum()})",
                    clip_on=False,
                    rasterized=mask.sum() > RASTER_ABOVE,
                )
            ax.set_xlabel(label)
            ax.grid(alpha=0.3)
        by_n.set_ylabel(f"{data.metric} ({data.direction})")
        by_n.legend(loc="upper right", fontsize=8)
        fig.suptitle("Search trajectory")
        return Plot(
            self.name,
            "Best so far",
            fig,
            "Each point is one evaluation; the line is the best objective found so far. Failed, crashed "
            "and timed-out evaluations (no objective) are the crosses along the bottom edge"
            + (
                f"; {MAX_POINTS:,} of the {len(done):,} evaluations are drawn (a random sample, and every improvement)."
                if len(done) > MAX_POINTS
                else "."
            )
            + yrange.note(),
        )
