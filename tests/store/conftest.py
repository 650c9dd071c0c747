"""The store tests' PostgreSQL server: started once per session on loopback (tests/store/pgserver.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pgserver import PgServer, start_server


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    top = Path(tempfile.mkdtemp(prefix="emews-pg-"))
    server = start_server(top / "pg")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(top, ignore_errors=True)
