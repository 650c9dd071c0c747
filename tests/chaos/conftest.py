"""The chaos tests' PostgreSQL server (the pooled harness, tests/chaos/test_pool_kill_resume.py): the
store tests' (tests/store/pgserver.py), started once per session on loopback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))  # pgserver, pooled
from pgserver import PgServer, running_server  # noqa: E402


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    with running_server("emews-pg-chaos-") as server:
        yield server
