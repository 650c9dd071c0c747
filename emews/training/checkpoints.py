"""Checkpoint files: framed, written atomically, and written in the background.

A checkpoint file is a header (magic, kind, payload length, CRC-32 of kind and payload) and
the payload: a pickled object, or the bytes of a file the objective wrote. It is written to a
temporary name, flushed with ``fsync``, renamed into place and the directory synced: a file
under its final name is complete and on disk. :func:`read_checkpoint` checks length and
checksum, so a truncated or corrupt file is refused, never restored (CRC-32, not a
cryptographic digest: it guards against torn and damaged writes at a fraction of SHA-256's CPU).

:class:`CheckpointWriter` takes the in-memory snapshot (the bytes) and writes it on a
background thread at a lower CPU priority, so training goes on while the file is framed and
flushed (the DataStates lesson). A checkpoint holding CUDA tensors is snapshotted by
:mod:`emews.training.device_snapshot`: copied to pinned host buffers on a side stream, the
writer thread waiting for the copies before it pickles them.
"""

from __future__ import annotations

import os
import pickle
import queue
import re
import shutil
import socket
import struct
import sys
import threading
import zlib
from collections.abc import Callable, Container, Iterable
from pathlib import Path, PurePath
from typing import Any

from emews.core.errors import EmewsError
from emews.core.textfiles import TempWriter, temp_writer, write_atomic, write_atomic_in
from emews.training import device_snapshot
from emews.training.device_snapshot import DeviceSnapshot

MAGIC = b"EMEWSCK1"
_HEADER = struct.Struct(">8sBQI")  # magic, kind, payload length, crc32 of kind + payload
#: the writer thread's niceness above the training thread's (Linux: per thread)
WRITER_NICENESS = 10
KIND_OBJECT, KIND_FILE = 0, 1
SUFFIX = ".ckpt"
#: the experiment's checkpoint folder (``EXP/checkpoints``), laid out by :func:`checkpoint_path`
CHECKPOINTS_DIR = "checkpoints"
#: bytes copied at a time from the local tier to the experiment directory
CHUNK = 1 << 22


class CorruptCheckpoint(EmewsError, ValueError):
    """The file is not a complete checkpoint (truncated, altered, or not a checkpoint at all)."""


def checkpoint_path(root: Path, trial: int, step: int, serial: int, attempt: int = 0) -> Path:
    """``ROOT/TRIAL/step-STEP-SERIAL.ckpt`` (``serial`` tells apart two checkpoints of one step of
    one run of the task), ``ROOT/TRIAL/step-STEP-SERIAL-aATTEMPT.ckpt`` from its second ``attempt``
    on: two pools may train one trial at once (one frozen past its lease, one that took the task
    over, one attempt later) and must not write one file. The first attempt's name is the layout
    of experiments written before (their rows name their paths, which are read as they are)."""
    run = f"{_ATTEMPT}{attempt}" if attempt else ""
    return trial_folder(root, trial) / f"step-{step:08d}-{serial:03d}{run}{SUFFIX}"


def trial_folder(root: Path, trial: int) -> Path:
    """``ROOT/TRIAL``: where :func:`checkpoint_path` puts ``trial``'s checkpoints."""
    return root / f"{trial:06d}"


_ATTEMPT = "-a"


def checkpoint_attempt(path: str | Path) -> int:
    """The run of its task (``attempt``) that wrote the checkpoint at ``path`` (:func:`checkpoint_path`)."""
    head, mark, run = PurePath(path).stem.rpartition(_ATTEMPT)
    return int(run) if mark and head and run.isdigit() else 0


def in_experiment(path: str) -> str | None:
    """``checkpoints/TRIAL/NAME``: where a checkpoint path of any experiment directory lies in its
    experiment (the layout of :func:`checkpoint_path`); ``None`` for a path not so laid out."""
    parts = [part for part in path.split("/") if part not in ("", ".")]  # PurePath's parts, without the parse
    return "/".join(parts[-3:]) if len(parts) >= 3 and parts[-3] == CHECKPOINTS_DIR else None


def remove_inside(path: str | Path, root: Path) -> bool:
    """Delete ``path`` if it lies inside ``root`` (the experiment directory; compared after ``..``
    is resolved); whether it does. Retention's guard: an experiment only deletes its own files."""
    target = Path(os.path.abspath(path))
    if not target.is_relative_to(os.path.abspath(root)):
        return False
    target.unlink(missing_ok=True)
    return True


def make_trial_folder(path: Path) -> None:
    """Make the folders of a checkpoint at ``path`` (``EXP/checkpoints/TRIAL/NAME``): the trial's
    and ``checkpoints``, never the experiment directory. One moved away (``mv EXP EXP2``) while
    its writer held the old path is not made again under the old name: the write fails (said as
    a checkpoint not written), and never leaves files the experiment does not see."""
    path.parent.parent.mkdir(exist_ok=True)
    path.parent.mkdir(exist_ok=True)


