"""A real PostgreSQL server for the tests: ``initdb`` into a temporary folder and ``pg_ctl start``
on a free loopback port (its unix socket in the same folder), as an unprivileged user when the
suite runs as root (initdb refuses root), stopped at the end."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (tests/site imports this module)
from testutil import free_ports  # noqa: E402

#: ports tried before a server start gives up (each taken by another test's server meanwhile)
PORT_TRIES = 10
#: what the server's log says when another server took its port between the pick and the start
PORT_TAKEN = "Address already in use"

#: where Debian's postgresql puts its server tools (tools/install-system-deps.sh installs it)
BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def server_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder with initdb and pg_ctl, or ``None``."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    return next((d for d in BIN_DIRS if (d / "initdb").is_file() and (d / "pg_ctl").is_file()), None)


@dataclass
class PgServer:
    """A running server: ``url(db)`` names a database on it (trust authentication on loopback)."""

    folder: Path
    port: int
    bin: Path
    user: str | None  # the OS user the server runs as (None: the current one)

    def url(self, db: str = "emews") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def _run(self, args: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess:
        command = [*(["runuser", "-u", self.user, "--"] if self.user else []), *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)

    def initdb(self) -> None:
        self._run([str(self.bin / "initdb"), "-D", str(self.folder / "data"), "-U", "postgres", "--auth=trust",
                   "-E", "UTF8", "--no-sync"], timeout=120)

    def createdb(self) -> None:
        self._run([str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "emews"])

    def log(self) -> str:
        """The server's log so far (``""`` before its first start)."""
        try:
            return (self.folder / "log.txt").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def restart(self) -> None:
        """Start the server on its existing data (after :meth:`stop`)."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off"
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-l", str(self.folder / "log.txt"),
                   "-w", "-t", "60", "-o", options, "start"], timeout=90)

    def stop(self) -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop"])


def start_server(folder: Path, ports: Iterable[int] | None = None) -> PgServer:
    """Start a server in ``folder`` (made readable by the server's user when that is not us) on the
    first of ``ports`` (default: free ports, :func:`~testutil.free_ports`) that it can bind: a port
    free when picked may be taken by a server of a concurrent test before this one binds it."""
    bin_dir = server_bin()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL server tools (initdb, pg_ctl): run tools/install-system-deps.sh")
    user = None
    if os.geteuid() == 0:  # initdb refuses root: the server runs as an unprivileged user
        user = "nobody"
        pwd.getpwnam(user)
        folder.mkdir(parents=True, exist_ok=True)
        for parent in [folder, *folder.parents]:
            if parent == Path("/"):
                break
            parent.chmod(parent.stat().st_mode | 0o011)  # the server user may pass through
        shutil.chown(folder, user=user)
    server = PgServer(folder, 0, bin_dir, user)
    server.initdb()
    for tried, port in enumerate(ports if ports is not None else iter(lambda: free_ports(1)[0], None), start=1):
        server.port, said = port, len(server.log())
        try:
            server.restart()
            break
        except subprocess.CalledProcessError:
            if PORT_TAKEN not in server.log()[said:] or tried >= PORT_TRIES:
                raise
    else:
        raise RuntimeError(f"no port left to start the PostgreSQL server in {folder} on")
    server.createdb()
    return server


@contextmanager
def running_server(prefix: str = "emews-pg-") -> Iterator[PgServer]:
    """A server of its own in a new temporary folder (``prefix``), stopped (unless the test stopped
    it already) and its folder removed at the end: the store tests' session server, a test's own,
    and the Slurm tests' (tests/site)."""
    import pytest

    pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")
    top = Path(tempfile.mkdtemp(prefix=prefix))
    server = start_server(top / "pg")
    try:
        yield server
    finally:
        try:
            server.stop()
        except subprocess.CalledProcessError:  # stopped by the test already
            pass
        shutil.rmtree(top, ignore_errors=True)
