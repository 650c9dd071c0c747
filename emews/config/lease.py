"""One owner per experiment: an exclusive lease file that ``launch``/``resume`` and the job take.

``EXP/lease.json`` names its owners (host, pid and the pid's start time, so a
recycled pid is not mistaken for the owner), the batch job id when there is one,
and a token. The job started for a lease presents the token (``emews run EXP
--lease TOKEN``) and joins it; anyone else finds it held and gets exit status 2
naming the holder. A lease whose owners are all dead and whose job (if any) is
over is stale and is taken over. Creation is a hard link of a private temp file
(atomic, also on NFS); a take-over first renames the stale file away, which
only one contender can do.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from emews.core.errors import ConfigError

LEASE_FILE = "lease.json"


class LeaseHeld(ConfigError):
    """Another live launch, resume or job owns the experiment."""


#: the lease command of ``emews serve`` (``emews status`` tells its optimizer from a job's)
SERVE_COMMAND = "emews serve"


@dataclass(frozen=True)
class Owner:
    """A process that holds the lease."""

    host: str
    pid: int
    started: float  # the process's start time (clock ticks since boot), to tell a recycled pid

    @classmethod
    def me(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), _start_time(os.getpid()))

    def alive(self) -> bool | None:
        """Whether the process still runs (``None``: it runs on another host, so we cannot tell)."""
        if self.host != socket.gethostname():
            return None
        return _start_time(self.pid) == self.started

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


@dataclass
class LeaseRecord:
    token: str
    owners: list[Owner] = field(default_factory=list)
    job_id: str | None = None
    command: str = ""
    since: float = field(default_factory=time.time)
    #: the experiment directory it was taken in (host, device, inode): a copy's lease is not held
    directory: str | None = None

    @classmethod
    def read(cls, path: Path) -> LeaseRecord | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                token=data["token"],
                owners=[Owner(**o) for o in data.get("owners", [])],
                job_id=data.get("job_id"),
                command=data.get("command", ""),
                since=data.get("since", 0.0),
                directory=data.get("directory"),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return cls(token="unreadable", command="an unreadable lease file")  # owners unknown: stale

    def copied(self, exp_dir: Path) -> bool:
        """Whether this lease was taken in another directory on this host (``exp_dir`` is a copy,
        ``cp -a`` of a live experiment): its owners run that one, not ``exp_dir``."""
        if self.directory is None or not self.directory.startswith(f"{socket.gethostname()}:"):
            return False  # an older lease, or one taken on another host (devices differ between NFS clients)
        return self.directory != directory_id(exp_dir)

    def describe(self) -> str:
        who = ", ".join(o.describe() for o in self.owners) or "no running process"
        job = f", batch job {self.job_id}" if self.job_id else ""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"{self.command or 'emews'} ({who}{job}, since {when})"


def directory_id(exp_dir: Path) -> str | None:
    """``HOST:DEVICE:INODE`` of ``exp_dir`` (``None`` when it cannot be read): the same after ``mv``
    within a file system, another for a copy."""
    try:
        st = os.stat(exp_dir)
    except OSError:
        return None
    return f"{socket.gethostname()}:{st.st_dev}:{st.st_ino}"


#: asks the batch system whether a job is over (``emews.site.jobs`` supplies one)
JobDone = Callable[[str], bool]


class Lease:
    """The experiment's lease, held by this process."""

    def __init__(self, exp_dir: Path, record: LeaseRecord) -> None:
        self.exp_dir = exp_dir
        self.record = record

    @property
    def path(self) -> Path:
        return self.exp_dir / LEASE_FILE

    @property
    def token(self) -> str:
        return self.record.token

    def update(self, *, job_id: str | None = None, owners: list[Owner] | None = None) -> None:
        """Record the batch job (and who owns the lease now)."""
        if job_id is not None:
            self.record.job_id = job_id
        if owners is not None:
            self.record.owners = owners
        _write_atomically(self.path, self.record)

    def release(self) -> None:
        """Give the lease up, if it is still ours."""
        current = LeaseRecord.read(self.path)
        if current is not None and current.token == self.token:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def acquire(exp_dir: Path, command: str, *, token: str | None = None, job_done: JobDone | None = None) -> Lease:
    """Take the lease of ``exp_dir`` (or join it with its ``token``); raise :class:`LeaseHeld`."""
    path = exp_dir / LEASE_FILE
    for _ in range(5):
        current = LeaseRecord.read(path)
        if current is not None and token is not None and current.token == token:
            current.owners = [o for o in current.owners if o.alive() is not False] + [Owner.me()]
            _write_atomically(path, current)
            return Lease(exp_dir, current)
        if current is not None:
            if not current.copied(exp_dir) and not _stale(current, job_done):
                raise LeaseHeld(
                    f"the experiment is in use by {current.describe()}",
                    file=str(exp_dir),
                    allowed="one launch, resume or job at a time: wait for it to end, or stop it "
                    f"({_how_to_stop(current, exp_dir)})",
                )
            try:  # claim the stale lease: only one contender's rename succeeds
                os.rename(path, path.with_name(f".{LEASE_FILE}.stale-{uuid.uuid4().hex}"))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise _unwritable(path, exc) from None
        record = LeaseRecord(
            token=token or uuid.uuid4().hex, owners=[Owner.me()], command=command, directory=directory_id(exp_dir)
        )
        if _create(path, record):
            _remove_stale_copies(exp_dir)
            return Lease(exp_dir, record)
    raise LeaseHeld("the experiment's lease keeps changing hands", file=str(exp_dir))


