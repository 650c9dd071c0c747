"""What both chaos harnesses record of a case (tests/chaos/test_kill_resume.py and
test_pool_kill_resume.py): with ``EMEWS_CHAOS_RECORD=FILE``, one JSON line per case appended to FILE,
the drawn case, what the harness saw, and its verdict (``held``, or the error that ended the case)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def recorded(case: object, seen: dict[str, Any]) -> Iterator[None]:
    """Run the case's body; whatever ends it, set ``seen["verdict"]`` (``held``, or the exception's
    type and first 500 characters, re-raised) and record ``case`` with ``seen`` (:func:`record`)."""
    try:
        yield
        seen["verdict"] = "held"
    except BaseException as exc:
        seen["verdict"] = f"{type(exc).__name__}: {str(exc)[:500]}"
        raise
    finally:
        record(case, seen)


def record(case: object, seen: dict[str, Any]) -> None:
    """Append ``case`` and ``seen`` as one JSON line to ``EMEWS_CHAOS_RECORD`` (nothing when unset)."""
    path = os.environ.get("EMEWS_CHAOS_RECORD")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"case": str(case), **seen}) + "\n")
