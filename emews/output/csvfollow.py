"""``results.csv`` kept up to date while a run goes on, so the end of a long run does not wait for it.

The optimizer rank starts a :class:`CsvFollower`: a child process (the one child toolkit,
:mod:`emews.processes.channel`) that reads the store read-only every
``interval`` seconds and appends the rows that continue the file (:class:`~emews.output.export.CsvFile`).
At the end :meth:`CsvFollower.finish` asks it to write the rest and put the file in place: the
same bytes as a full export, at the cost of the last rows only. If the child cannot start or
fails, :meth:`finish` says so and the caller exports the whole file itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from emews.config.experiment import CSV_FILE
from emews.core.evaluator import EvaluatorObserver
from emews.output.export import CsvFile, open_store
from emews.processes.channel import ChildExited, ChildProcess, Ready
from emews.store import Store

log = logging.getLogger("emews")


@dataclass(frozen=True)
class FollowConfig:
    exp_dir: Path
    param_names: tuple[str, ...]
    interval: float = 0.25
    settled_below: int = 0


@dataclass(frozen=True)
class Finish:
    """Write the rest and put the file in place; the reply is the row count."""


@dataclass(frozen=True)
class NeverFilled:
    """These task ids will have no result (cancelled before they started); no reply."""

    ids: tuple[int, ...]


class CsvFollower:
    """The optimizer rank's side: start at the beginning of a run, :meth:`finish` at its end."""

    def __init__(
        self, exp_dir: Path, param_names: Sequence[str], interval: float = 0.25, *, settled_below: int = 0
    ) -> None:
        """``settled_below``: the ids issued before this run (:meth:`CsvFile.follow`), known before
        this run issues any."""
        self._child: ChildProcess | None
        config = FollowConfig(Path(exp_dir), tuple(param_names), interval, settled_below)
        try:
            self._child = ChildProcess(__name__, config)
        except OSError as exc:
            log.warning("results.csv will be written at the end: the CSV child did not start (%s)", exc)
            self._child = None

    def skip(self, ids: Sequence[int]) -> None:
        """Tell the child that ``ids`` will have no result (cancelled): it writes the rows after them."""
        if self._child is None:
            return
        try:
            self._child.send(NeverFilled(tuple(ids)))
        except (ChildExited, OSError) as exc:  # finish() says so and the file is written at the end
            log.warning("the CSV child was not told of cancelled tasks: %s", exc)

    def finish(self) -> int | None:
        """Rows in the finished ``results.csv``, or ``None`` when the child did not write it."""
        if self._child is None:
            return None
        try:
            ready = self._child.wait_ready(None)
            reply = ready.error if ready is not None and ready.error else self._child.request(Finish())
        except (ChildExited, OSError) as exc:
            reply = f"the CSV child stopped: {exc}"
        finally:
            self._child.close(timeout=0)  # its work is done (or failed): no wait for its exit
        if not isinstance(reply, int):
            log.warning("results.csv is written at the end instead: %s", reply)
            return None
        return reply


class CancelsToCsv(EvaluatorObserver):
    """Tells the CSV child of the tasks the optimizer cancels (``evaluator.cancel``): their ids
    get no result, and the rows after them are written during the run, not left to its end."""

    def __init__(self, follower: CsvFollower) -> None:
        self._follower = follower

    def cancelled(self, ids: Sequence[int]) -> None:
        self._follower.skip(ids)


def cancelled_before(store: Store) -> set[int]:
    """The ids a pooled experiment's shared queue holds cancelled (``emews cancel --queued`` in an
    earlier run): they get no result (those this run cancels come by :class:`CancelsToCsv`)."""
    from emews.store.postgres import PostgresStore

    if not isinstance(store, PostgresStore):
        return set()
    from emews.store.pool_queue import PoolQueue  # PostgreSQL only

    queue = PoolQueue(store)
    return queue.cancelled() if queue.enabled() else set()


def serve(conn: Connection, config: FollowConfig) -> int:
    """The child's side: follow the store until :class:`Finish` (or the parent is gone)."""
    conn.send(Ready())
    csv_file = CsvFile(config.exp_dir / CSV_FILE, config.param_names)
    store: Store | None = None
    try:
        while True:
            if conn.poll(config.interval):
                message = conn.recv()
                if isinstance(message, Finish):
                    break
                if not isinstance(message, NeverFilled):
                    return 1
                csv_file.never_filled(message.ids)
            if store is None and (store := open_store(config.exp_dir)) is not None:
                csv_file.never_filled(cancelled_before(store))
            if store is not None:
                csv_file.follow(store, config.settled_below)
        store = store or open_store(config.exp_dir)
        rows = csv_file.finish(store) if store is not None else 0
    except (EOFError, OSError):
        return 1  # the parent is gone
    except Exception as exc:  # the parent writes the file itself
        conn.send(f"{type(exc).__name__}: {exc}")
        return 1
    finally:
        csv_file.discard()
        if store is not None:
            store.close()
    conn.send(rows)
    return 0
