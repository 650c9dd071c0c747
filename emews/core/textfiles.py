"""Files: reading the ones users hand us (bounded in size, UTF-8, one clear error when they are
not) and writing ours whole (:func:`write_atomic`: the final name appears only when complete)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from emews.core.errors import ConfigError

#: the largest file read as configuration or data (bytes)
MAX_FILE_BYTES = 4 * 2**20


def read_text(path: Path, *, limit: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of ``path``; a file that is too big, unreadable or not UTF-8 is a ConfigError."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", file=path) from None
    if len(raw) > limit:
        raise ConfigError(f"file is larger than the limit of {limit // 2**20} MiB", file=path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}",
            file=path,
            allowed="UTF-8 encoded text",
        ) from None


#: the temporary name :func:`write_atomic` writes ``NAME`` under: ``.NAME@HOST.PID.THREAD.tmp``
#: (``.NAME.PID.THREAD.tmp`` before it carried the host: a cleanup on another node could not tell
#: whose it was); ``@`` is in no host name
_TEMP = re.compile(r"\.(?P<name>.+?)(?:@(?P<host>[^@/]+))?\.(?P<pid>\d+)\.(?P<thread>\d+)\.tmp")


@dataclass(frozen=True)
class TempWriter:
    """Who writes a temporary file of :func:`write_atomic`, as its name says: the file it becomes
    (``name``), the writer's ``host`` (``None``: a name written before it carried one) and ``pid``."""

    name: str
    host: str | None
    pid: int


def temp_name(name: str) -> str:
    """The temporary name this thread writes ``name`` under (:data:`_TEMP`)."""
    return f".{name}@{socket.gethostname()}.{os.getpid()}.{threading.get_ident()}.tmp"


def write_atomic(path: Path, pieces: Iterable[bytes], *, durable: bool = True, mode: int = 0o666) -> None:
    """Write, fsync, rename, fsync the directory: the final name appears only when complete.
    On any error (a full disk) the temporary file is removed before the error goes on.
    ``durable=False`` leaves out the fsyncs: a reader never sees the file half-written, but a
    crash of the machine may lose it (a task's input files, made again when it runs again).
    ``mode``: the new file's permissions, less the umask (``0o777``: an executable script)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_atomic_in(folder, path.name, pieces, durable=durable, mode=mode)
    finally:
        os.close(folder)


def write_atomic_in(
    folder: int, name: str, pieces: Iterable[bytes], *, durable: bool = True, mode: int = 0o666
) -> None:
    """:func:`write_atomic` into the directory open as ``folder``: the file lands in that directory
    even when it is renamed during the write (``mv EXP EXP2``), never under its old name."""
    tmp = temp_name(name)
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode, dir_fd=folder), "wb") as fh:
            for piece in pieces:
                fh.write(piece)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise
    if durable:
        os.fsync(folder)


def temp_writer(name: str) -> TempWriter | None:
    """Who writes the temporary file ``name`` of :func:`write_atomic` (``None``: not such a name)."""
    found = _TEMP.fullmatch(name)
    return None if found is None else TempWriter(found["name"], found["host"], int(found["pid"]))
