"""The parameters of good evaluations: parallel coordinates of the top k, and parameter importance.

Importance is scikit-learn's permutation importance (``sklearn.inspection.permutation_importance``)
of a random forest (``RandomForestRegressor``) fitted to the successful evaluations' losses:
how much the forest's R^2 on held-out evaluations drops when one parameter's values are shuffled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize

from emews.core.direction import Direction
from emews.core.results import utf8_text
from emews.core.wording import counted
from emews.output.numbers import number
from emews.reporting.data import ExperimentData
from emews.reporting.figures import Plot, ReportPlot, new_figure
from emews.reporting.yrange import robust

#: the forest sees at most this many evaluations (a random sample of them beyond)
MAX_FIT = 1_000
IMPORTANCE_METHOD = "permutation importance (scikit-learn) of a random forest fitted to the successful evaluations"
#: importance is withheld below this many successful evaluations ...
MIN_IMPORTANCE = 30
#: ... and below this many per free parameter
PER_PARAMETER = 5
#: parallel coordinates show at most this many parameters (the most important)
MAX_PARALLEL = 8
#: axis names and value labels are cut to this many characters
LABEL_CHARS = 12
#: at most this many value labels on one axis (0.47 in of 4.8 in each at 7 pt: they never touch)
MAX_TICKS = 9


@dataclass(frozen=True)
class Axis:
    """One parameter as numbers: ``values`` for a model, ``unit`` in [0, 1] for an axis."""

    name: str
    values: np.ndarray
    unit: np.ndarray
    ticks: list[tuple[float, str]]
    #: values are the indices of named levels (``ticks`` names them)
    categorical: bool = False


def free_parameters(data: ExperimentData) -> list[str]:
    """Parameters that vary (constants and parameters no evaluation set are left out); a null
    (missing) is a value of its own: a categorical of ``[a, null]`` varies."""
    out = []
    for name in data.params.columns:
        if data.space.get(name, {}).get("type") == "constant":
            continue
        column = data.params[name]
        try:
            distinct = column.nunique(dropna=False)
        except TypeError:  # lists or dicts as values
            distinct = column.astype(str).nunique(dropna=False)
        if distinct > 1:
            out.append(name)
    return out


def axis(name: str, column: pd.Series, spec: dict[str, Any]) -> Axis:
    """``column`` as numbers: numeric parameters as they are (log10 when the space says log),
    others as the index of their value. The axis spans the space's bounds when it has them."""
    numeric = pd.to_numeric(column, errors="coerce") if column.dtype != bool else None
    if (
        numeric is not None
        and numeric.notna().all()
        and spec.get("type") != "categorical"
        and not any(isinstance(v, bool) for v in spec.get("values", ()))
    ):
        raw = numeric.to_numpy(float)
        log = bool(spec.get("log")) and (raw > 0).all()
        bounds = (
            [spec["lower"], spec["upper"]]
            if "lower" in spec and "upper" in spec
            else [float(v) for v in spec.get("values", ())] or [raw.min(), raw.max()]
        )
        bounds = [min(min(bounds), raw.min()), max(max(bounds), raw.max())]
        values = np.log10(raw) if log else raw
        lo, hi = (float(np.log10(b)) if log else float(b) for b in bounds)
        unit = (values - lo) / (hi - lo) if hi > lo else np.full(len(values), 0.5)
        ticks = [(0.0, _fmt(bounds[0])), (1.0, _fmt(bounds[1]))]
        return Axis(name, values, unit, ticks)
    labels = column.map(label, na_action=None).astype(object)
    levels = [label(v) for v in spec.get("values", [])] or sorted(labels.unique())
    levels += sorted(set(labels.unique()) - set(levels))
    codes = labels.map({v: i for i, v in enumerate(levels)}).to_numpy(float)
    span = max(len(levels) - 1, 1)
    return Axis(name, codes, codes / span, [(i / span, v) for i, v in enumerate(levels)], categorical=True)


def label(value: Any) -> str:
    """A categorical value as its axis names it: a missing one (a null in the space, read back as
    NaN) as ``None``, the spelling of ``str(None)`` for the space's own null."""
    return "None" if value is None or (isinstance(value, float) and np.isnan(value)) else utf8_text(str(value))


