"""The figures in words: the report's header and its top-k table (``emews status``'s headline:
:mod:`emews.reporting.headline`)."""

from __future__ import annotations

import json
import math
import shlex
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from emews.core.build import Build, current_build
from emews.core.lost_ranks import lost_ranks_of
from emews.core.replicates import REPLICATE, PointResult, best_point, group_results
from emews.core.results import Result, Status
from emews.core.wording import counted, duration
from emews.output.export import Totals, counts_text
from emews.output.numbers import number
from emews.reporting import timeline
from emews.reporting.data import ExperimentData


def _when(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def objective_text(objective: Mapping[str, Any]) -> str:
    """The workflow's objective as its file names it: ``module:function``, or a command's argv as a
    shell would read it (``python3 /models/nt3_baseline_keras2.py``)."""
    command = objective.get("command")
    if isinstance(command, list) and command:
        return shlex.join(str(arg) for arg in command)
    return f"{objective.get('module', '?')}:{objective.get('function', 'run')}"


def header(data: ExperimentData) -> list[tuple[str, str]]:
    """(label, value) rows: workflow, site, optimizer and options, budget, elapsed, version, ..."""
    wf, res = data.workflow, data.results
    optimizer = wf.get("optimizer", {})
    objective = wf.get("objective", {})
    use = timeline.utilization(res, data.workers)
    spans = timeline.runs(res)
    done = len(res)
    best = best_row(data)
    rows = [
        ("experiment", str(data.exp_dir)),
        (
            "workflow",
            f"{data.info.get('name', data.exp_dir.name)}: {objective_text(objective)}, {data.metric} ({data.direction})",
        ),
        ("site", str(data.info.get("site") or data.site.get("name") or "-")),
        ("optimizer", f"{optimizer.get('name', '?')} {json.dumps(optimizer.get('options') or {}, sort_keys=True)}"),
        (
            "budget",
            f"{done}/{data.budget if data.budget is not None else '-'} evaluations: " + counts_text(totals(data)),
        ),
        ("best", _best_text(data, best)),
        (
            "elapsed",
            f"{duration(use.elapsed)} in {counted(len(spans), 'run')}"
            + (f", {_when(spans[0][0])} to {_when(spans[-1][1])}" if spans else ""),
        ),
        ("workers", str(data.workers)),
        (
            "utilization",
            f"{use.busy:.1%} busy; idle {use.idle_optimizer:.1%} waiting for the optimizer, "
            f"{use.idle_dispatch:.1%} in dispatch",
        ),
        ("emews version", f"run: {_run_build(data)}; this report: {current_build().described}"),
    ]
    if data.summary and data.summary.get("error"):
        rows.append(("last run ended with", str(data.summary["error"]).splitlines()[0]))
    rows += [("last run went on without", lost.line()) for lost in lost_ranks_of(data.summary or {})]
    return rows


def _run_build(data: ExperimentData) -> str:
    """The emews of the experiment's latest launch or resume (an older record: the version it created it with)."""
    build = Build.from_record(data.info.get("emews"))
    return build.described if build is not None else str(data.info.get("emews_version", "?"))


def _best_text(data: ExperimentData, best: pd.Series | None) -> str:
    """The report's ``best`` row: the best evaluation, or of an ensemble its best point's mean."""
    if best is None:
        return "-"
    point = best_point_of(data)
    if point is None or point.stats.mean is None:
        return f"{number(best['objective'])} (task {int(best['id'])})"
    tasks = ", ".join(str(t) for t in point.task_ids)
    return f"{number(point.stats.mean)} (mean of {counted(point.stats.count, 'replicate')} of one point: tasks {tasks})"


def best_row(data: ExperimentData) -> pd.Series | None:
    ok = data.ok
    if ok.empty:
        return None
    return ok.loc[ok["loss"].idxmin()]


def top_k(data: ExperimentData, k: int = 10) -> pd.DataFrame:
    """The ``k`` best successful evaluations: id, objective, parameters, checkpoint (when kept), worker;
    of an ensemble, the ``k`` best points by their mean over the replicates (:func:`top_points`)."""
    points = points_of(data)
    if points is not None:
        return top_points(data, points, k)
    ok = data.ok.sort_values(["loss", "id"], kind="stable").head(k)
    table = pd.DataFrame({"task": ok["id"].astype(int), data.metric: ok["objective"]})
    table = table.join(data.params.loc[ok.index])
    if data.has_checkpoints:
        table["checkpoint"] = ok["checkpoint"].fillna("")
    table["worker"] = ok["rank"]
    table["seconds"] = (ok["finished"] - ok["started"]).round(3)
    return table.reset_index(drop=True)


def _missing_as_none(value: Any) -> Any:
    """A parameter's value as the point held it: a missing cell (NaN, ``pd.NA``: the point's null
    in a column of text or integers) as ``None``, printed ``null``; others as they are (1, not 1.0)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _point_of(data: ExperimentData, label: Any) -> dict[str, Any]:
    """The point of the row ``label`` as stored: only the keys it holds (``data.points``), else
    (data made without them) its ``params`` row with missing cells as ``None``."""
    if data.points:
        return dict(data.points[data.results.index.get_loc(label)])
    return _as_point(data.params.loc[[label]].to_dict("records")[0])


def _points_in_order(data: ExperimentData) -> list[dict[str, Any]]:
    """Every row's point (:func:`_point_of`), in ``data.results`` order, in one pass over ``params``."""
    if data.points:
        return [dict(point) for point in data.points]
    return [_as_point(row) for row in data.params.reindex(data.results.index).to_dict("records")]


def _as_point(row: dict[str, Any]) -> dict[str, Any]:
    return {name: _missing_as_none(v) for name, v in row.items()}


def totals(data: ExperimentData) -> Totals:
    """Counts by status and the best evaluation, as ``emews results`` prints them."""
    best = best_row(data)
    counts = {str(k): int(v) for k, v in data.results["status"].value_counts().items()}
    endings = Counter(data.endings.values())
    if best is None:
        return Totals(counts, None, endings=endings)
    ensemble_best = best_point_of(data)
    point = _point_of(data, best.name)
    return Totals(
        counts,
        Result(
            id=int(best["id"]),
            params=point,
            status=Status.OK,
            objective=float(best["objective"]),
            loss=float(best["loss"]),
        ),
        endings=endings,
        best_point=ensemble_best,
    )


def top_points(data: ExperimentData, points: list[PointResult], k: int) -> pd.DataFrame:
    """The ``k`` points of an ensemble with the best mean (as the optimizer, the best point and
    docs/results.md rank them; equal means: the first): their tasks, mean, spread, replicates
    that succeeded and failed, and the point's parameters."""
    scored = sorted(
        (p for p in points if p.stats.mean is not None),
        key=lambda p: (data.direction.loss(p.stats.mean or 0.0), p.task_ids[0]),
    )[:k]
    names = [name for name in data.params.columns if name != REPLICATE]
    return pd.DataFrame(
        [
            {
                "tasks": ", ".join(str(t) for t in p.task_ids),
                f"{data.metric} (mean)": p.stats.mean,
                "std": p.stats.std,
                "replicates": p.stats.count,
                "failed": p.stats.failed,
                **{name: p.point.get(name) for name in names},
            }
            for p in scored
        ]
    )


def best_point_of(data: ExperimentData) -> PointResult | None:
    """Of an ensemble (``replicates`` > 1), the point with the best mean over its replicates."""
    points = points_of(data)
    return None if points is None else best_point(points, data.direction)


def points_of(data: ExperimentData) -> list[PointResult] | None:
    """Of an ensemble (``replicates`` > 1), its points with their replicates' statistics; ``None``
    for a run without replicates."""
    if int(data.workflow.get("replicates") or 1) <= 1:
        return None
    res = data.results
    rows = zip(
        res["id"].astype(int),
        res["status"],
        res["objective"].where(res["loss"].notna(), None),
        _points_in_order(data),
        strict=True,
    )
    return group_results((i, s, None if pd.isna(v) else float(v), p) for i, s, v, p in rows)
