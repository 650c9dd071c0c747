"""The store tests' PostgreSQL server, started once per session on loopback (tests/store/pgserver.py),
and the connections to one experiment's store that the queue, feeder and trial tests share. The
helpers of the end-to-end pool tests are in tests/store/pooled.py."""

from __future__ import annotations

import gc
import hashlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pgserver import PgServer, running_server

if TYPE_CHECKING:
    from emews.store.postgres import PostgresStore


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    with running_server("emews-pg-") as server:
        yield server


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A PostgreSQL server of the test's own, which it may stop and restart."""
    with running_server("emews-pg-own-") as server:
        yield server


@pytest.fixture
def schema(request: pytest.FixtureRequest) -> str:
    """An experiment schema of the test's own: its name, made unique across files by its node id."""
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    return f"s{digest}_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:40]


@pytest.fixture
def stores(pg_server: PgServer, schema: str, tmp_path: Path) -> Iterator[list[PostgresStore]]:
    """Three connections to one experiment's store (an optimizer and two pools), closed at the end."""
    from emews.store.postgres import PostgresStore

    opened = [PostgresStore(pg_server.url(), schema, root=tmp_path) for _ in range(3)]
    yield opened
    for store in opened:
        store.close()


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