#: where a checkpoint goes: a path, or a function asked when its write starts (a path in an
#: experiment directory followed across a move: where it is then)
Destination = Path | Callable[[], Path]


def write_checkpoint_file(destination: Callable[[], Path], pieces: Iterable[bytes]) -> Path:
    """Write a checkpoint's ``pieces`` atomically where ``destination`` says now, its folders made
    (:func:`make_trial_folder`); where the file is once written. The trial's folder is held open
    from then on, so the file lands in it when the experiment directory is moved meanwhile; one
    moved between the question and the folder's opening is asked again."""
    for again in (True, False):
        path = destination()
        try:
            make_trial_folder(path)
            folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
            break
        except FileNotFoundError:
            if not again or destination() == path:
                raise
    try:
        write_atomic_in(folder, path.name, pieces)
    finally:
        os.close(folder)
    return destination()


def remove_dead_temps(root: Path, held: Callable[[], Container[int]] | None = None) -> int:
    """Remove the temporary files that checkpoint writers no longer alive left under ``root``
    (``EXP/checkpoints``: a ``kill -9`` mid-write, a whole job killed); how many. A writer's host
    and process id are in the name: one on this host is gone when its process is. One on another
    host, with ``held`` (pools: the trials whose task is leased under a lease not ended, asked once
    the files are listed), when its trial is not held (its pool is dead, or was cut off and its
    task taken over); without (a job's own run, at its launch or resume: the experiment's only
    job) it is gone. A temporary file named before names carried the host is judged as this
    host's, and kept with ``held``."""
    here = socket.gethostname()
    temps = list(root.glob("*/.*.tmp"))  # before the leases are read: a file listed is a holder's then
    trials = None if held is None else held()

    def gone(path: Path, writer: TempWriter) -> bool:
        if writer.host == here or (writer.host is None and trials is None):
            return not _alive(writer.pid)
        if writer.host is None:  # another host's, maybe: whose cannot be told
            return False
        if trials is None:  # the experiment's last job's, on another node: that job is over
            return True
        trial = path.parent.name
        return trial.isdigit() and int(trial) not in trials

    return _remove_temps(temps, gone)


def remove_temps_of(folder: Path, pid: int) -> int:
    """Remove the temporary files the process ``pid`` of this host, known dead (killed, or crashed,
    mid-write), left in the trial folder ``folder``; how many."""
    here = socket.gethostname()
    return _remove_temps(
        folder.glob(f".*.{pid}.*.tmp"), lambda _, writer: writer.pid == pid and writer.host in (here, None)
    )


def remove_temps_taken_over(folder: Path) -> int:
    """Remove the temporary files in the trial folder ``folder`` whose task this pool has just taken
    over (an earlier pool ran it and let go: dead, cut off past its lease, or stopped): a writer of
    another host is that earlier pool's, one of this host counts when its process ended; how many."""
    here = socket.gethostname()
    return _remove_temps(
        folder.glob(".*.tmp"), lambda _, writer: writer.host not in (here, None) or not _alive(writer.pid)
    )


def _remove_temps(paths: Iterable[Path], gone: Callable[[Path, TempWriter], bool]) -> int:
    removed = 0
    for path in paths:
        writer = temp_writer(path.name)
        if writer is not None and gone(path, writer):
            _discard(path)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


_VARIABLE = re.compile(r"\$(\w+|\{([^}]*)\})")


def unset_variables(text: str) -> list[str]:
    """The environment variables ``text`` names (``$NAME``, ``${NAME}``) that are not set here."""
    names = (found[2] if found[2] is not None else found[1] for found in _VARIABLE.finditer(text))
    return [name for name in names if name not in os.environ]


def local_tier(local_dir: str) -> Path | None:
    """``checkpoints.local_dir`` with its environment variables expanded; ``None`` (no local tier,
    said on stderr) when one is not set in this process: never a literal ``$NAME`` directory."""
    unset = unset_variables(local_dir)
    if unset:
        print(
            f"emews: checkpoints.local_dir {local_dir!r}: environment variable {unset[0]} is not set here; "
            "checkpoints are written to the experiment directory directly",
            file=sys.stderr,
        )
        return None
    return Path(os.path.expandvars(local_dir))


def staging_folder(tier: Path) -> Path:
    """This process's folder on the local tier, ``TIER/emews-HOST-PID``. The folders this host's
    writers left when they were killed before their flush (``kill -9``: a dead process id; on a
    ``/dev/shm`` tier they held node memory) are removed first; other hosts' are left alone (a
    tier on shared storage), as are those of processes alive here."""
    prefix = f"emews-{socket.gethostname()}-"
    for folder in tier.glob(f"{prefix}*"):
        pid = folder.name[len(prefix) :]  # all digits: not host ``HOST-2``'s folder
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
    return tier / f"{prefix}{os.getpid()}"


