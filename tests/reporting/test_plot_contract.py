"""The plots of a report are one contract: :class:`ReportPlot` (a name and ``make``), listed in page
order by ``render.PLOTS``; a plot that does not implement ``make`` cannot be built."""

from __future__ import annotations

import pytest

from emews.reporting.figures import ReportPlot
from emews.reporting.render import PLOTS


def test_the_report_lists_each_plot_once_in_page_order() -> None:
    assert all(isinstance(plot, ReportPlot) for plot in PLOTS)
    assert [plot.name for plot in PLOTS] == ["trajectory", "load", "gantt", "parallel", "importance", "slices",
                                             "contour", "failures", "curves"]


def test_a_plot_must_implement_make() -> None:
    class Nothing(ReportPlot):
        name = "nothing"

    with pytest.raises(TypeError, match="abstract"):
        Nothing()  # type: ignore[abstract]
