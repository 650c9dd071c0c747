"""Which memory cgroup a process is in, its OOM kill count and its limit, on the layouts the machines
here do not have: cgroup v2 (Slurm's cgroup/v2 on RHEL 9), a hybrid system's v1 memory beside an
unused v2 hierarchy, a container's namespaced view, a process in the root cgroup. The kernel's files
are written as Linux shows them, under a folder that stands for ``/proc`` and the mount points; a real
memory cgroup (v1 here) is in tests/runtime/test_oom_killed.py."""

from __future__ import annotations

from pathlib import Path

from emews.processes.oom import MemoryCgroup, memory_cgroup

#: mountinfo lines: ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS - FSTYPE SOURCE SUPER_OPTIONS
V2 = "30 23 0:26 / {mnt} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate"
V1_MEMORY = "35 31 0:32 / {mnt} rw,relatime - cgroup cgroup rw,memory"
V1_CPU = "32 31 0:29 / {mnt} rw,relatime - cgroup cgroup rw,cpu,cpuacct"


def _proc(tmp_path: Path, mountinfo: list[str], cgroup: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text("\n".join(mountinfo) + "\n")
    (proc / "self" / "cgroup").write_text(cgroup)
    return proc


def test_cgroup_v2_a_slurm_step_limited_on_its_job(tmp_path: Path) -> None:
    mnt = tmp_path / "sys-fs-cgroup"
    task = mnt / "system.slice" / "slurmstepd.scope" / "job_7" / "step_0" / "user" / "task_0"
    task.mkdir(parents=True)
    for folder, limit in ((mnt / "system.slice", "max"), (task.parents[2], "419430400"), (task, "max")):
        (folder / "memory.max").write_text(limit + "\n")
    (task / "memory.events").write_text("low 0\nhigh 0\nmax 5\noom 2\noom_kill 2\noom_group_kill 0\n")
    proc = _proc(tmp_path, [V2.format(mnt=mnt)], "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n")
    found = memory_cgroup(proc)
    assert found == MemoryCgroup(task, 2)
    assert found.counted_in == task / "memory.events"
    assert found.limit() == 400 * 2**20  # the job's, the least of the folder's and its ancestors'


def test_a_hybrid_system_counts_in_v1s_memory_controller(tmp_path: Path) -> None:
    memory, unified, cpu = tmp_path / "memory", tmp_path / "unified", tmp_path / "cpu"
    (memory / "rev").mkdir(parents=True)
    (memory / "rev" / "memory.stat").write_text("cache 0\nhierarchical_memory_limit 1610612736\n")
    mountinfo = [V1_CPU.format(mnt=cpu), V1_MEMORY.format(mnt=memory), V2.format(mnt=unified)]
    proc = _proc(tmp_path, mountinfo, "0::/\n4:memory:/rev\n1:cpu,cpuacct:/\n")  # the v2 line first
    found = memory_cgroup(proc)
    assert found == MemoryCgroup(memory / "rev", 1)
    assert found.counted_in == memory / "rev" / "memory.oom_control"
    assert found.limit() == 1536 * 2**20


def test_a_containers_namespaced_view_and_an_unlimited_cgroup(tmp_path: Path) -> None:
    """A bind mount of the container's own part (its root ``/docker/abc``): the cgroup's path is below it."""
    memory = tmp_path / "memory"
    (memory / "job").mkdir(parents=True)
    (memory / "job" / "memory.stat").write_text("hierarchical_memory_limit 9223372036854771712\n")
    mountinfo = ["35 31 0:32 /docker/abc " + f"{memory} rw,relatime - cgroup cgroup rw,memory"]
    found = memory_cgroup(_proc(tmp_path, mountinfo, "4:memory:/docker/abc/job\n"))
    assert found == MemoryCgroup(memory / "job", 1)
    assert found.limit() is None  # v1's "no limit", about 2**63


def test_the_root_cgroup_or_none_is_no_cgroup(tmp_path: Path) -> None:
    """Then the system's count (``/proc/vmstat``) is read: every process outside a cgroup shares the root's."""
    memory = tmp_path / "memory"
    assert memory_cgroup(_proc(tmp_path, [V1_MEMORY.format(mnt=memory)], "4:memory:/\n")) is None
    assert memory_cgroup(_proc(tmp_path / "none", [], "")) is None  # no cgroup files at all (not Linux)
