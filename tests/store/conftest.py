"""The store tests' PostgreSQL server: started once per session on loopback (tests/store/pgserver.py)."""

from __future__ import annotations

import gc
import shutil
import tempfile
import warnings
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


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A PostgreSQL server of the test's own, which it may stop and restart."""
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    top = Path(tempfile.mkdtemp(prefix="emews-pg-own-"))
    server = start_server(top / "pg")
    try:
        yield server
    finally:
        try:
            server.stop()
        except Exception:  # stopped by the test already
            pass
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_connection_left_open() -> Iterator[None]:
    """A store test that leaves a PostgreSQL connection open fails here, in its own teardown, not
    later in whichever test the garbage collector happens to run (psycopg's ResourceWarning once
    reached a test that records every warning, on the same xdist worker)."""
    yield
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    left = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning) and "psycopg" in str(w.message)]
    assert not left, f"the test left connections open (close its stores): {left}"
