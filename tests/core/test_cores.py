"""The cores a process may keep busy: affinity capped by a cgroup CPU quota (v1 and v2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emews.core.cores import cgroup_quota, quota_v1, quota_v2, usable_cores, whole_cores
from emews.job.mpi_main import node_usable_cores
from emews.runtime.backoff import DEFAULT_SPIN, spin_for

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
34 31 0:31 / {root}/cpuset rw,relatime - cgroup cgroup rw,cpuset
32 31 0:29 / {root}/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct
"""
V2_MOUNTS = "41 31 0:38 / {root}/unified rw,relatime - cgroup2 cgroup2 rw\n"


def write(path: Path, **files: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name.replace("cpu_", "cpu.", 1)).write_text(text)


@pytest.mark.parametrize(
    ("text", "cores"), [("max 100000", None), ("150000 100000", 1.5), ("200000 100000\n", 2.0), ("junk", None)]
)
def test_quota_v2_reads_cpu_max(text: str, cores: float | None) -> None:
    assert quota_v2(text) == cores


def test_quota_v1_reads_quota_over_period() -> None:
    assert quota_v1("-1\n", "100000\n") is None
    assert quota_v1("100000", "100000") == 1.0


def test_v1_quota_of_the_cgroup_or_a_tighter_ancestor(tmp_path: Path) -> None:
    write(tmp_path / "cpu", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    write(tmp_path / "cpu" / "job", cpu_cfs_quota_us="150000", cpu_cfs_period_us="100000")
    write(tmp_path / "cpu" / "job" / "step", cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    mounts = V1_MOUNTS.format(root=tmp_path)
    assert cgroup_quota("3:cpuset:/\n2:cpu,cpuacct:/job/step\n", mounts) == 1.5
    assert cgroup_quota("2:cpu,cpuacct:/\n", mounts) is None  # the root: no quota
    assert cgroup_quota("3:cpuset:/job\n", mounts) is None  # cpuset names "cpu" only as a prefix


def test_v2_quota_and_a_namespaced_cgroup(tmp_path: Path) -> None:
    write(tmp_path / "unified", cpu_max="max 100000")
    write(tmp_path / "unified" / "box", cpu_max="50000 100000")
    mounts = V2_MOUNTS.format(root=tmp_path)
    assert cgroup_quota("0::/box\n", mounts) == 0.5
    # inside a cgroup namespace the mount's root is the process's own cgroup
    ns_mounts = f"41 31 0:38 /box {tmp_path}/unified/box rw - cgroup2 cgroup2 rw\n"
    assert cgroup_quota("0::/elsewhere\n", ns_mounts) == 0.5
    assert cgroup_quota("0::/box\n", "") is None  # no cgroup mount at all


def test_usable_cores_caps_affinity_by_quota() -> None:
    assert usable_cores(affinity=8, quota=2.5) == 2.5
    assert usable_cores(affinity=2, quota=16.0) == 2.0
    assert [whole_cores(c) for c in (0.5, 1.0, 1.5, 2.0)] == [1, 1, 2, 2]


def test_a_node_counts_its_cores_and_the_tightest_quota() -> None:
    """A quota caps what the ranks may keep busy (thread counts, a spare core for the CSV writer),
    not the cores polling is decided on: 4 ranks on 4 cores under a 1.5-core quota still poll."""
    cores, usable = node_usable_cores([([0, 1], 1.5), ([2, 3], None)])
    assert (cores, usable) == (4, 1.5)
    assert spin_for(4, cores, {}) == DEFAULT_SPIN
    assert node_usable_cores([([0, 1], None), ([1], None)]) == (2, 2.0)
