"""A timeline per worker (Gantt chart): each task a bar from its start to its end, coloured by status.

A multi-rank task (``task.ranks``) is drawn hatched on every rank its team held (the store's
``team_ranks``); a store written before teams were recorded names only the team's rank 0, where
such a task is drawn alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch

from emews.core.wording import counted
from emews.reporting import timeline
from emews.reporting.data import ExperimentData
from emews.reporting.figures import RASTER_ABOVE, WIDTH_PX, Plot, ReportPlot, colour, new_figure
from emews.reporting.trajectory import time_unit

#: the narrowest bar drawn, in pixels of the image: a shorter evaluation is widened to it (5: the axes
#: span ~0.9 of the image, so such a bar keeps at least 3 pixels of full colour after antialiasing)
MIN_BAR_PX = 5


def merged_bars(
    rank: np.ndarray, start: np.ndarray, end: np.ndarray, status: np.ndarray, resolution: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Back-to-back bars of one worker and one status, less than ``resolution`` apart, as one bar
    (what a screen pixel shows anyway): (rank, start, end, status) of the bars to draw. Not empty."""
    order = np.lexsort((start, rank))
    rank, start, end, status = rank[order], start[order], end[order], status[order]
    new = np.ones(len(rank), bool)
    new[1:] = (rank[1:] != rank[:-1]) | (status[1:] != status[:-1]) | (start[1:] - end[:-1] > resolution)
    first = np.flatnonzero(new)
    return rank[first], start[first], np.maximum.reduceat(end, first), status[first]


class Gantt(ReportPlot):
    """A timeline per worker: each task a bar from its start to its end."""

    name = "gantt"

    def make(self, data: ExperimentData) -> Plot | None:
        ran = timeline.timed(data.results)
        ran = ran[ran["rank"].notna()]
        if ran.empty:
            return None
        t0 = float(ran["ready"].min())
        scale, unit = time_unit(float(ran["finished"].max()) - t0)
        held = held_ranks(ran)
        each = np.repeat(np.arange(len(ran)), [len(h) for h in held])  # one bar per rank an evaluation held
        on = np.fromiter((r for h in held for r in h), np.int64, len(each))
        ranks = np.unique(on)
        row = np.searchsorted(ranks, on)
        a = ((ran["started"].to_numpy(float) - t0) / scale)[each]
        b = ((ran["finished"].to_numpy(float) - t0) / scale)[each]
        # a bar narrower than a few pixels has no colour left inside its white edge (a no-op task's
        # start and end are one instant at the store's resolution): its worker's lane would look idle
        least = MIN_BAR_PX * max(float(b.max()), 1e-9) / WIDTH_PX
        thin = b - a < least
        widened = int(thin.sum())
        b = np.maximum(b, a + least)
        statuses = ran["status"].to_numpy().astype(str)[each]
        multi = timeline.ranks(ran) > 1
        team = multi[each]
        teams = int(multi.sum())
        unrecorded = int((multi & np.array([len(h) == 1 for h in held])).sum())  # stores before team_ranks
        if len(a) > RASTER_ABOVE:  # too many bars to tell apart: merge those a pixel cannot separate
            keys = np.char.add(statuses, np.where(team, "|team", ""))
            row, a, b, keys = merged_bars(row, a, b, keys, resolution=float(b.max()) / WIDTH_PX)
            team = np.char.endswith(keys.astype(str), "|team")
            thin = b - a < least * 1.01  # a merged bar of thin ones only
            statuses = np.char.replace(keys.astype(str), "|team", "")
        lo, hi = row - 0.4, row + 0.4
        verts = np.stack([np.column_stack(p) for p in ((a, lo), (a, hi), (b, hi), (b, lo))], axis=1)
        palette = {s: colour(s) for s in set(statuses)}
        fig, ax = new_figure()
        for part, hatch in ((~team, None), (team, "////")):
            if not part.any():
                continue
            faces = pd.Series(statuses[part]).map(palette).to_list()
            # matplotlib's stubs want a sequence of vertex arrays; it takes the (n, 4, 2) array as well
            bars = PolyCollection(
                verts[part],  # type: ignore[arg-type]
                facecolors=faces,
                edgecolors=[face if narrow else "white" for face, narrow in zip(faces, thin[part], strict=True)],
                linewidths=0.3 if len(a) < 2_000 else 0.0,
                rasterized=len(a) > RASTER_ABOVE,
                hatch=hatch,
                label="team" if hatch else None,
            )
            ax.add_collection(bars)
        ax.set_xlim(0, max(float(b.max()), 1e-9) * 1.01 + least)  # the last bar clear of the frame
        ax.set_ylim(-0.6, len(ranks) - 0.4)
        step = max(1, len(ranks) // 25)
        ax.set_yticks(np.arange(0, len(ranks), step), [str(int(r)) for r in ranks[::step]])
        ax.set_ylabel("worker rank")
        ax.set_xlabel(f"wall time since the first submission ({unit})")
        present = [s for s in ("ok", "failed", "crashed", "timeout") if s in set(statuses)]
        present += sorted(set(statuses) - set(present))
        handles = [Patch(color=colour(s), label=s) for s in present]
        if teams:
            handles.append(Patch(facecolor="white", edgecolor="grey", hatch="////", label="multi-rank task"))
        ax.legend(handles=handles, loc="upper right", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
        caption = (
            f"Each bar is one evaluation on the worker that ran it ({counted(len(ran), 'evaluation')}, "
            f"{counted(len(ranks), 'worker')}), coloured by status"
            + ("; bars closer than a pixel are drawn as one" if len(each) > RASTER_ABOVE else "")
            + (
                f"; {counted(widened, 'bar')} shorter than {MIN_BAR_PX} pixels {'is' if widened == 1 else 'are'} "
                f"drawn {MIN_BAR_PX} pixels wide."
                if widened
                else "."
            )
        )
        if teams:
            caption += (
                f" {counted(teams, 'evaluation')} ran on several ranks (task.ranks): each is "
                "hatched on every rank of its team."
            )
        if unrecorded:
            caption += (
                f" This store does not record which ranks a team held: {unrecorded} of them "
                f"{'are' if unrecorded != 1 else 'is'} drawn on {'their' if unrecorded != 1 else 'its'} "
                "team's rank 0 alone, although the utilization counts every rank of a team as busy."
            )
        return Plot(self.name, "Tasks per worker", fig, caption)


def held_ranks(ran: pd.DataFrame) -> list[tuple[int, ...]]:
    """The worker ranks each evaluation held: its team's when recorded, else its ``rank``."""
    teams = ran["team_ranks"] if "team_ranks" in ran.columns else pd.Series(None, index=ran.index, dtype=object)
    return [
        team if isinstance(team, tuple) and team else (int(rank),)
        for team, rank in zip(teams, ran["rank"], strict=True)
    ]