#: what a snapshot is: the bytes of a file or a pickle, or CUDA tensors on their way to the host
Payload = bytes | DeviceSnapshot


def snapshot(checkpoint: Any) -> tuple[int, Payload, str | None]:
    """What to write, taken now: a path the objective wrote is read; a checkpoint with CUDA
    tensors starts their copy to host memory (:mod:`~emews.training.device_snapshot`, no wait);
    anything else is pickled."""
    if isinstance(checkpoint, os.PathLike):
        path = Path(checkpoint)
        return KIND_FILE, path.read_bytes(), path.name
    device = device_snapshot.take(checkpoint)
    if device is not None:
        return KIND_OBJECT, device, None
    return KIND_OBJECT, pickle.dumps(checkpoint, protocol=pickle.HIGHEST_PROTOCOL), None


def frame(kind: int, payload: Payload, name: str | None = None) -> list[Any]:
    """The pieces of a checkpoint file (a file's name travels in front of its bytes). A device
    snapshot is waited for here (the writer thread) and pickled into pieces without a copy."""
    if isinstance(payload, DeviceSnapshot):
        pieces = payload.pieces()
        digest = zlib.crc32(bytes([kind]))
        for piece in pieces:
            digest = zlib.crc32(piece, digest)
        return [_HEADER.pack(MAGIC, kind, sum(p.nbytes for p in pieces), digest), *pieces]
    if kind == KIND_FILE:
        encoded = (name or "checkpoint").encode()
        payload = struct.pack(">H", len(encoded)) + encoded + payload
    return [_HEADER.pack(MAGIC, kind, len(payload), _digest(kind, payload)), payload]


def framed_size(kind: int, payload: Payload, name: str | None = None) -> int:
    """The size of the file :func:`frame` makes, without hashing anything."""
    if isinstance(payload, DeviceSnapshot):
        return _HEADER.size + payload.size
    extra = 2 + len((name or "checkpoint").encode()) if kind == KIND_FILE else 0
    return _HEADER.size + extra + len(payload)


def _digest(kind: int, payload: bytes | memoryview) -> int:
    """CRC-32 over the kind and the payload: a flipped bit in either is caught."""
    return zlib.crc32(payload, zlib.crc32(bytes([kind])))


