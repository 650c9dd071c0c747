"""An experiment's results and training reports as typed pandas DataFrames (``emews.load``).

``results_frame`` has the columns of ``results.csv``, in its order and with its values, each with
its own type: ``id`` and ``rank`` integers, ``objective`` a float, ``p:``/``m:`` columns by what they
hold (an ``int`` parameter is ``int64``, or pandas' nullable ``Int64`` when some points lack it: an
integer stays an integer, never ``16.0``), the three times parsed (UTC), ``""`` cells missing
(``None``), text in pandas' text type. ``reports_frame`` has one row per trial and step (the last report of a step that was
reported again, after a retry or a resume), one column per metric. Both read the store only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from emews.output.csvrows import Columns, write_rows
from emews.output.export import stored_param_names
from emews.store import Store

#: the columns of ``results.csv`` that hold times (ISO 8601, UTC)
TIME_COLUMNS = ("submitted", "started", "finished")
#: its columns that hold text, ``""`` when there is none
TEXT_COLUMNS = ("status", "error", "host", "t:decision", "t:ended", "t:cloned")


class _Rows:
    """A CSV writer's ``writerows`` that keeps the rows."""

    def __init__(self) -> None:
        self.rows: list[list[Any]] = []

    def writerows(self, rows: list[list[Any]]) -> None:
        self.rows.extend(rows)


def results_frame(store: Store, space: Mapping[str, Any]) -> pd.DataFrame:
    """Every finished evaluation, as ``results.csv`` holds it, typed (``space``: the workflow's, by name)."""
    columns = Columns.of(store, stored_param_names(store, list(space)))
    collected = _Rows()
    write_rows(store, collected, columns, 0, missing=None)  # a null stays None, an empty string ""
    header = columns.header()
    cells = list(zip(*collected.rows, strict=True)) if collected.rows else [() for _ in header]
    frame = pd.DataFrame({name: _column(name, list(values), space) for name, values in zip(header, cells, strict=True)})
    return frame.reset_index(drop=True)


def _column(name: str, values: list[Any], space: Mapping[str, Any]) -> pd.Series:
    if name in TIME_COLUMNS:
        return pd.to_datetime(pd.Series([v or None for v in values], dtype=object), utc=True, format="ISO8601")
    if name in TEXT_COLUMNS:
        return pd.Series([None if v == "" else v for v in values], dtype=None if any(values) else object)
    if name in ("id", "rank", "t:step", "seed"):
        return typed([None if v == "" else v for v in values])
    if name == "objective":
        return typed(values, float)
    spec = space.get(name[2:]) if name.startswith("p:") else None
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    if name.startswith(("p:", "m:")):  # None where null or absent: an empty string is a value
        return typed(values, float if kind == "float" else None)
    return typed([None if v == "" else v for v in values], float if kind == "float" else None)


def typed(values: Sequence[Any], kind: type | None = None) -> pd.Series:
    """``values`` as a Series of their own type: ``int64`` (``Int64`` with gaps), ``float64``,
    ``bool`` (``boolean`` with gaps), else objects (text, lists). ``kind=float``: a float column
    whatever the values (a float parameter the points wrote as ``1``)."""
    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present)
    if kind is float and numbers:
        return pd.Series([math.nan if v is None else float(v) for v in values], dtype="float64")
    if present and all(isinstance(v, bool) for v in present):
        return pd.Series(values, dtype="boolean" if len(present) < len(values) else bool)
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        try:
            return pd.Series(
                [None if v is None or v != v else v for v in values],
                dtype="Int64" if len(present) < len(values) else "int64",
            )
        except OverflowError:  # beyond 64 bits: Python's integers, as objects
            return pd.Series(values, dtype=object)
    if present and numbers:
        return pd.Series([math.nan if v is None else float(v) for v in values], dtype="float64")
    if not present and kind is float:
        return pd.Series([math.nan] * len(values), dtype="float64")
    text = present and all(isinstance(v, str) for v in present)
    return pd.Series(values, dtype=None if text else object)  # text as pandas' own text type


def reports_frame(store: Store) -> pd.DataFrame:
    """Training reports: ``trial``, ``step``, ``time`` (UTC), then one column per metric (in the
    order metrics first appear); empty, with those three columns, when no task reported."""
    last: dict[tuple[int, int], Any] = {}
    for report in store.reports():  # in arrival order: a step reported again keeps its last report
        last[(report.trial, report.step)] = report
    rows = [last[key] for key in sorted(last)]
    names: dict[str, None] = {}
    for report in rows:
        names.update(dict.fromkeys(report.metrics))
    frame = pd.DataFrame(
        {
            "trial": typed([r.trial for r in rows]),
            "step": typed([r.step for r in rows]),
            "time": pd.to_datetime(pd.Series([r.time for r in rows], dtype="float64"), unit="s", utc=True),
        }
    )
    for metric in names:
        frame[metric] = typed([r.metrics.get(metric) for r in rows])
    if frame.empty:
        frame = frame.astype({"trial": "int64", "step": "int64"})
    return frame
