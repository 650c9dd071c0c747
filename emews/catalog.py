"""The checkpoints an experiment kept, for a later job: list them, load the best K.

    from emews.catalog import load_best
    for row, state in load_best("experiments/asha-001", k=5):   # UQ ensemble, fine-tuning
        ...

``emews checkpoints DIR`` prints the same list. Only durable checkpoints are listed, and each
is verified when loaded (a corrupt file raises :class:`~emews.checkpoints.CorruptCheckpoint`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from emews.checkpoints import read_checkpoint
from emews.report import open_store
from emews.runtime.trial_store import DURABLE, CheckpointRow, TrialStore


def list_checkpoints(exp_dir: str | Path, best: int | None = None) -> list[CheckpointRow]:
    """The durable checkpoints of an experiment, by trial and step (``best``: the best that many,
    best first, by the scheduler's metric)."""
    store = open_store(Path(exp_dir))
    if store is None:
        return []
    try:
        rows = TrialStore(store.connection, readonly=True, root=Path(exp_dir)).checkpoints((DURABLE,)) \
            if _has_checkpoints(store.connection) else []
    finally:
        store.close()
    if best is None:
        return rows
    return sorted(rows, key=lambda r: (math.inf if r.loss is None else r.loss, r.id))[:best]


def load_best(exp_dir: str | Path, k: int = 1, extract_to: Path | None = None) -> list[tuple[CheckpointRow, Any]]:
    """The ``k`` best checkpoints of an experiment with what they hold, best first."""
    return [(row, read_checkpoint(row.path, extract_to)) for row in list_checkpoints(exp_dir, best=k)]


def format_table(rows: list[CheckpointRow]) -> str:
    """``trial step metric size path`` lines, as ``emews checkpoints`` prints them."""
    lines = [f"{'trial':>6} {'step':>6} {'metric':>12} {'size':>10}  path"]
    for r in rows:
        metric = "" if r.metric is None else f"{r.metric:.6g}"
        lines.append(f"{r.trial:>6} {r.step:>6} {metric:>12} {_size(r.size):>10}  {r.path}")
    return "\n".join(lines)


def _size(size: int | None) -> str:
    if size is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(size)


def _has_checkpoints(db: Any) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = 'checkpoints'").fetchone() is not None
