"""The upper part of a large ``results.csv``, written by a child process on a second core.

A CSV of 10^5 rows takes seconds to write, all of it on one core: at the end of a run, when
the workers wait for rank 0, and in ``emews results``. :class:`CsvPart` starts a child (the one
child toolkit, :mod:`emews.processes.channel`) that writes the rows from an id on into a
private file beside the CSV, while the caller writes the rows below it; :meth:`CsvPart.append_to`
then adds the child's rows to the caller's file. The bytes are those of a one-process export.
If the child cannot start or fails, :meth:`CsvPart.append_to` returns ``None`` and the caller
writes those rows itself.
"""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO

from emews.output.csvrows import SURROGATES, Columns, write_rows
from emews.processes.channel import ChildExited, ChildProcess, Ready
from emews.store import Store, open_store


@dataclass(frozen=True)
class PartConfig:
    store: str  # the store's location (Store.location)
    folder: Path
    columns: Columns
    first_id: int


@dataclass(frozen=True)
class PartWritten:
    """The child's reply: its rows are in ``path``."""

    path: str
    rows: int


class CsvPart:
    """The parent's side: start the child at once, :meth:`append_to` once the rows below are written."""

    def __init__(self, store: Store, folder: Path, columns: Columns, first_id: int) -> None:
        self.first_id = first_id
        self._child: ChildProcess | None
        try:
            self._child = ChildProcess(__name__, PartConfig(store.location, folder, columns, first_id))
        except OSError:
            self._child = None

    def append_to(self, fh: IO[str]) -> int | None:
        """Append the child's rows to ``fh`` (text, flushed here); their count, or ``None`` when
        the child wrote nothing usable (the caller writes the rows from ``first_id`` itself)."""
        if self._child is None:
            return None
        reply: object = None
        try:
            ready = self._child.wait_ready(None)
            if ready is not None and not ready.error:
                reply = self._child.receive()
        except (ChildExited, OSError):
            reply = None
        finally:
            self._child.close(timeout=0)
        if not isinstance(reply, PartWritten):
            return None
        try:
            fh.flush()
            with open(reply.path, "rb") as part:
                shutil.copyfileobj(part, fh.buffer, 1 << 20)  # type: ignore[attr-defined]
            fh.flush()
        finally:
            Path(reply.path).unlink(missing_ok=True)
        return reply.rows


def serve(conn: Connection, config: PartConfig) -> int:
    """The child's side: write the rows from ``first_id`` on into a private file and say where."""
    conn.send(Ready())
    path: str | None = None
    try:
        fd, path = tempfile.mkstemp(dir=config.folder, prefix=".results.csv.", suffix=".part")
        with (
            os.fdopen(fd, "w", newline="", encoding="utf-8", errors=SURROGATES) as fh,
            open_store(location=config.store, readonly=True) as store,
        ):
            written = write_rows(store, csv.writer(fh), config.columns, config.first_id)
        conn.send(PartWritten(path, written.rows))
        path = None  # the parent's now
    except Exception as exc:  # the parent writes these rows itself
        try:
            conn.send(f"{type(exc).__name__}: {exc}")
        except OSError:
            pass
        return 1
    finally:
        if path is not None:
            Path(path).unlink(missing_ok=True)
    return 0
