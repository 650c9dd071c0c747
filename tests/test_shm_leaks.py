"""A test that leaves an MPICH segment in /dev/shm fails at its teardown, and only that test
(``tests/shm_leaks.py``): a pytest run of its own whose tests start real 2-rank ``mpiexec`` jobs, one
whose rank is killed (its segment left), one that ends normally, one whose leak is another test
process's (its ranks carry another ``EMEWS_TEST_OWNER``, as a concurrent xdist worker's do), and one
whose leak is marked as a known case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from emews.processes import mpich_shm
from testutil import REPO

pytestmark = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="Linux only (/proc, inotify)")

INNER = """
import os
from pathlib import Path

import pytest
from testutil import PlainJob

OUT = Path(os.environ["SHM_LEAKS_OUT"])


def run(name, then, env=None):
    job = PlainJob(OUT / name, then, env)
    (OUT / f"{name}.names").write_text("\\n".join(job.mapped()))
    job.end()


def test_leaks():
    run("leaks", "kill")


def test_ends_well():
    run("ends", "wait")


def test_a_neighbours_leak_is_not_blamed():
    run("neighbour", "kill", {**os.environ, "EMEWS_TEST_OWNER": "another-run:1"})


@pytest.mark.leaves_shm("a known case")
def test_known():
    run("known", "kill")
"""


def names(out: Path, job: str) -> list[str]:
    """The segments the ranks of the inner test's ``job`` mapped."""
    found = (out / f"{job}.names").read_text().split() if (out / f"{job}.names").exists() else []
    assert found and all(name.startswith(mpich_shm.PREFIX) for name in found), found
    return found


def test_the_test_that_leaves_a_segment_fails_and_its_segment_is_removed(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_inner.py").write_text(INNER)
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests"), str(REPO), os.environ.get("PYTHONPATH")])),
        "SHM_LEAKS_OUT": str(out),
    }
    plugins = ["-p", "worker_cleanup", "-p", "shm_leaks", "-p", "no:cacheprovider", "-p", "no:randomly"]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *plugins, "-rA", "test_inner.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=500,
        )
        said = proc.stdout + proc.stderr
        leaked = names(out, "leaks")
        assert "4 passed, 1 error" in said, said
        assert "ERROR at teardown of test_leaks" in said and "ERROR test_inner.py::test_leaks" in said, said
        assert "this test left 1 MPICH shared-memory segment(s) that no process maps (removed now)" in said, said
        assert all(f"{mpich_shm.SHM_DIR / name}  (made by: " in said for name in leaked), said
        assert [name for name in leaked if (mpich_shm.SHM_DIR / name).exists()] == []  # removed at its teardown
        assert [name for name in names(out, "known") if (mpich_shm.SHM_DIR / name).exists()] == []  # and this one
        assert names(out, "ends") and names(out, "neighbour")
        neighbours = [name for name in names(out, "neighbour") if (mpich_shm.SHM_DIR / name).exists()]
        assert neighbours == names(out, "neighbour")  # left, and not this run's to blame nor to remove
        assert not any(name in said for name in neighbours), said
    finally:
        mpich_shm.remove_unmapped(
            n
            for job in ("leaks", "neighbour")
            for n in (out / f"{job}.names").read_text().split()
            if (out / f"{job}.names").exists()
        )