def _fmt(value: float) -> str:
    return number(value, digits=3)


class Parallel(ReportPlot):
    """Parallel coordinates of the best evaluations."""

    name = "parallel"

    def make(self, data: ExperimentData, top: int = 50) -> Plot | None:
        ok = data.ok
        every, why = ranked(data)
        names = every[:MAX_PARALLEL]
        if len(ok) < 2 or not names:
            return None
        chosen = ok.index[np.argsort(ok["loss"].to_numpy(float), kind="stable")[:top]]
        ok, objective = ok.loc[chosen], ok.loc[chosen, "objective"].to_numpy(float)
        clip = robust(objective)
        lo = clip.lower if clip.lower is not None else float(objective.min())
        hi = clip.upper if clip.upper is not None else float(objective.max())
        best = np.arange(len(ok))
        axes = [axis(n, data.params.loc[ok.index, n], data.space.get(n, {})) for n in names]
        obj_unit = np.clip((objective - lo) / (hi - lo), 0, 1) if hi > lo else np.full(len(objective), 0.5)
        columns = [a.unit for a in axes] + [obj_unit]
        fig, ax = new_figure()
        norm = Normalize(lo, hi, clip=True)
        colours = colormaps["viridis_r" if data.direction is Direction.MINIMIZE else "viridis"]
        x = np.arange(len(columns))
        for i in best[::-1]:  # the best drawn last, on top
            ax.plot(x, [c[i] for c in columns], color=colours(norm(objective[i])), alpha=0.7, linewidth=1.2)
        for j, a in enumerate(axes + [None]):
            ax.axvline(j, color="black", linewidth=0.8)
            ticks = a.ticks if a is not None else [(0.0, _fmt(lo)), (1.0, _fmt(hi))]
            for pos, label in thin(ticks):
                ax.annotate(
                    label[:LABEL_CHARS], (j, pos), xytext=(3, 0), textcoords="offset points", fontsize=7, va="center"
                )
        ax.set_xticks(x, [short(a.name) for a in axes] + [short(data.metric)], fontsize=8)
        ax.set_yticks([])
        ax.set_xlim(-0.2, len(columns) - 0.6)
        ax.set_ylim(-0.05, 1.05)
        fig.colorbar(ScalarMappable(norm=norm, cmap=colours), ax=ax, label=data.metric)
        ax.set_title(f"the {len(best)} best of {len(data.ok)} successful evaluations (colour: {data.metric})")
        return Plot(
            self.name,
            "Parallel coordinates of the best evaluations",
            fig,
            "One line per evaluation through its parameter values (each axis from its smallest to its "
            "largest value; log-scaled parameters on a log axis) to its objective"
            + (f"; the {len(names)} of {len(every)} parameters shown are {why}" if len(every) > len(names) else "")
            + (
                f". The objective's axis and colours are clipped to the bulk of its values ({clip.clipped} "
                "outside, drawn at its ends)."
                if clip.clipped
                else "."
            ),
        )


def short(name: str) -> str:
    """An axis name in lines of at most :data:`LABEL_CHARS` characters, broken after ``_ . - /``, at
    most three (the first, an ellipsis, the last): neighbouring axes' names never meet."""
    words = re.findall(r"[^_.\-/]*[_.\-/]?", name)
    lines: list[str] = []
    for word in (w for w in words if w):
        while len(word) > LABEL_CHARS:
            lines.append(word[:LABEL_CHARS])
            word = word[LABEL_CHARS:]
        if lines and len(lines[-1]) + len(word) <= LABEL_CHARS:
            lines[-1] += word
        else:
            lines.append(word)
    if len(lines) > 3:
        lines = [lines[0], "\N{HORIZONTAL ELLIPSIS}", lines[-1]]
    return "\n".join(lines)


def thin(ticks: list[tuple[float, str]]) -> list[tuple[float, str]]:
    """At most :data:`MAX_TICKS` of an axis's labels, evenly spread, the first and last kept."""
    if len(ticks) <= MAX_TICKS:
        return ticks
    keep = np.unique(np.linspace(0, len(ticks) - 1, MAX_TICKS).round().astype(int))
    return [ticks[i] for i in keep]


