"""A real PostgreSQL server for the tests: ``initdb`` into a temporary folder and ``pg_ctl start``
on a free loopback port (its unix socket in the same folder), as an unprivileged user when the
suite runs as root (initdb refuses root), stopped at the end."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

#: where Debian's postgresql puts its server tools (tools/install-system-deps.sh installs it)
BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def server_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder with initdb and pg_ctl, or ``None``."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    return next((d for d in BIN_DIRS if (d / "initdb").is_file() and (d / "pg_ctl").is_file()), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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

    def start(self) -> None:
        data = self.folder / "data"
        self._run([str(self.bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                   "--no-sync"], timeout=120)
        self.restart()
        self._run([str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "emews"])

    def restart(self) -> None:
        """Start the server on its existing data (after :meth:`stop`)."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder} -c fsync=off"
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-l", str(self.folder / "log.txt"),
                   "-w", "-t", "60", "-o", options, "start"], timeout=90)

    def stop(self) -> None:
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop"])


def start_server(folder: Path) -> PgServer:
    """Start a server in ``folder`` (made readable by the server's user when that is not us)."""
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
    server = PgServer(folder, _free_port(), bin_dir, user)
    server.start()
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
