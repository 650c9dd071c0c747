"""The experiment's durable store: results, tasks and the training tables (reports, checkpoints,
lineage), every SQL statement in one place, behind one interface (:class:`Store`) that a backend
implements (SQLite: :class:`~emews.store.results_store.ResultsStore`). Open one with :func:`open_store`."""

from emews.store.base import (
    DELETED,
    DURABLE,
    RESULT_FIELDS,
    STAGED,
    CheckpointRow,
    CsvRow,
    CurvePoint,
    Durability,
    ResultRow,
    ResultTable,
    RunRow,
    Store,
    StoreCorrupt,
    StoreIncompatible,
    StoreUnreadable,
    TimedResultRow,
    TrialState,
)
from emews.store.opening import STORE_FILE, ReportReader, open_store, store_exists

__all__ = [
    "DELETED",
    "DURABLE",
    "RESULT_FIELDS",
    "STAGED",
    "STORE_FILE",
    "CheckpointRow",
    "CsvRow",
    "CurvePoint",
    "Durability",
    "ReportReader",
    "ResultRow",
    "ResultTable",
    "RunRow",
    "Store",
    "StoreCorrupt",
    "StoreIncompatible",
    "StoreUnreadable",
    "TimedResultRow",
    "TrialState",
    "open_store",
    "store_exists",
]
