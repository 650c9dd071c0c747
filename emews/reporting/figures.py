"""What every plot shares: its size, its colours, and the ``Plot`` each plot module returns.

Figures are plain ``matplotlib.figure.Figure`` objects drawn by the Agg renderer (no pyplot,
no display, no server: what a login node has).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure

from emews.training.messages import Ending

#: every PNG is this many pixels wide and high
WIDTH_PX, HEIGHT_PX = 1100, 480
DPI = 100
#: one colour per evaluation status (and per learning-curve outcome)
STATUS_COLOURS = {"ok": "#2b8cbe", "failed": "#e34a33", "crashed": "#7a0177", "timeout": "#fdae61",
                  Ending.COMPLETED.value: "#2b8cbe", Ending.STOPPED_EARLY.value: "#999999"}
OTHER_COLOUR = "#444444"
#: more marks than this in one scatter are drawn as a raster (the file stays small)
RASTER_ABOVE = 5_000


def colour(status: str) -> str:
    return STATUS_COLOURS.get(status, OTHER_COLOUR)


def new_figure(ncols: int = 1, nrows: int = 1, **kwargs: object) -> tuple[Figure, object]:
    """A report-sized figure and its axes (``Figure.subplots``)."""
    fig = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI, layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=True, **kwargs)


@dataclass
class Plot:
    """One named plot of the report: its figure and the words around it."""

    name: str            # the PNG's stem and the HTML section's id (``plot-<name>``)
    title: str
    figure: Figure
    caption: str = ""
    #: rows shown under the figure (in the HTML report)
    table: pd.DataFrame | None = None

    def png(self) -> bytes:
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=DPI)
        return buffer.getvalue()
