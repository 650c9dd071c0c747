"""What every plot shares: its size, its colours, the contract of a plot (:class:`ReportPlot`) and
the ``Plot`` each one makes.

Figures are plain ``matplotlib.figure.Figure`` objects drawn by the Agg renderer (no pyplot,
no display, no server: what a login node has).
"""

from __future__ import annotations

import abc
import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from emews.training.messages import Ending

if TYPE_CHECKING:
    from emews.reporting.data import ExperimentData

#: every PNG is this many pixels wide and high
WIDTH_PX, HEIGHT_PX = 1100, 480
DPI = 100
#: one colour per evaluation status (and per learning-curve outcome)
STATUS_COLOURS = {
    "ok": "#2b8cbe",
    "failed": "#e34a33",
    "crashed": "#7a0177",
    "timeout": "#fdae61",
    Ending.COMPLETED.value: "#2b8cbe",
    Ending.STOPPED_EARLY.value: "#999999",
}
OTHER_COLOUR = "#444444"
#: more marks than this in one scatter are drawn as a raster (the file stays small)
RASTER_ABOVE = 5_000


def colour(status: str) -> str:
    return STATUS_COLOURS.get(status, OTHER_COLOUR)


@overload
def new_figure(ncols: Literal[1] = 1, nrows: Literal[1] = 1, **kwargs: Any) -> tuple[Figure, Axes]: ...
@overload
def new_figure(ncols: int = 1, nrows: int = 1, **kwargs: Any) -> tuple[Figure, Any]: ...
def new_figure(ncols: int = 1, nrows: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A report-sized figure and its axes (``Figure.subplots``: one ``Axes``, or an array of them)."""
    fig = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI, layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=True, **kwargs)


@dataclass
class Plot:
    """One named plot of the report: its figure and the words around it."""

    name: str  # the PNG's stem and the HTML section's id (``plot-<name>``)
    title: str
    figure: Figure
    caption: str = ""
    #: rows shown under the figure (in the HTML report)
    table: pd.DataFrame | None = None

    def png(self) -> bytes:
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=DPI)
        return buffer.getvalue()


class ReportPlot(abc.ABC):
    """A plot ``emews report`` draws: its ``name`` and how it is made from an experiment's data.

    ``emews.reporting.render.PLOTS`` lists them in page order; :meth:`make` returns ``None`` when
    the experiment has nothing to show for it (yet), and the report says so.
    """

    #: the PNG's stem and the HTML section's id (``plot-<name>``): the ``Plot``'s name
    name: ClassVar[str]

    @abc.abstractmethod
    def make(self, data: ExperimentData) -> Plot | None:
        """The plot of ``data``, or ``None`` when there is nothing to show."""
