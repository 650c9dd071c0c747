"""Opening an experiment's store: the one place that picks the backend (SQLite, the experiment
directory's ``results.db``, for now), and ``evaluator.reports()``'s reader beside a live run."""

from __future__ import annotations

from pathlib import Path

from emews.core.results import StoredReport
from emews.store.base import Durability, Store
from emews.store.results_store import ResultsStore

#: the SQLite store's file in the experiment directory
STORE_FILE = "results.db"


def open_store(
    exp_dir: str | Path | None = None,
    *,
    location: str | None = None,
    readonly: bool = False,
    durability: Durability = "normal",
) -> Store:
    """The store of the experiment directory ``exp_dir``, or the one at ``location`` (a
    :attr:`Store.location`: a second connection to a store already open, for a reader thread or a
    child process). Opened for writing, the schema is created or migrated and checkpoint paths are
    kept relative to ``exp_dir``; ``readonly`` writes nothing (beside a live run, on a read-only copy).
    :class:`~emews.store.base.StoreUnreadable` when it cannot be opened."""
    if (exp_dir is None) == (location is None):
        raise TypeError("open_store takes an experiment directory or a location, one of them")
    path = Path(exp_dir) / STORE_FILE if exp_dir is not None else Path(str(location))
    return ResultsStore(path, durability=durability, readonly=readonly, root=path.parent)


def store_exists(exp_dir: str | Path) -> bool:
    """Whether the experiment has a store yet (none before its first run stored anything)."""
    return (Path(exp_dir) / STORE_FILE).exists()


class ReportReader:
    """``evaluator.reports()``: reads the reports on a read-only connection of its own (the
    optimizer thread's) to the store at ``location``, opened on first use."""

    def __init__(self, location: str) -> None:
        self._location = location
        self._store: Store | None = None

    def __call__(self, trial: int | None = None) -> list[StoredReport]:
        if self._store is None:
            self._store = open_store(location=self._location, readonly=True)
        return self._store.reports(trial)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
