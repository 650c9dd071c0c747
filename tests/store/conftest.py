"""The store tests' PostgreSQL server: started once per session on loopback (tests/store/pgserver.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgserver import PgServer, start_server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    folder = Path(tempfile.mkdtemp(prefix="emews-pg-")) / "pg"
    server = start_server(folder)
    try:
        yield server
    finally:
        server.stop()