def joined(exp_dir: Path, token: str, *, batch: bool = False) -> Owner | None:
    """The live process on this host that joined the lease ``token`` after the one that took it (the
    job's rank 0, which joins its launch's lease as it starts); ``None`` until one has. ``batch``: the
    lease of a batch job, which its submission left without owners: its first, on any host."""
    record = LeaseRecord.read(exp_dir / LEASE_FILE)
    if record is None or record.token != token:
        return None
    if batch:
        return next((owner for owner in record.owners if owner.alive() is not False), None)
    return next((owner for owner in record.owners[1:] if owner.alive()), None)


def ended_starter(record: LeaseRecord) -> Owner | None:
    """The process that took the lease ``record`` for its job (``emews launch``, ``emews resume``: the
    first owner, which a job's rank 0 joined) when it ran on this host and has ended; ``None`` while
    it runs, elsewhere, or for a batch job (its submission left no owner)."""
    if record.job_id or len(record.owners) < 2:  # a batch job (an owner before it: a requeued start's), or none joined
        return None
    first = record.owners[0]
    return first if first.alive() is False else None


def _how_to_stop(record: LeaseRecord, exp_dir: Path) -> str:
    """How the holder of ``record`` is stopped: its batch job by ``emews cancel``; a local launch or
    resume (which ``emews cancel`` refuses) by Ctrl-C or a SIGTERM to its first process."""
    if record.job_id:
        return f"emews cancel {shlex.quote(str(exp_dir))}"
    if not record.owners:
        return "kill its process"
    first = record.owners[0]
    where = "" if first.host == socket.gethostname() else f" on {first.host}"
    return f"Ctrl-C where it runs, or kill -TERM {first.pid}{where}: it stops cleanly, and emews resume goes on"


def _stale(record: LeaseRecord, job_done: JobDone | None) -> bool:
    """No owner alive here, and either no owner elsewhere or the batch job is over."""
    states = [owner.alive() for owner in record.owners]
    if any(state is True for state in states):
        return False
    if record.job_id and job_done is not None:
        return job_done(record.job_id)
    return not record.job_id and all(state is False for state in states)


def _create(path: Path, record: LeaseRecord) -> bool:
    """Create ``path`` holding ``record`` unless it exists (atomic: link of a private temp file)."""
    tmp = path.with_name(f".{LEASE_FILE}.{uuid.uuid4().hex}")
    try:
        tmp.write_text(_dump(record), encoding="utf-8")
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    except OSError as exc:
        raise _unwritable(path, exc) from None
    finally:
        _remove(tmp)


def _write_atomically(path: Path, record: LeaseRecord) -> None:
    """Replace ``path`` by ``record``; a full disk or a read-only directory is a :class:`ConfigError`
    (rank 0 then refuses the run, and the job ends, instead of raising past its workers)."""
    tmp = path.with_name(f".{LEASE_FILE}.{uuid.uuid4().hex}")
    try:
        tmp.write_text(_dump(record), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise _unwritable(path, exc) from None


def _unwritable(path: Path, exc: OSError) -> ConfigError:
    return ConfigError(f"cannot write the experiment's lease: {exc.strerror or exc}", file=str(path))


def _remove(tmp: Path) -> None:
    """Remove a temp file if it is there (on a read-only file system even that fails: nothing to do)."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def _remove_stale_copies(exp_dir: Path) -> None:
    for old in exp_dir.glob(f".{LEASE_FILE}.stale-*"):
        old.unlink(missing_ok=True)


def _dump(record: LeaseRecord) -> str:
    data: dict[str, Any] = asdict(record)
    return json.dumps(data, indent=2) + "\n"


def _start_time(pid: int) -> float:
    """The start time of ``pid`` in clock ticks since boot (0 when it does not exist)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):
            return 0.0
        return float(fields[19])
    except (OSError, IndexError, ValueError):
        return 0.0
