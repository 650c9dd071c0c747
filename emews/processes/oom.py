"""Whether the kernel's out-of-memory killer took a process: its kill count, read before the process
runs and again once it died of ``SIGKILL``.

Linux counts the OOM killer's kills per memory cgroup (cgroup v1: ``oom_kill`` in
``memory.oom_control``, kills of the cgroup's own processes; v2: ``oom_kill`` in ``memory.events``,
its subtree's) and on the whole system (``oom_kill`` in ``/proc/vmstat``, Linux 4.13). A batch
system that enforces memory (Slurm's ``ConstrainRAMSpace``) puts the job's processes in a memory
cgroup; the objective's process and its command run in this process's one, so that cgroup's count
rising while the process ran, and the process killed by ``SIGKILL``, say the OOM killer took it (a
``kill -9`` from outside counts nothing, unless the OOM killer took another process of the cgroup
meanwhile: the count does not say whom it killed). Outside any memory cgroup the system's count is read.
Where none of these files can be read (not Linux), nothing is claimed.
"""

from __future__ import annotations

import functools
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

#: the files the counts and limits are read from (tests point them elsewhere)
PROC = Path("/proc")
#: a limit at least this large is none (cgroup v1 writes "no limit" as about 2**63)
_UNLIMITED = 1 << 62
_OOM_KILL = re.compile(r"^oom_kill (\d+)$", re.MULTILINE)


@dataclass(frozen=True)
class MemoryCgroup:
    """The memory cgroup a process lives in: its folder and its version (1 or 2)."""

    folder: Path
    version: int

    @property
    def counted_in(self) -> Path:
        """The file that counts the OOM killer's kills in this cgroup (its ``oom_kill`` line)."""
        return self.folder / ("memory.oom_control" if self.version == 1 else "memory.events")

    def limit(self) -> int | None:
        """The memory limit in bytes that holds for this cgroup, its ancestors' included (``None``: none)."""
        if self.version == 1:
            found = re.search(r"^hierarchical_memory_limit (\d+)$", _read(self.folder / "memory.stat"), re.MULTILINE)
            limits = [int(found[1])] if found else []
        else:
            limits = [
                int(text)
                for f in (self.folder, *self.folder.parents)
                if (text := _read(f / "memory.max").strip()).isdigit()
            ]
        least = min(limits, default=None)
        return None if least is None or least >= _UNLIMITED else least


def memory_cgroup(proc: Path = PROC) -> MemoryCgroup | None:
    """The memory cgroup of this process, as ``proc`` (``/proc``) tells (``None``: none, or the
    hierarchy's root, which every process outside a cgroup shares: then the system's count is the one
    to read). cgroup v1's memory controller where it is mounted (a hybrid system), else v2's."""
    mounts = _memory_mounts(proc)
    for line in _read(proc / "self" / "cgroup").splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        version = 2 if number == "0" and not controllers else 1
        if version == 1 and "memory" not in controllers.split(","):
            continue
        if version == 2 and 1 in mounts:  # a hybrid system: memory is v1's
            continue
        mount = mounts.get(version)
        if mount is None or path in ("", "/"):
            return None
        point, root = mount
        inside = Path(path).relative_to(root) if Path(path).is_relative_to(root) else Path(path.lstrip("/"))
        return MemoryCgroup(point / inside, version)
    return None


def _memory_mounts(proc: Path) -> dict[int, tuple[Path, str]]:
    """Where the memory controller's hierarchies are mounted: version -> (mount point, its root)."""
    found: dict[int, tuple[Path, str]] = {}
    for line in _read(proc / "self" / "mountinfo").splitlines():
        before, _, after = line.partition(" - ")
        fields, rest = before.split(), after.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        if rest[0] == "cgroup" and "memory" in rest[2].split(","):
            found[1] = (Path(fields[4]), fields[3])
        elif rest[0] == "cgroup2":
            found.setdefault(2, (Path(fields[4]), fields[3]))
    return found


class _KillCount:
    """The ``oom_kill`` count of one kernel file, held open and read again from its start with one
    ``pread`` (3 us; opening it for every task took 30-100 us)."""

    def __init__(self, path: Path) -> None:
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY)
        except OSError:
            self._fd = None

    def __call__(self) -> int | None:
        """The count now (``None``: not readable)."""
        if self._fd is None:
            return None
        try:
            text = os.pread(self._fd, 1 << 16, 0).decode(errors="replace")
        except OSError:
            return None
        found = _OOM_KILL.search(text)
        return None if found is None else int(found[1])


@functools.cache
def _own() -> tuple[MemoryCgroup | None, _KillCount]:
    """This process's memory cgroup and its kill count (the system's outside one), found once: a batch
    system places a process before it runs Python."""
    cgroup = memory_cgroup()
    return cgroup, _KillCount(cgroup.counted_in if cgroup is not None else PROC / "vmstat")


class OomWatch:
    """Started as a process starts: :meth:`killed` says whether the OOM killer killed something there since."""

    def __init__(self) -> None:
        self._cgroup, self._count = _own()
        self._before = self._count()

    def killed(self) -> bool:
        """The count rose since the start (call it after the process died of ``SIGKILL``)."""
        now = self._count()
        return self._before is not None and now is not None and now > self._before

    def cause(self, what: str = "killed by the kernel's OOM killer") -> str:
        """What to say of a process the OOM killer took (``what``): the limit it ran under, when a cgroup has one."""
        limit = None if self._cgroup is None else self._cgroup.limit()
        under = f" (the memory cgroup's limit: {_size(limit)})" if limit else ""
        return f"out of memory: {what}{under}"

    def named(self, error: str, returncode: int) -> str:
        """``error``, the record of a process that ended with ``returncode``, led by :meth:`cause`
        when the OOM killer took it (or, status 137, the program a shell script ran: CANDLE's
        ``model.sh``): the line that names a failure (``failure_cause.cause``)."""
        if returncode not in (-signal.SIGKILL, 128 + signal.SIGKILL) or not self.killed():
            return error
        return f"{self.cause()}\n{error}"


#: the ``oom_score_adj`` of an objective's process: the OOM killer's first choice (Ray's workers' value)
VICTIM_SCORE = 1000


def prefer_as_victim() -> None:
    """Make this process (and what it starts, which inherits it) the OOM killer's first choice in its
    memory cgroup, ahead of the job's ranks: an objective's process that outgrows the memory costs its
    task, not a rank and with it the job (the optimizer's rank may be the largest process). Raising
    one's own score needs no privilege; where it cannot be written (not Linux), nothing changes."""
    try:
        (PROC / "self" / "oom_score_adj").write_text(str(VICTIM_SCORE))
    except OSError:
        pass


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _size(size: int) -> str:
    """``1.5 GiB``, ``512 MiB``."""
    for unit, power in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << power:
            return f"{size / (1 << power):.3g} {unit}"
    return f"{size} B"
