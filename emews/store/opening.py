"""Opening an experiment's store: the one place that picks the backend, and
``evaluator.reports()``'s reader beside a live run.

The backend is what the experiment recorded when it was created (``experiment.json``'s
``store``: a PostgreSQL URL and the experiment's schema there, see :mod:`emews.store.postgres`);
without it, SQLite in the experiment directory's ``results.db``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from emews.core.build import Build
from emews.core.errors import ConfigError
from emews.core.results import StoredReport, TrialEnd
from emews.store.base import Durability, Store, StoreNewer, StoreUnreadable
from emews.store.postgres_url import URL_ALLOWED, URL_VARIABLE, check_url, chosen_url, is_url, new_schema
from emews.store.results_store import ResultsStore

#: the SQLite store's file in the experiment directory
STORE_FILE = "results.db"
#: the experiment's facts (emews.config.experiment.INFO_FILE), where a PostgreSQL store is recorded
_INFO_FILE = "experiment.json"


def _recorded(exp_dir: str | Path) -> dict[str, Any]:
    """The experiment's ``experiment.json`` (``{}``: none, or not one emews can read)."""
    try:
        info: Any = json.loads((Path(exp_dir) / _INFO_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def recorded_store(exp_dir: str | Path) -> dict[str, str] | None:
    """The PostgreSQL store the experiment recorded (``{"url": ..., "schema": ...}``), or ``None``
    (SQLite in the experiment directory)."""
    store = _recorded(exp_dir).get("store")
    return store if isinstance(store, dict) and store.get("url") else None


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
    recorded = recorded_store(exp_dir) if exp_dir is not None else None
    if recorded is not None or (location is not None and is_url(location)):
        from emews.store.postgres import PostgresStore  # psycopg only where PostgreSQL is used

        if recorded is not None:
            url, schema = recorded["url"], recorded["schema"]
        else:
            url, _, schema = str(location).rpartition("#")
        root = Path(exp_dir) if exp_dir is not None else None
        try:
            return PostgresStore(url, schema, readonly=readonly, root=root, durability=durability)
        except StoreUnreadable as exc:  # named as the experiment recorded it
            if root is None or exc.file is not None:
                raise
            raise type(exc)(exc.message, file=root / _INFO_FILE, key=exc.key, allowed=exc.allowed) from None
    path = Path(exp_dir) / STORE_FILE if exp_dir is not None else Path(str(location))
    try:
        return ResultsStore(path, durability=durability, readonly=readonly, root=path.parent)
    except StoreNewer as exc:  # the file keeps no build: the experiment's latest launch or resume wrote it
        made_by = Build.from_record(_recorded(exp_dir).get("emews")) if exp_dir is not None else None
        raise StoreNewer(exc.found, exc.readable, file=path, made_by=made_by) from None


def store_exists(exp_dir: str | Path) -> bool:
    """Whether the experiment has a store yet (none before its first run stored anything; a
    PostgreSQL store is created when the experiment is)."""
    return recorded_store(exp_dir) is not None or (Path(exp_dir) / STORE_FILE).exists()


class ReportReader:
    """``evaluator.reports()``: reads the reports on a read-only connection of its own (the
    optimizer thread's) to the store at ``location``, opened on first use."""

    def __init__(self, location: str) -> None:
        self._location = location
        self._store: Store | None = None

    def __call__(self, trial: int | None = None) -> list[StoredReport]:
        return self._opened().reports(trial)

    def stopped_early(self, trial: int) -> bool:
        """Whether ``trial``'s scheduler ended it early (:meth:`Store.stopped_early`)."""
        return self._opened().stopped_early(trial)

    def first_end(self, trial: int) -> TrialEnd | None:
        """The report ``trial``'s trial scheduler ended it at (:meth:`Store.first_end`)."""
        return self._opened().first_end(trial)

    def _opened(self) -> Store:
        if self._store is None:
            self._store = open_store(location=self._location, readonly=True)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def new_store(workflow_url: str | None, name: str) -> dict[str, str] | None:
    """The store of a new experiment called ``name``, checked before anything is created or
    submitted: ``{"url": ..., "schema": ...}`` (a PostgreSQL database that answered, the
    experiment's new schema in it) for ``experiment.json``, or ``None`` (SQLite). A bad
    ``EMEWS_STORE_URL`` or an unreachable server is a :class:`~emews.core.errors.ConfigError`."""
    url = chosen_url(workflow_url)
    if url is None:
        return None
    if workflow_url is None:
        try:
            check_url(url)
        except ValueError as exc:
            raise ConfigError(str(exc), key=URL_VARIABLE, allowed=URL_ALLOWED) from None
    from emews.store.base import StoreUnreadable
    from emews.store.postgres import connect

    try:
        connect(url).close()
    except StoreUnreadable as exc:
        if workflow_url is not None:
            raise
        raise StoreUnreadable(exc.message, key=URL_VARIABLE) from None  # the URL came from there, not the workflow
    return {"url": url, "schema": new_schema(name)}


def store_place(exp_dir: str | Path) -> str:
    """Where the experiment's results are stored, for a person: the SQLite file, or the
    PostgreSQL URL and schema."""
    recorded = recorded_store(exp_dir)
    if recorded is None:
        return str(Path(exp_dir) / STORE_FILE)
    return f"{recorded['url']} (schema {recorded.get('schema')})"
