"""The suite's PostgreSQL helper (tests/store/pgserver.py) under concurrent tests: a port picked
free can be taken by another test's server before this one binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from pgserver import start_server

from testutil import closed_port, free_ports


def test_a_server_whose_port_was_taken_meanwhile_starts_on_another(tmp_path: Path) -> None:
    psycopg = pytest.importorskip("psycopg")
    with socket.socket() as other:  # another test's server took the port first
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = other.getsockname()[1]
        server = start_server(tmp_path / "pg", ports=[taken, *free_ports(1)])
        try:
            assert server.port != taken
            with psycopg.connect(server.url(), connect_timeout=30) as connection:
                assert connection.execute("SELECT 1").fetchone() == (1,)
        finally:
            server.stop()


def test_a_closed_port_stays_closed_while_held(tmp_path: Path) -> None:
    """A test's "nothing listens there" port: no server of another test can start on it."""
    psycopg = pytest.importorskip("psycopg")
    with closed_port() as port:
        server = start_server(tmp_path / "pg", ports=[port, *free_ports(1)])
        try:
            assert server.port != port
            with pytest.raises(psycopg.OperationalError, match="refused"):
                psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/emews", connect_timeout=30)
        finally:
            server.stop()
