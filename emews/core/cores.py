"""The cores this process may use: its CPU affinity, capped by its cgroup's CPU quota.

A container or a batch job may be given two cores' worth of time on a 64-core node
(``docker --cpus 2``, a CFS quota): ``sched_getaffinity`` still names all 64, and ranks that poll
or thread pools sized to them burn the quota that the ranks with work need. Both cgroup
versions are read: ``cpu.max`` (v2) and ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (v1), from
the process's own cgroup up to the root of its hierarchy (the tightest limit applies).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

Reader = Callable[[Path], "str | None"]


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def quota_v2(cpu_max: str) -> float | None:
    """Cores of a cgroup v2 ``cpu.max`` (``"150000 100000"`` -> 1.5; ``"max 100000"``: none)."""
    fields = cpu_max.split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    return _ratio(fields[0], fields[1])


def quota_v1(quota_us: str, period_us: str) -> float | None:
    """Cores of a cgroup v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` (``-1``: none)."""
    return _ratio(quota_us.strip(), period_us.strip())


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_quota(proc_cgroup: str, mountinfo: str, read: Reader = _read) -> float | None:
    """The tightest CPU quota (cores) on the way from this process's cgroup to its hierarchy's root;
    ``proc_cgroup`` and ``mountinfo``: the texts of ``/proc/self/cgroup`` and
    ``/proc/self/mountinfo``. ``None``: no quota, or none found."""
    quotas: list[float] = []
    for line in proc_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            mount = _mount(mountinfo, "cgroup2", None)
            if mount is not None:
                quotas += _walk(mount, path, lambda d: _quota_v2_at(d, read))
        elif "cpu" in controllers.split(","):
            mount = _mount(mountinfo, "cgroup", "cpu")
            if mount is not None:
                quotas += _walk(mount, path, lambda d: _quota_v1_at(d, read))
    return min(quotas) if quotas else None


def _quota_v2_at(directory: Path, read: Reader) -> float | None:
    text = read(directory / "cpu.max")
    return None if text is None else quota_v2(text)


def _quota_v1_at(directory: Path, read: Reader) -> float | None:
    quota, period = read(directory / "cpu.cfs_quota_us"), read(directory / "cpu.cfs_period_us")
    return None if quota is None or period is None else quota_v1(quota, period)


def _mount(mountinfo: str, fstype: str, controller: str | None) -> tuple[str, Path] | None:
    """(root of the hierarchy inside the mount, mount point) of the first mount of ``fstype``
    (for v1: whose options name ``controller``)."""
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or tail[0] != fstype:
            continue
        if controller is None or controller in tail[2].split(","):
            return fields[3], Path(fields[4])
    return None


def _walk(mount: tuple[str, Path], path: str, quota_at: Callable[[Path], float | None]) -> list[float]:
    """Quotas of ``path``'s cgroup and its ancestors that the mount shows."""
    root, point = mount
    try:
        relative = PurePosixPath(path).relative_to(root)
    except ValueError:  # a cgroup namespace: the mount shows this process's cgroup as its root
        relative = PurePosixPath(".")
    found = []
    parts = [p for p in relative.parts if p not in ("/", ".")]
    for depth in range(len(parts), -1, -1):
        quota = quota_at(point.joinpath(*parts[:depth]))
        if quota is not None:
            found.append(quota)
    return found


def cpu_quota() -> float | None:
    """This process's cgroup CPU quota in cores (``None``: none, or not on Linux)."""
    proc_cgroup, mountinfo = _read(Path("/proc/self/cgroup")), _read(Path("/proc/self/mountinfo"))
    if proc_cgroup is None or mountinfo is None:
        return None
    return cgroup_quota(proc_cgroup, mountinfo)


def usable_cores(affinity: int | None = None, quota: float | None = None) -> float:
    """The cores this process may keep busy: its affinity (or ``affinity`` cores), capped by its
    cgroup's CPU quota (or ``quota``); a fraction where the quota is one (1.5 cores)."""
    cores = float(affinity if affinity is not None else len(os.sched_getaffinity(0)))
    quota = cpu_quota() if quota is None else quota
    return min(cores, quota) if quota is not None else cores


def whole_cores(cores: float) -> int:
    """``cores`` as a count of threads that can run at once: a started core counts (1.5 -> 2), at least 1."""
    return max(1, math.ceil(cores - 1e-9))
