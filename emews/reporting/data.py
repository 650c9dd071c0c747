"""An experiment's store read into frames: the one input of every plot and table of the report.

Reads only (the store is opened read-only, beside a live run if need be). Tables and columns
that later versions of the store add are detected, not assumed: a ``reports`` table of
per-step metrics (learning curves) and checkpoint paths (a ``checkpoint`` column of
``results`` or a ``checkpoints`` table) appear in the report when the store has them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from emews.core.errors import ConfigError
from emews.output.export import open_store, refuse_lost_store
from emews.reporting import runs
from emews.reporting.files import ExperimentFiles, read_files
from emews.store import RESULT_FIELDS, Store, StoreUnreadable

#: columns of the results frame, as the store names them
RESULT_COLUMNS = RESULT_FIELDS


@dataclass
class ExperimentData(ExperimentFiles):
    """Everything a report shows, read once from the experiment directory: its files, and its
    store read into frames."""

    #: one row per finished evaluation, ``RESULT_COLUMNS`` + ``attempt`` + ``team_ranks`` (the world
    #: ranks a multi-rank task's team held, team rank 0 first, or ``None``: ``rank`` alone or not
    #: recorded) + ``ranks`` (how many worker ranks it occupied: its team's, else :func:`task_sizes`)
    #: (+ ``checkpoint``), id order
    results: pd.DataFrame
    #: the parameters of each row of ``results`` (same index): the space's, in its order, then
    #: those the stored points set that the space does not list (a points file without a space)
    params: pd.DataFrame
    #: dispatched tasks that have no result yet (running, or left by a stopped run)
    unfinished: int
    #: per-step metrics (``trial``, ``step``, ``value``, ``time``) when the store keeps reports
    reports: pd.DataFrame | None
    #: trial -> how it ended (:class:`~emews.training.messages.Ending`), for trials with a successful result
    endings: dict[int, str] = field(default_factory=dict)
    #: PBT exploits in order (``trial``, ``step``, ``donor``, ``old_params``, ``new_params``): at its
    #: ``step``, ``trial`` cloned ``donor``'s checkpoint and trained on with ``new_params``
    lineage: pd.DataFrame | None = None
    #: each row's point as stored (same order as ``results``): only the keys it holds, where
    #: ``params`` has a column for every key of any point (a UPF's lines may differ in keys)
    points: list[dict[str, Any]] = field(default_factory=list)
    #: the worker ranks the tasks of ``unfinished`` hold (a multi-rank task's every rank)
    unfinished_ranks: int = 0

    @property
    def workers(self) -> int:
        """Worker ranks over the experiment's runs: the latest launch's or resume's, or as many as ran
        tasks when an earlier run had more."""
        seen = len(held_ranks(self.results))
        return max(self.run_workers, seen)

    @property
    def has_checkpoints(self) -> bool:
        return "checkpoint" in self.results.columns

    @property
    def ok(self) -> pd.DataFrame:
        """The successful evaluations."""
        return self.results[(self.results["status"] == "ok") & self.results["loss"].notna()]


def load(exp_dir: Path) -> ExperimentData:
    """Read ``exp_dir`` (ConfigError, exit 2, when it is not an experiment or its store is unreadable)."""
    files = read_files(exp_dir)
    exp_dir, workflow = files.exp_dir, files.workflow
    read = (files.exp_dir, files.workflow, files.site, files.info, files.summary)
    names = list(workflow.get("space", {}))
    store = open_store(exp_dir)
    if store is None:
        refuse_lost_store(exp_dir)  # no store, yet the summary records results: not "nothing yet"
        return ExperimentData(
            *read, _empty_results(), pd.DataFrame(columns=names), 0, None, unreadable=files.unreadable
        )
    try:
        with store:
            results, params, points = _results(store, names)
            unfinished = store.count_unfinished()
            busy = store.unfinished_ranks()
            results["ranks"] = team_sizes(results["team_ranks"], task_sizes(workflow, params))
            reports = _reports(store)
            endings = {t: e.value for t, e in store.report_endings().items()} if reports is not None else {}
            lineage = _lineage(store) if reports is not None else None
    except StoreUnreadable:
        raise
    except ValueError as exc:  # a row whose JSON does not decode
        raise ConfigError(f"cannot read the results store: {exc}", file=store.location) from None
    return ExperimentData(
        *read,
        results,
        params,
        unfinished,
        reports,
        endings,
        lineage,
        points,
        busy,
        unreadable=files.unreadable,
    )


def _results(store: Store, names: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]]]:
    table = store.report_results()
    frame = pd.DataFrame(
        table.rows,
        columns=[*RESULT_COLUMNS, "params", "attempt", "team_ranks", *(["checkpoint"] if table.checkpoints else [])],
    )
    points = list(frame.pop("params"))
    params = pd.DataFrame.from_records(points, columns=parameter_names(names, points), index=frame.index)
    for col in ("objective", "loss", "submitted", "started", "finished"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    return frame, params, points


def task_sizes(workflow: dict[str, Any], params: pd.DataFrame) -> pd.Series:
    """How many worker ranks each evaluation occupied (``task.ranks``): the workflow's number, or
    the value of the parameter it names; 1 where the size is not in the experiment's files (a
    size from a function or from the optimizer, a point without the parameter)."""
    spec = (workflow.get("task") or {}).get("ranks", 1)
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        return pd.Series(1, index=params.index, dtype=np.int64)
    if isinstance(spec, int):
        return pd.Series(max(spec, 1), index=params.index, dtype=np.int64)
    if spec not in params.columns:
        return pd.Series(1, index=params.index, dtype=np.int64)
    sizes = pd.to_numeric(params[spec], errors="coerce").fillna(1)
    return sizes.clip(lower=1).astype(np.int64)


def team_sizes(teams: pd.Series, sizes: pd.Series) -> pd.Series:
    """How many worker ranks each evaluation occupied: its recorded team's, else ``sizes``."""
    recorded = teams.map(lambda t: len(t) if isinstance(t, tuple) else 0).astype(np.int64)
    return recorded.where(recorded > 0, sizes).astype(np.int64)