def read_checkpoint(path: str | Path, extract_to: Path | None = None) -> Any:
    """The object a checkpoint holds; for a file checkpoint, the path it is extracted to
    (under ``extract_to``). Raises :class:`CorruptCheckpoint` when the file does not verify."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorruptCheckpoint(f"{path}: cannot read: {exc}") from None
    if len(data) < _HEADER.size:
        raise CorruptCheckpoint(f"{path}: shorter than a checkpoint header")
    magic, kind, length, digest = _HEADER.unpack_from(data)
    payload = memoryview(data)[_HEADER.size :]
    if magic != MAGIC:
        raise CorruptCheckpoint(f"{path}: not an emews checkpoint")
    if len(payload) != length or kind not in (KIND_OBJECT, KIND_FILE) or _digest(kind, payload) != digest:
        raise CorruptCheckpoint(
            f"{path}: truncated or corrupt ({len(payload)} of {length} bytes, or checksum mismatch)"
        )
    if kind == KIND_OBJECT:
        return pickle.loads(payload)
    (size,) = struct.unpack_from(">H", payload)
    name = bytes(payload[2 : 2 + size]).decode()
    target = (extract_to or path.parent) / name
    write_atomic(target, [bytes(payload[2 + size :])])
    return target


class CheckpointWriter:
    """Writes checkpoints on a background thread; ``done()`` names the ones now durable.

    At most ``max_pending`` snapshots wait in memory: a report that would exceed it waits for
    the oldest write (bounded memory when writing is slower than training). With
    ``background=False`` every write happens in the caller (the synchronous baseline).

    ``local_dir`` (a faster, node-local tier) : the snapshot is first written there, which frees
    its memory, and a second thread copies the file to its place in the experiment directory
    (write, fsync, rename) and removes the local copy; only then is it done (durable: the one
    that is restored). Training waits only for the local write when memory is full.

    A destination given as a function is asked when the file is written to the experiment
    directory (a checkpoint queued or staged when the experiment was moved goes where it went).
    """

    def __init__(self, *, background: bool = True, max_pending: int = 2, local_dir: Path | None = None) -> None:
        self._background = background
        self._local = local_dir
        self._flushes: queue.SimpleQueue[tuple[Path, Callable[[], Path]] | None] = queue.SimpleQueue()
        self._flusher: threading.Thread | None = None
        self._slots = threading.BoundedSemaphore(max_pending)
        self._queue: queue.SimpleQueue[tuple[Callable[[], Path], int, Payload, str | None] | None] = queue.SimpleQueue()
        self._done: list[str] = []
        self._failed: list[str] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._thread: threading.Thread | None = None

    def submit(self, destination: Destination, kind: int, payload: Payload, name: str | None = None) -> None:
        """Write a snapshot (``snapshot``'s kind, bytes and name) to ``destination``, now or in the
        background (framing and hashing happen there too, off the training thread)."""
        where = destination if callable(destination) else _fixed(destination)
        if not self._background:
            self._write(where, kind, payload, name)
            return
        self._slots.acquire()
        with self._lock:
            self._pending += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="emews-checkpoints", daemon=True)
            self._thread.start()
        self._queue.put((where, kind, payload, name))

    def done(self) -> tuple[str, ...]:
        """Paths written completely since the last call."""
        with self._lock:
            done, self._done = self._done, []
        return tuple(done)

    def failures(self) -> tuple[str, ...]:
        with self._lock:
            failed, self._failed = self._failed, []
        return tuple(failed)

    def flush(self) -> None:
        """Wait until every submitted checkpoint is written."""
        with self._idle:
            self._idle.wait_for(lambda: self._pending == 0)

    def _serve(self) -> None:
        try:  # yield the CPU to training: writing may take longer, training should not
            os.setpriority(
                os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + WRITER_NICENESS
            )
        except (AttributeError, OSError):
            pass
        while (job := self._queue.get()) is not None:
            try:
                self._write(*job)
            finally:
                self._slots.release()
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _write(self, destination: Callable[[], Path], kind: int, payload: Payload, name: str | None) -> None:
        try:
            if isinstance(payload, DeviceSnapshot):
                try:
                    payload.wait()  # the copies to host memory (a CUDA error is this file's failure)
                except RuntimeError as exc:
                    self._fail(destination(), exc)
                    return
            if self._local is not None and self._stage_locally(destination, kind, payload, name):
                return
            try:
                path = write_checkpoint_file(destination, frame(kind, payload, name))
            except OSError as exc:
                self._fail(destination(), exc)
                return
            with self._lock:
                self._done.append(str(path))
        finally:
            if isinstance(payload, DeviceSnapshot):
                payload.release()  # written (or failed): its host buffers take the next snapshot

    def _fail(self, path: Path, exc: Exception) -> None:
        with self._lock:
            self._failed.append(f"{path}: {exc}")

    def _stage_locally(self, destination: Callable[[], Path], kind: int, payload: Payload, name: str | None) -> bool:
        """Write to the local tier and hand the file to the flush thread; whether it was (a local
        tier that cannot be written falls back to writing ``destination`` directly)."""
        assert self._local is not None
        path = destination()  # its trial's folder and name: the same wherever the experiment is
        local = self._local / path.parent.name / path.name
        try:
            with self._lock:  # made and opened while the flush thread removes no emptied folder
                local.parent.mkdir(parents=True, exist_ok=True)
                fh = open(local, "wb")
            with fh:  # no fsync: this copy is a staging area, not the durable one
                for piece in frame(kind, payload, name):
                    fh.write(piece)
        except OSError:
            self._unstage(local)  # a full tier keeps no partial file
            return False
        with self._lock:
            self._pending += 1  # the flush is pending work too (``flush`` waits for it)
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_files, name="emews-checkpoint-flush", daemon=True)
                self._flusher.start()
        self._flushes.put((local, destination))
        return True

    def _flush_files(self) -> None:
        """Copy staged files to the experiment directory (durable there), then drop the local copy."""
        while (job := self._flushes.get()) is not None:
            local, destination = job
            try:
                with open(local, "rb") as fh:  # streamed, not held in memory
                    path = write_checkpoint_file(destination, iter(lambda: fh.read(CHUNK), b""))
            except OSError as exc:
                self._fail(destination(), exc)
            else:
                with self._lock:
                    self._done.append(str(path))
            finally:
                self._unstage(local)  # flushed, or lost: either way the tier keeps nothing
                with self._idle:
                    self._pending -= 1
                    self._idle.notify_all()

    def _unstage(self, local: Path) -> None:
        """Remove a staged file, then its trial's folder and this process's once they are empty
        (a process that ended normally leaves nothing on the tier)."""
        _discard(local)
        assert self._local is not None
        with self._lock:
            for folder in (local.parent, self._local):
                try:
                    folder.rmdir()
                except OSError:  # another checkpoint is staged there (or it is gone)
                    return


def _fixed(path: Path) -> Callable[[], Path]:
    """A destination that is ``path`` wherever the experiment is."""
    return lambda: path


def _discard(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
