"""Fixtures for the site layer: a clean environment, fake LSF/PBS clients, a real Slurm."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from emews.site.loader import ENV_OVERRIDES
from site_helpers import FakeTools
from slurm_loopback import APT_PACKAGES, LoopbackSlurm, cgroup_missing, missing_tools


@pytest.fixture(autouse=True)
def _no_site_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see no EMEWS_* site overrides from the calling shell."""
    for var in ENV_OVERRIDES:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty working directory (no ./site-configs unless a test makes one)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeTools:
    """bsub/bjobs/bkill and qsub/qstat/qdel fakes printing realistic answers."""
    tools = FakeTools(tmp_path / "fake")
    tools.add("bsub", 'echo "Job <12345> is submitted to queue <batch>."')
    tools.add("bjobs", 'echo "RUN"')
    tools.add("bkill", 'echo "Job <$1> is being terminated"')
    tools.add("qsub", 'echo "12345.polaris-pbs-01"')
    tools.add("qstat", 'printf "Job Id: %s\\n    Job_Name = emews\\n    job_state = Q\\n" "$3"')
    tools.add("qdel", "true")
    monkeypatch.setenv("PATH", f"{tools.bin}{os.pathsep}{os.environ['PATH']}")
    return tools


def _needs(missing: str) -> None:
    """Fail (skip with EMEWS_SKIP_SLURM=1) for what a Slurm test cluster lacks here."""
    if os.environ.get("EMEWS_SKIP_SLURM") == "1":
        pytest.skip(missing + " (skipped: EMEWS_SKIP_SLURM=1)")
    pytest.fail(missing + " (or set EMEWS_SKIP_SLURM=1 to skip explicitly)")


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[LoopbackSlurm]:
    """A real one-node Slurm on loopback; FAILS when Slurm is missing unless EMEWS_SKIP_SLURM=1."""
    missing = missing_tools()
    if missing:
        _needs(f"Slurm test cluster needs {', '.join(missing)}: apt-get install {' '.join(APT_PACKAGES)}")
    cluster = LoopbackSlurm().start()
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        cluster.stop()
        cluster.cleanup()
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


@pytest.fixture
def slurm_cgroup_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackSlurm]:
    """A loopback Slurm of its own that tracks a job's processes in a cgroup (proctrack/cgroup), as real
    clusters do: when a job's batch step ends, every process left in it is killed (under
    :func:`slurm_cluster`'s proctrack/linuxproc an orphan outlives its job). ``SLURM_CONF`` names it
    for the test; FAILS where Slurm or cgroup v1's freezer is missing unless EMEWS_SKIP_SLURM=1."""
    missing = missing_tools()
    if missing:
        _needs(f"Slurm test cluster needs {', '.join(missing)}: apt-get install {' '.join(APT_PACKAGES)}")
    lacking = cgroup_missing()
    if lacking:
        _needs(f"a Slurm test cluster with proctrack/cgroup needs {lacking}")
    with LoopbackSlurm(cgroup=True) as cluster:
        monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
        yield cluster


@pytest.fixture
def slurm_memory_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackSlurm]:
    """A loopback Slurm of its own that holds a job to its ``--mem`` with a memory cgroup (task/cgroup,
    ConstrainRAMSpace), as clusters that share nodes do: past it the kernel's OOM killer takes the
    largest process of the job. ``SLURM_CONF`` names it for the test; FAILS where Slurm or cgroup
    v1's freezer and memory controllers are missing unless EMEWS_SKIP_SLURM=1."""
    missing = missing_tools()
    if missing:
        _needs(f"Slurm test cluster needs {', '.join(missing)}: apt-get install {' '.join(APT_PACKAGES)}")
    lacking = cgroup_missing(memory=True)
    if lacking:
        _needs(f"a Slurm test cluster that enforces --mem needs {lacking}")
    with LoopbackSlurm(memory=True) as cluster:
        monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
        yield cluster