def needed(n_parameters: int) -> int:
    """How many successful evaluations importance needs for ``n_parameters`` free parameters."""
    return max(MIN_IMPORTANCE, PER_PARAMETER * n_parameters)


def withheld(data: ExperimentData) -> str | None:
    """Why importance is not shown for ``data`` (a sentence), or ``None`` when it is."""
    n, names = len(data.ok), free_parameters(data)
    if not names or n >= needed(len(names)):
        return None
    return (
        f"Importance is withheld: {counted(n, 'successful evaluation')} for {counted(len(names), 'parameter')}, "
        f"and it needs at least {needed(len(names))} "
        f"({MIN_IMPORTANCE} in all and {PER_PARAMETER} per parameter); with fewer, a forest ranks "
        "parameters by noise, even ones the run never varied in a way that mattered."
    )


_cache: list[tuple[ExperimentData, pd.DataFrame | None]] = []


def ranked(data: ExperimentData) -> tuple[list[str], str]:
    """The free parameters, most important first, and a few words saying how they were ranked."""
    names = free_parameters(data)
    found = importances(data) if withheld(data) is None else None
    if found is None:
        return names, "the parameters in the space's order (too few evaluations to rank them by importance)"
    return list(found["parameter"]), f"the parameters ranked by importance ({len(data.ok)} evaluations)"


def importances(data: ExperimentData, seed: int = 0) -> pd.DataFrame | None:
    """:func:`_importances`, computed once per ``data``."""
    for seen, found in _cache:
        if seen is data:
            return found
    found = _importances(data, seed)
    _cache[:] = [(data, found)]
    return found


def _importances(data: ExperimentData, seed: int = 0) -> pd.DataFrame | None:
    """Permutation importance of each free parameter (mean and std of the R^2 drop), largest first."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance
    from sklearn.model_selection import train_test_split

    ok = data.ok
    names = free_parameters(data)
    if len(ok) < 8 or not names:
        return None
    if len(ok) > MAX_FIT:
        ok = ok.sample(MAX_FIT, random_state=seed)
    X = np.column_stack([axis(n, data.params.loc[ok.index, n], data.space.get(n, {})).values for n in names])
    y = ok["loss"].to_numpy(float)
    if np.ptp(y) == 0:
        return None
    X_fit, X_test, y_fit, y_test = (
        train_test_split(X, y, test_size=0.25, random_state=seed) if len(y) >= 40 else (X, X, y, y)
    )
    forest = RandomForestRegressor(n_estimators=40, min_samples_leaf=2, random_state=seed, n_jobs=1)
    forest.fit(X_fit, y_fit)
    found = permutation_importance(forest, X_test, y_test, n_repeats=5, random_state=seed, n_jobs=1)
    frame = pd.DataFrame({"parameter": names, "importance": found.importances_mean, "std": found.importances_std})
    return frame.sort_values("importance", ascending=False, kind="stable").reset_index(drop=True)


class Importance(ReportPlot):
    """How much each parameter explains the objective."""

    name = "importance"

    def make(self, data: ExperimentData) -> Plot | None:
        why = withheld(data)
        if why is not None:
            fig, ax = new_figure()
            ax.set_axis_off()
            ax.text(0.5, 0.5, why, ha="center", va="center", wrap=True, fontsize=11)
            return Plot(self.name, "Parameter importance", fig, why)
        found = importances(data)
        if found is None:
            return None
        fig, ax = new_figure()
        order = found.iloc[::-1]
        ax.barh(order["parameter"], order["importance"], xerr=order["std"], color="#2b8cbe")
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel("drop of R^2 when the parameter is shuffled")
        ax.set_title(f"{IMPORTANCE_METHOD} (n = {len(data.ok)})")
        ax.grid(axis="x", alpha=0.3)
        return Plot(
            self.name,
            "Parameter importance",
            fig,
            f"Estimator: {IMPORTANCE_METHOD} (sklearn.inspection.permutation_importance on a "
            f"RandomForestRegressor of 40 trees fitted to at most {MAX_FIT:,} evaluations, 5 shuffles per "
            "parameter, a quarter of the evaluations held out when there are 40 or more). Bars show the mean "
            f"drop, whiskers its standard deviation. n = {len(data.ok)} successful evaluations.",
        )
