"""SQLite helpers that the results and the training tables share: whether a table exists, its columns, reads by
a list of keys in bounded slices, and the writes of the ``tasks`` table (each inside the caller's
transaction)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypeVar

from emews.core.jsoncodec import dumps_point
from emews.core.results import Task

T = TypeVar("T")

#: keys per ``IN (...)`` list: a statement's parameters are bounded (999 in SQLite before 3.32)
IN_LIST_SIZE = 500

# a task's row may be written twice (a task handed to another worker): the same facts, kept once
_INSERT_TASK = "INSERT OR IGNORE INTO tasks (id, params, seed, submitted, ranks) VALUES (?,?,?,?,?)"


def has_table(db: sqlite3.Connection, name: str) -> bool:
    """Whether the store has table ``name`` (an older store may lack the newer ones)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def column_names(db: sqlite3.Connection, table: str) -> list[str]:
    """The columns of ``table``, in order (none when there is no such table: an older store)."""
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def in_slices(keys: Sequence[T]) -> Iterator[tuple[list[T], str]]:
    """``keys`` in slices of at most :data:`IN_LIST_SIZE`, each with its ``?,?,...`` for an ``IN (...)``."""
    for start in range(0, len(keys), IN_LIST_SIZE):
        chunk = list(keys[start : start + IN_LIST_SIZE])
        yield chunk, ",".join("?" * len(chunk))


def record_tasks(db: sqlite3.Connection, tasks: Sequence[Task]) -> None:
    """Write the ``tasks`` rows of ``tasks`` (kept if there already), inside the caller's transaction."""
    db.executemany(_INSERT_TASK, [(t.id, dumps_point(t.params), t.seed, t.submitted, t.ranks) for t in tasks])


def set_task_params(db: sqlite3.Connection, task_id: int, params: Mapping[str, Any]) -> None:
    """The task now runs with ``params`` (a PBT exploit, a promotion's resource): what ``emews resume``
    runs it again with; inside the caller's transaction."""
    db.execute("UPDATE tasks SET params = ? WHERE id = ?", (dumps_point(params), task_id))
