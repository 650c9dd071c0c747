"""Failures by status and by cause (the line of each error that names it, counted)."""

from __future__ import annotations

import pandas as pd

from emews.core.failure_cause import cause, cause_key, clip
from emews.core.wording import counted
from emews.reporting.data import ExperimentData
from emews.reporting.figures import Plot, ReportPlot, colour, new_figure

#: causes shown in the plot (all of them are in the table)
TOP_CAUSES = 12


def causes(data: ExperimentData) -> pd.DataFrame:
    """(status, cause, count) of the evaluations that did not succeed, most frequent first; failures
    whose causes differ only in the values they quote are one row, named by the first
    (:func:`emews.core.failure_cause.cause_key`, as the end-of-run summary counts them)."""
    bad = data.results[data.results["status"] != "ok"]
    named = bad["error"].map(cause)
    frame = pd.DataFrame({"status": bad["status"], "key": named.map(cause_key), "cause": named.map(clip)})
    counted = frame.groupby(["status", "key"], sort=False).agg(cause=("cause", "first"), count=("cause", "size"))
    return (
        counted.reset_index()[["status", "cause", "count"]]
        .sort_values(["count", "status", "cause"], ascending=[False, True, True], kind="stable")
        .reset_index(drop=True)
    )


def none_line(data: ExperimentData) -> str | None:
    """The failures section in one line when there are none, else ``None``."""
    res = data.results
    if res.empty or not (res["status"] == "ok").all():
        return None
    return f"Failures: none ({counted(len(res), 'evaluation')}, all successful)."


class Failures(ReportPlot):
    """Failed evaluations by cause."""

    name = "failures"

    def make(self, data: ExperimentData) -> Plot | None:
        res = data.results
        if res.empty or (res["status"] == "ok").all():
            return None  # none: the report says so in one line (:func:`none_line`)
        counts = res["status"].value_counts()
        order = [s for s in ("ok", "failed", "crashed", "timeout") if s in counts] + sorted(
            set(counts.index) - {"ok", "failed", "crashed", "timeout"}
        )
        found = causes(data)
        fig, (by_status, by_cause) = new_figure(ncols=2, width_ratios=[1, 2.2])
        bars = by_status.bar(order, [int(counts[s]) for s in order], color=[colour(s) for s in order])
        by_status.bar_label(bars, fontsize=8)
        by_status.set_ylabel("evaluations")
        by_status.set_title("by status")
        shown = found.head(TOP_CAUSES).iloc[::-1]
        if shown.empty:
            by_cause.text(0.5, 0.5, "no failures", ha="center", va="center", transform=by_cause.transAxes)
            by_cause.set_axis_off()
        else:
            labels = [f"{c[:60]}{'...' if len(c) > 60 else ''}" for c in shown["cause"]]
            by_cause.barh(range(len(shown)), shown["count"], color=[colour(s) for s in shown["status"]])
            by_cause.set_yticks(range(len(shown)), labels, fontsize=7)
            by_cause.set_xlabel("evaluations")
            by_cause.set_title(f"by cause (the {len(shown)} most frequent of {len(found)})")
        return Plot(
            self.name,
            "Failures",
            fig,
            "Evaluations by status, and the failures by cause: the line that names each error (a "
            "traceback's exception line, a command's error line from its stderr); errors that differ "
            "only in the values they quote count as one cause.",
            table=found.rename(columns={"count": "evaluations"}),
        )
