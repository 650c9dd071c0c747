"""Slice plots (the objective against each of the most important parameters) and a contour of the
top two: what Optuna users look at first.

The parameters are ranked by :func:`emews.reporting.parameters.ranked` (importance when there are
enough evaluations for it to mean something, else the space's order). The objective's axis and
colours use :func:`emews.reporting.yrange.robust`: a diverged evaluation does not flatten the rest.
"""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import LogNorm, Normalize
from matplotlib.tri import Triangulation

from emews.core.direction import Direction
from emews.reporting.data import ExperimentData
from emews.reporting.figures import Plot, ReportPlot, colour, new_figure
from emews.reporting.parameters import axis, ranked
from emews.reporting.yrange import mark_clipped, robust

#: at most this many slices (the most important parameters)
MAX_SLICES = 6


class Slices(ReportPlot):
    """The objective against each of the most important parameters, one panel each."""

    name = "slices"

    def make(self, data: ExperimentData) -> Plot | None:
        ok = data.ok
        names, why = ranked(data)
        names = names[:MAX_SLICES]
        if len(ok) < 2 or not names:
            return None
        objective = ok["objective"].to_numpy(float)
        yrange = robust(objective)
        fig, axes = new_figure(ncols=len(names), sharey=True)
        panels = list(np.atleast_1d(axes))
        for ax, name in zip(panels, names, strict=True):
            a = axis(name, data.params.loc[ok.index, name], data.space.get(name, {}))
            x = a.values
            yrange.apply(ax)
            inside = yrange.inside(objective)
            ax.scatter(x[inside], objective[inside], s=10, alpha=0.6, color=colour("ok"))
            mark_clipped(ax, yrange, x, objective, label=False)
            if a.categorical:  # its values' names at their codes
                ax.set_xticks(range(len(a.ticks)), [t for _, t in a.ticks], rotation=45, fontsize=7, ha="right")
            ax.set_xlabel(name + (" (log10)" if data.space.get(name, {}).get("log") else ""), fontsize=8)
            ax.grid(alpha=0.3)
        panels[0].set_ylabel(f"{data.metric} ({data.direction})")
        fig.suptitle(f"{data.metric} against each parameter ({len(ok)} successful evaluations)")
        return Plot(
            self.name,
            "Slices",
            fig,
            f"The objective of each successful evaluation against one parameter at a time: {why}." + yrange.note(),
        )


class Contour(ReportPlot):
    """The objective over the two most important parameters."""

    name = "contour"

    def make(self, data: ExperimentData) -> Plot | None:
        ok = data.ok
        names, why = ranked(data)
        if len(ok) < 4 or len(names) < 2:
            return None
        first, second = (axis(n, data.params.loc[ok.index, n], data.space.get(n, {})) for n in names[:2])
        objective = ok["objective"].to_numpy(float)
        yrange = robust(objective)
        if yrange.scale == "log":
            norm: Normalize = LogNorm(float(objective.min()), float(objective.max()))
        else:
            lo = yrange.lower if yrange.lower is not None else float(objective.min())
            hi = yrange.upper if yrange.upper is not None else float(objective.max())
            norm = Normalize(lo, hi, clip=True)
        cmap = colormaps["viridis_r" if data.direction is Direction.MINIMIZE else "viridis"]
        fig, ax = new_figure()
        x, y = first.values, second.values
        filled = False
        if len(np.unique(x)) > 1 and len(np.unique(y)) > 1:
            try:
                ax.tricontourf(  # a Triangulation: given x, y, z, matplotlib tries z as triangles (int32)
                    Triangulation(x, y),
                    np.clip(objective, norm.vmin, norm.vmax),
                    levels=12,
                    cmap=cmap,
                    norm=norm,
                    alpha=0.6,
                )
                filled = True
            except (ValueError, RuntimeError):  # collinear points: no triangulation
                pass
        dots = ax.scatter(x, y, c=objective, cmap=cmap, norm=norm, s=18, edgecolors="black", linewidths=0.4)
        fig.colorbar(dots, ax=ax, label=data.metric + (" (colours clipped)" if yrange.clipped else ""))
        for a, set_ticks in ((first, ax.set_xticks), (second, ax.set_yticks)):
            if a.categorical:  # its values' names at their codes
                set_ticks(range(len(a.ticks)), [t for _, t in a.ticks])
        ax.set_xlabel(first.name + (" (log10)" if data.space.get(first.name, {}).get("log") else ""))
        ax.set_ylabel(second.name + (" (log10)" if data.space.get(second.name, {}).get("log") else ""))
        ax.set_title(f"{data.metric} over {first.name} and {second.name}")
        return Plot(
            self.name,
            "Contour of the top two parameters",
            fig,
            f"Each dot is a successful evaluation, coloured by its {data.metric}"
            + ("; the filled contour interpolates between them" if filled else "")
            + f". The two parameters: {why}."
            + (f" Colours are clipped to the bulk of the values ({yrange.clipped} outside)." if yrange.clipped else ""),
        )
