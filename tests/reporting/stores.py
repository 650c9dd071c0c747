"""Helpers of the report tests: reading a live store from outside, the faulty objective's modes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

#: every way an evaluation can end (tests/objectives/faulty.py)
MODES = ["ok", "dict", "context", "raise", "nan", "segfault", "oom", "kill", "hang"]


def count(exp: Path, sql: str) -> int:
    """``sql``'s single number from the experiment's store, read-only (0 before the store exists)."""
    try:
        with sqlite3.connect(f"file:{exp / 'results.db'}?mode=ro", uri=True) as db:
            return db.execute(sql).fetchone()[0]
    except sqlite3.Error:
        return 0
