"""An experiment's store read into frames: the one input of every plot, table and status line.

Reads only (the store is opened read-only, beside a live run if need be). Tables and columns
that later versions of the store add are detected, not assumed: a ``reports`` table of
per-step metrics (learning curves) and checkpoint paths (a ``checkpoint`` column of
``results`` or a ``checkpoints`` table) appear in the report when the store has them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from emews.core.direction import Direction
from emews.core.errors import ConfigError
from emews.config.experiment import INFO_FILE, SITE_FILE, SUMMARY_FILE, read_workflow, require_experiment
from emews.core.jsoncodec import loads_point
from emews.output.export import open_store
from emews.store.results_store import ResultsStore
from emews.store.trial_store import TrialStore
from emews.config.yamlio import load_mapping

#: columns of the results frame, as the store names them
RESULT_COLUMNS = ("id", "status", "objective", "loss", "error", "rank", "host", "submitted", "started",
                  "finished")
#: names a ``reports`` table may give its trial column, in order of preference
TRIAL_COLUMNS = ("task_id", "trial", "trial_id", "id")


@dataclass
class ExperimentData:
    """Everything a report shows, read once from the experiment directory."""

    exp_dir: Path
    workflow: dict[str, Any]
    site: dict[str, Any]
    info: dict[str, Any]
    summary: dict[str, Any] | None
    #: one row per finished evaluation, ``RESULT_COLUMNS`` + ``attempt`` (+ ``checkpoint``), id order
    results: pd.DataFrame
    #: the parameters of each row of ``results`` (same index), in space order
    params: pd.DataFrame
    #: dispatched tasks that have no result yet (running, or left by a stopped run)
    unfinished: int
    #: per-step metrics (``trial``, ``step``, ``value``, ``time``) when the store keeps reports
    reports: pd.DataFrame | None
    #: trial -> how it ended (:class:`~emews.training.messages.Ending`), for trials with a successful result
    endings: dict[int, str] = field(default_factory=dict)

    @property
    def space(self) -> dict[str, dict[str, Any]]:
        return self.workflow.get("space", {})

    @property
    def budget(self) -> int | None:
        return self.workflow.get("budget", {}).get("evaluations")

    @property
    def direction(self) -> Direction:
        return Direction.of(self.workflow.get("objective", {}).get("direction"))

    @property
    def metric(self) -> str:
        return self.workflow.get("objective", {}).get("metric") or "value"

    @property
    def workers(self) -> int:
        """Worker ranks: as launched, or as many as ran tasks when a resume used more."""
        seen = int(self.results["rank"].nunique()) if len(self.results) else 0
        return max(int(self.info.get("workers") or 0), seen, 1)

    @property
    def has_checkpoints(self) -> bool:
        return "checkpoint" in self.results.columns

    @property
    def ok(self) -> pd.DataFrame:
        """The successful evaluations."""
        return self.results[(self.results["status"] == "ok") & self.results["loss"].notna()]


def load(exp_dir: Path) -> ExperimentData:
    """Read ``exp_dir`` (ConfigError, exit 2, when it is not an experiment or its store is unreadable)."""
    exp_dir = require_experiment(Path(exp_dir).absolute())
    workflow = read_workflow(exp_dir)
    site = load_mapping(exp_dir / SITE_FILE) if (exp_dir / SITE_FILE).is_file() else {}
    info = _json_file(exp_dir / INFO_FILE) or {}
    summary = _json_file(exp_dir / SUMMARY_FILE)
    names = list(workflow.get("space", {}))
    store = open_store(exp_dir)
    if store is None:
        return ExperimentData(exp_dir, workflow, site, info, summary, _empty_results(), pd.DataFrame(columns=names),
                              0, None)
    try:
        with store:
            results, params = _results(store, names)
            unfinished = _count_unfinished(store)
            reports = _reports(store)
            endings = _endings(store) if reports is not None else {}
    except (sqlite3.Error, ValueError) as exc:  # ValueError: a row whose JSON does not decode
        raise ConfigError(f"cannot read the results store: {exc}", file=store.path) from None
    return ExperimentData(exp_dir, workflow, site, info, summary, results, params, unfinished, reports, endings)


def tables(store: ResultsStore) -> set[str]:
    return {name for (name,) in store.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def columns(store: ResultsStore, table: str) -> list[str]:
    return [row[1] for row in store.execute(f"PRAGMA table_info({table})")]


def _results(store: ResultsStore, names: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    present = tables(store)
    attempt, tasks_join = ("COALESCE(t.attempt, 0)", "LEFT JOIN tasks t ON t.id = r.id") \
        if "tasks" in present else ("0", "")
    checkpoint = _checkpoint_source(store, present)
    select, checkpoint_join = (f", {checkpoint[0]}", checkpoint[1]) if checkpoint else ("", "")
    cols = ", ".join(f"r.{c}" for c in RESULT_COLUMNS)
    rows = store.execute(f"SELECT {cols}, r.params, {attempt}{select} FROM results r {tasks_join} "
                         f"{checkpoint_join} ORDER BY r.id").fetchall()
    frame = pd.DataFrame(rows, columns=[*RESULT_COLUMNS, "params", "attempt", *(["checkpoint"] if checkpoint else [])])
    params = pd.DataFrame.from_records([loads_point(p) for p in frame.pop("params")], columns=names, index=frame.index)
    for col in ("objective", "loss", "submitted", "started", "finished"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype(float)
    return frame, params


def _checkpoint_source(store: ResultsStore, present: set[str]) -> tuple[str, str] | None:
    """(select expression, join) for each result's checkpoint path: a ``checkpoint`` column of
    ``results``, or the latest (durable, when states are kept) row of a ``checkpoints`` table."""
    if "checkpoint" in columns(store, "results"):
        return "r.checkpoint", ""
    if "checkpoints" not in present:
        return None
    cols = columns(store, "checkpoints")
    trial = next((c for c in TRIAL_COLUMNS if c in cols), None)
    if trial is None or "path" not in cols:
        return None
    durable = "WHERE state = 'durable'" if "state" in cols else ""
    if store.execute(f"SELECT 1 FROM checkpoints {durable} LIMIT 1").fetchone() is None:
        return None  # the table of a store whose tasks kept no checkpoint
    latest = "step" if "step" in cols else "rowid"
    return "c.path", (f"LEFT JOIN (SELECT {trial} AS trial, path, MAX({latest}) FROM checkpoints {durable} "
                      f"GROUP BY {trial}) c ON c.trial = r.id")


def _count_unfinished(store: ResultsStore) -> int:
    if "tasks" not in tables(store):
        return 0
    return store.execute("SELECT COUNT(*) FROM tasks t LEFT JOIN results r ON r.id = t.id "
                         "WHERE r.id IS NULL").fetchone()[0]


def _reports(store: ResultsStore) -> pd.DataFrame | None:
    """Per-step metrics as (trial, step, metrics, time), or ``None`` when the store holds none."""
    if "reports" not in tables(store):
        return None
    cols = columns(store, "reports")
    trial = next((c for c in TRIAL_COLUMNS if c in cols), None)
    if trial is None or "step" not in cols or store.execute("SELECT 1 FROM reports LIMIT 1").fetchone() is None:
        return None  # no table, or the table of a store whose tasks reported nothing
    when = "time" if "time" in cols else "NULL"
    if "metrics" in cols:  # one JSON object per report
        rows = store.execute(f"SELECT {trial}, step, metrics, {when} FROM reports ORDER BY {trial}, step").fetchall()
        decode = json.JSONDecoder().decode
        metrics = [decode(m) if isinstance(m, str) else {} for _, _, m, _ in rows]
    else:  # one numeric column per metric
        names = [c for c in cols if c not in (trial, "step", "time", "rowid")]
        rows = store.execute(f"SELECT {trial}, step, {', '.join(names) or 'NULL'}, {when} FROM reports "
                             f"ORDER BY {trial}, step").fetchall()
        metrics = [dict(zip(names, r[2:-1])) for r in rows]
        rows = [(r[0], r[1], None, r[-1]) for r in rows]
    frame = pd.DataFrame({"trial": [r[0] for r in rows], "step": [r[1] for r in rows],
                          "time": [r[3] for r in rows]})
    frame["metrics"] = metrics
    return frame


def _endings(store: ResultsStore) -> dict[int, str]:
    """How each trained trial with a successful result ended, when the reports are emews' own."""
    if not {"trial", "step", "metrics"} <= set(columns(store, "reports")):
        return {}
    return {t: e.value for t, e in TrialStore(store.connection, readonly=True).endings().items()}


def _empty_results() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype=float if c in ("objective", "loss", "submitted", "started",
                                                              "finished") else object) for c in RESULT_COLUMNS})
    frame["attempt"] = pd.Series(dtype=np.int64)
    return frame


def _json_file(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