def held_ranks(results: pd.DataFrame) -> set[int]:
    """Every worker rank that ran a task (:func:`emews.reporting.runs.held_ranks` of the frame)."""
    teams = results["team_ranks"] if "team_ranks" in results.columns else ()
    return runs.held_ranks(results["rank"].dropna(), (team if isinstance(team, tuple) else None for team in teams))


def parameter_names(space: list[str], points: list[dict[str, Any]]) -> list[str]:
    """The space's parameters, then those the stored points set that it does not list, in the order
    they are first seen (a sweep over a points file without a space: the ``p:`` columns)."""
    names = dict.fromkeys(space)
    for point in points:
        names.update(dict.fromkeys(k for k in point if k not in names))
    return list(names)


def _reports(store: Store) -> pd.DataFrame | None:
    """Per-step metrics as (trial, step, metrics, time), or ``None`` when the store holds none."""
    curves = store.report_curves()
    if curves is None:
        return None
    frame = pd.DataFrame(
        {"trial": [c.trial for c in curves], "step": [c.step for c in curves], "time": [c.time for c in curves]}
    )
    frame["metrics"] = [c.metrics for c in curves]
    return frame


def _lineage(store: Store) -> pd.DataFrame | None:
    """The PBT exploits of an emews store's training tables, ``None`` when there were none."""
    rows = store.lineage()
    if not rows:
        return None
    return pd.DataFrame(rows, columns=["trial", "step", "donor", "old_params", "new_params"])


def _empty_results() -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            c: pd.Series(dtype=float if c in ("objective", "loss", "submitted", "started", "finished") else object)
            for c in RESULT_COLUMNS
        }
    )
    frame["attempt"] = pd.Series(dtype=np.int64)
    frame["team_ranks"] = pd.Series(dtype=object)
    frame["ranks"] = pd.Series(dtype=np.int64)
    return frame
