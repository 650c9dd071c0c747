"""A memory cgroup of its own for a test: a real limit, enforced by the kernel's OOM killer, around
one command (``emews launch``), never around the test's own process; the machine itself never runs
out of memory. Needs root and a writable memory hierarchy (cgroup v1's ``memory`` controller, or v2
with ``memory`` in its root's ``cgroup.subtree_control``): the fixture FAILS where there is none,
unless ``EMEWS_SKIP_CGROUP=1`` (as the loopback Slurm's tests do with ``EMEWS_SKIP_SLURM``)."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from testutil import wait_until, write_workflow

#: the line that names a task the OOM killer took in a 400 MiB cgroup (the tests' limit)
OOM_AT_400 = "out of memory: killed by the kernel's OOM killer (the memory cgroup's limit: 400 MiB)"

#: an objective: ``oom-rss`` writes memory (resident) until the OOM killer takes it, ``kill`` is a
#: ``kill -9`` of its process, ``ok`` returns 1
HUNGRY_OBJECTIVE = """\
import os, signal

def run(params):
    if params["mode"] == "oom-rss":
        blocks = []
        while True:
            blocks.append(b"\\x01" * (16 * 2**20))
    if params["mode"] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return 1.0
"""


def mode_workflow(
    folder: Path, modes: list[str], isolation: str, objective: dict | None = None, optimizer: str = "sweep"
) -> Path:
    """A workflow that evaluates each of ``modes`` once (``space.mode``), in the given task isolation;
    the objective is :data:`HUNGRY_OBJECTIVE` (written to ``folder/hungry.py``) unless given."""
    if objective is None:
        module = folder / "hungry.py"
        module.write_text(HUNGRY_OBJECTIVE)
        objective = {"module": str(module)}
    return write_workflow(
        folder,
        optimizer={"name": optimizer},
        objective=objective,
        space={"mode": {"type": "categorical", "values": modes}},
        budget={"evaluations": len(modes)},
        task={"timeout": 120, "isolation": isolation},
    )


V1 = Path("/sys/fs/cgroup/memory")
V2 = Path("/sys/fs/cgroup")


def _hierarchy() -> tuple[Path, str] | None:
    """Where a test's memory cgroup is made, and its limit's file (``None``: nowhere here)."""
    if (V1 / "memory.limit_in_bytes").is_file() and os.access(V1, os.W_OK):
        return V1, "memory.limit_in_bytes"
    with contextlib.suppress(OSError):
        if "memory" in (V2 / "cgroup.subtree_control").read_text().split() and os.access(V2, os.W_OK):
            return V2, "memory.max"
    return None


class MemoryCgroup:
    """A memory cgroup limited to ``limit`` bytes; :meth:`wrap` runs a command inside it."""

    def __init__(self, root: Path, limit_file: str, limit: int) -> None:
        self.folder = root / f"emews-test-{uuid.uuid4().hex[:12]}"
        self.folder.mkdir()
        (self.folder / limit_file).write_text(str(limit))

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the cgroup (its shell joins it, then becomes the command)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.folder / "cgroup.procs"), *argv]

    def pids(self) -> list[int]:
        with contextlib.suppress(OSError):
            return [int(p) for p in (self.folder / "cgroup.procs").read_text().split()]
        return []

    def remove(self) -> None:
        """Kill what is left inside (a failed test's job), then remove the cgroup."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not self.pids(), 60)
        self.folder.rmdir()


@pytest.fixture
def memory_cgroup() -> Iterator[MemoryCgroup]:
    """A memory cgroup of 400 MiB, removed at the end (see the module docstring)."""
    found = _hierarchy()
    if found is None:
        missing = f"a writable memory cgroup hierarchy ({V1} or {V2} with memory in cgroup.subtree_control)"
        if os.environ.get("EMEWS_SKIP_CGROUP") == "1":
            pytest.skip(missing + " (skipped: EMEWS_SKIP_CGROUP=1)")
        pytest.fail(missing + " (or set EMEWS_SKIP_CGROUP=1 to skip explicitly)")
    cgroup = MemoryCgroup(*found, 400 * 2**20)
    try:
        yield cgroup
    finally:
        cgroup.remove()
