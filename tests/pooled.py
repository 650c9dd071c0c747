"""What the tests of pooled experiments share: a workflow of the gated objective
(``tests/objectives/marked.py``: each task marks its start, then waits for the gate file) on a
PostgreSQL store, the command that runs it with the gate and the marks in the test's folder, and
the store's rows read while the job may still be making it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emews.store import open_store
from testutil import TESTS, EmewsCommand, write_workflow

MARKED = TESTS / "objectives" / "marked.py"


def gated_workflow(folder: Path, url: str | None, evaluations: int, *, store: dict[str, Any] | None = None,
                   **sections: Any) -> Path:
    """The gated objective, inline, ``evaluations`` of them, on the store at ``url`` (``store``:
    more of its keys; ``url`` ``None``: SQLite)."""
    return write_workflow(
        folder, objective={"module": str(MARKED), "function": "run"}, budget={"evaluations": evaluations},
        task={"timeout": 120, "isolation": "inline"},
        **({"store": {"url": url, **(store or {})}} if url else {}), **sections)


def gated_command(folder: Path) -> EmewsCommand:
    """An ``emews`` command whose tasks mark ``folder/marks/<id>`` and wait for ``folder/open``."""
    cmd = EmewsCommand(folder)
    (folder / "marks").mkdir(exist_ok=True)
    cmd.env.update(GATE_FILE=str(folder / "open"), MARK_DIR=str(folder / "marks"))
    return cmd


def rows(exp: Path, sql: str) -> list[tuple]:
    """``sql``'s rows on the experiment's store."""
    with open_store(exp, readonly=True) as store:
        return [tuple(r) for r in store.connection.execute(sql).fetchall()]  # type: ignore[attr-defined]


def seen(exp: Path, sql: str) -> list[tuple]:
    """:func:`rows` while the job may still be making the store: nothing until it is there."""
    try:
        return rows(exp, sql)
    except Exception:  # the experiment's schema or tables are not made yet
        return []
