"""The rows of ``results.csv``: its header and its lines, straight from the store to a CSV writer.

Shared by the one-process export (:class:`emews.output.export.CsvFile`) and the child that writes the
upper part of a large file beside it (:mod:`emews.output.csvpart`), so both write the same bytes.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emews.core.errors import ConfigError
from emews.core.jsoncodec import loads_metrics, loads_point
from emews.core.textfiles import write_atomic
from emews.store import Store, TrialState

#: training trials' columns: the last step reported, the last answer to it other than continue, how
#: a trial with a successful result ended (:class:`~emews.training.messages.Ending`), the PBT clones it was made from
TRIAL_COLUMNS = ("t:step", "t:decision", "t:ended", "t:cloned")

#: how the CSV writes a lone surrogate (a non-UTF-8 file name a categorical lists, as Python decodes
#: it): as its ``\\udcXX`` escape, as the store's JSON and the errors hold it (utf8_text)
SURROGATES = "backslashreplace"
#: values the CSV writer takes as they are
_PLAIN = frozenset((int, float, str, bool))
#: rows handed to the CSV writer at once
_CHUNK = 4096


def csv_cell(value: object) -> object:
    """A parameter or metric value as a CSV cell: ``None`` empty, lists and dicts as JSON."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return value


@dataclass(frozen=True)
class Columns:
    """What decides a CSV's columns: the parameters, the metrics, and whether tasks reported training."""

    params: tuple[str, ...]
    metrics: tuple[str, ...]
    trained: bool

    @classmethod
    def of(cls, store: Store, param_names: Sequence[str]) -> Columns:
        return cls(tuple(param_names), tuple(store.metric_names()), store.has_reports())

    def header(self) -> list[str]:
        return (
            ["id", "status", "objective"]
            + [f"p:{p}" for p in self.params]
            + [f"m:{m}" for m in self.metrics]
            + (list(TRIAL_COLUMNS) if self.trained else [])
            + ["error", "rank", "host", "submitted", "started", "finished", "seed"]
        )


@dataclass
class Written:
    """How far a :func:`write_rows` call got: rows written and the id the next row would need."""

    rows: int
    next_id: int


def write_csv_file(path: Path, rows: Iterable[Sequence[object]]) -> None:
    """Write ``rows`` (the header first) as the CSV file ``path``, whole: under a temp name of this
    process and thread, then renamed (commands writing it at once each put a whole file in place);
    a full disk or quota is a :class:`ConfigError` naming the file."""
    text = io.StringIO(newline="")
    csv.writer(text).writerows(rows)
    try:
        write_atomic(path, [text.getvalue().encode("utf-8", SURROGATES)])
    except OSError as exc:
        raise ConfigError(f"cannot write the CSV: {exc.strerror or exc}", file=str(path)) from None


def write_rows(
    store: Store,
    writer: Any,
    columns: Columns,
    first_id: int,
    end_id: int | None = None,
    *,
    contiguous: bool = False,
    missing: object = "",
) -> Written:
    """Write the rows with ``first_id <= id < end_id`` (no end: all) in id order.

    ``contiguous``: stop at the first gap in the ids (a lower id may still be running) or at a
    metric not in ``columns`` (the file must be started again with it in its header).
    ``missing``: the cell of a null or absent parameter or metric (the CSV's empty cell, which an
    empty string also is; ``None`` for a frame, which keeps the two apart).
    """
    params, metrics = columns.params, columns.metrics
    known = set(metrics)
    empty: dict[str, Any] = {}
    load_metrics, load_point, plain = loads_metrics, loads_point, _PLAIN
    states = store.trial_states(first_id) if columns.trained else None
    done = Written(0, first_id)
    out: list[list[Any]] = []
    rows = store.csv_rows(first_id, end_id)
    try:
        for id_, status, objective, p_json, m_json, *tail in rows:
            if contiguous and id_ != done.next_id:
                break
            m = load_metrics(m_json) if m_json != "{}" else empty
            if contiguous and not m.keys() <= known:
                break
            p = load_point(p_json)
            out.append(
                [
                    id_,
                    status,
                    objective,
                    *[v if type(v) in plain else missing if v is None else csv_cell(v) for v in map(p.get, params)],
                    *[v if type(v) in plain else missing if v is None else csv_cell(v) for v in map(m.get, metrics)],
                    *(() if states is None else _trial_cells(states.get(id_), status)),
                    *tail,
                ]
            )
            done.next_id = id_ + 1
            if len(out) == _CHUNK:
                writer.writerows(out)
                done.rows += len(out)
                out = []
    finally:
        rows.close()
    writer.writerows(out)
    done.rows += len(out)
    return done


def _trial_cells(state: TrialState | None, status: str) -> tuple[Any, str, str, str]:
    if state is None:
        return "", "", "", ""
    ending = state.ending(status)
    return state.step, state.action, "" if ending is None else ending.value, state.cloned
