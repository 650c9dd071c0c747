"""Learning curves: each trial's reported metric against its step, coloured by outcome.

Drawn only when the store keeps per-step reports (a ``reports`` table). A trial's outcome is how
it ended when it succeeded (:class:`~emews.training.messages.Ending`: ``stopped early`` by its scheduler, else
``completed``), ``running`` while it has no result, and its status (failed, crashed, timeout)
otherwise; a status of another tool's store that says it was stopped or pruned is ``stopped early``.
PBT exploits are drawn as arrows from the donor's curve to the trial that cloned it, at the step of
the exploit, and listed under the plot with the parameters each clone went on with.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from emews.core.direction import Direction
from emews.core.wording import counted
from emews.output.numbers import number
from emews.reporting.data import ExperimentData
from emews.reporting.figures import Plot, ReportPlot, colour, new_figure
from emews.reporting.yrange import mark_clipped, robust
from emews.training.messages import Ending

#: at most this many curves are drawn (the best ones, then a sample of the rest)
MAX_CURVES = 300
#: the colour of PBT exploit arrows
EXPLOIT_COLOUR = "#7b3294"
OUTCOME_ORDER = (Ending.COMPLETED.value, Ending.STOPPED_EARLY.value, "running", "failed", "crashed", "timeout")


def metric_name(data: ExperimentData) -> str | None:
    """The workflow's metric when reports carry it, else the first numeric one reported."""
    reports = data.reports
    if reports is None:
        return None
    for metrics in reports["metrics"]:
        if data.metric in metrics:
            return data.metric
    for metrics in reports["metrics"]:
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return key
    return None


def outcomes(data: ExperimentData, last_step: pd.Series) -> pd.Series:
    """trial -> outcome (see the module docstring)."""
    status = data.results.set_index("id")["status"]

    def outcome(trial: object) -> str:
        s = status.get(trial)
        if s is None:
            return "running"
        if "stop" in s or "prun" in s:
            return Ending.STOPPED_EARLY.value
        if s == "ok":
            return data.endings.get(int(trial), Ending.COMPLETED.value)  # type: ignore[call-overload]
        return str(s)

    return pd.Series({trial: outcome(trial) for trial in last_step.index})


def changed(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The parameters a PBT clone went on with, as ``rate 0.9 -> 0.6, ...`` (those it changed)."""
    keys = [k for k in new if old.get(k) != new[k]]
    return ", ".join(f"{k} {number(old[k]) if k in old else '-'} -> {number(new[k])}" for k in keys) or "unchanged"


def exploits_table(lineage: pd.DataFrame) -> pd.DataFrame:
    """One row per PBT exploit: the trial, its step, the trial it cloned, the parameters it changed."""
    return pd.DataFrame(
        {
            "trial": lineage["trial"].astype(int),
            "at step": lineage["step"].astype(int),
            "cloned trial": lineage["donor"].astype(int),
            "new parameters": [
                changed(o, n) for o, n in zip(lineage["old_params"], lineage["new_params"], strict=True)
            ],
        }
    )


def _value_at(rows: pd.DataFrame, step: int) -> float | None:
    """A curve's value at ``step``, or at the last step before it it reported (first report of that step)."""
    before = rows[rows["step"] <= step]
    if before.empty:
        return None
    return float(before[before["step"] == before["step"].max()]["value"].iloc[0])


def draw_exploits(ax: Axes, lineage: pd.DataFrame, groups: dict[Any, pd.DataFrame]) -> int:
    """An arrow per exploit from the donor's curve to the cloning trial's, at the exploit's step;
    how many were drawn (both curves shown)."""
    drawn = 0
    for trial, step, donor in lineage[["trial", "step", "donor"]].itertuples(index=False, name=None):
        if trial not in groups or donor not in groups:
            continue
        start, end = _value_at(groups[donor], step), _value_at(groups[trial], step)
        if start is None or end is None:
            continue
        ax.annotate(
            "",
            xy=(step, end),
            xytext=(step, start),
            annotation_clip=False,
            arrowprops={"arrowstyle": "->", "color": EXPLOIT_COLOUR, "linestyle": "--", "linewidth": 1.2},
        )
        ax.plot([step], [start], marker="o", markersize=3, color=EXPLOIT_COLOUR)
        drawn += 1
    return drawn


class Curves(ReportPlot):
    """Learning curves: each trial's reported metric against its steps."""

    name = "curves"

    def make(self, data: ExperimentData, seed: int = 0) -> Plot | None:
        if data.reports is None or data.reports.empty:
            return None
        name = metric_name(data)
        if name is None:
            return None
        frame = data.reports.assign(
            value=pd.to_numeric(data.reports["metrics"].map(lambda m: m.get(name)), errors="coerce")
        ).dropna(subset=["value"])
        if frame.empty:
            return None
        by_trial = frame.groupby("trial", sort=True)
        last_step = by_trial["step"].max()
        kind = outcomes(data, last_step)
        trials = list(last_step.index)
        if len(trials) > MAX_CURVES:
            final = by_trial["value"].last().sort_values(ascending=data.direction is Direction.MINIMIZE)
            best = list(final.index[: MAX_CURVES // 2])
            rest = [t for t in trials if t not in set(best)]
            rng = np.random.default_rng(seed)
            trials = best + list(rng.choice(rest, MAX_CURVES - len(best), replace=False))
        groups = dict(list(by_trial))
        yrange = robust(np.concatenate([groups[t]["value"].to_numpy(float) for t in trials]))
        fig, ax = new_figure()
        yrange.apply(ax)
        seen: set[str] = set()
        for trial in trials:
            rows = groups[trial]
            label = kind[trial]
            ax.plot(
                rows["step"],
                rows["value"],
                color=colour(label),
                alpha=0.6,
                linewidth=1,
                label=None if label in seen else label,
            )
            seen.add(label)
            mark_clipped(ax, yrange, rows["step"].to_numpy(float), rows["value"].to_numpy(float), label=False)
        lineage = data.lineage
        arrows = draw_exploits(ax, lineage, groups) if lineage is not None else 0
        ax.set_xlabel("step")
        ax.set_ylabel(name)
        handles, labels = ax.get_legend_handles_labels()
        rank = {o: i for i, o in enumerate(OUTCOME_ORDER)}
        pairs = sorted(zip(labels, handles, strict=True), key=lambda p: rank.get(p[0], len(rank)))
        legend = [(h, f"{o} ({int((kind == o).sum())})") for o, h in pairs]
        if arrows:
            legend.append((Line2D([], [], color=EXPLOIT_COLOUR, linestyle="--"), f"PBT exploit ({arrows})"))
        ax.legend([h for h, _ in legend], [text for _, text in legend], fontsize=8)
        ax.grid(alpha=0.3)
        ax.set_title(f"{len(trials)} of {len(last_step)} trials")
        exploited = (
            ""
            if lineage is None
            else (
                f" {counted(len(lineage), 'PBT exploit')}: each dashed arrow runs from the curve "
                "of the trial that was cloned to the trial that cloned its checkpoint, at the step it did so; the "
                "table lists them with the parameters each clone trained on with."
            )
        )
        return Plot(
            self.name,
            "Learning curves",
            fig,
            f"Each line is one trial's reported {name} against its step, coloured by how the trial ended."
            + yrange.note()
            + exploited,
            table=None if lineage is None else exploits_table(lineage),
        )
