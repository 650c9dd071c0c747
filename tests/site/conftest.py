"""Fixtures for the site layer: a clean environment, fake LSF/PBS clients, a real Slurm."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from emews.site.loader import ENV_OVERRIDES
from site_helpers import FakeTools
from slurm_loopback import APT_PACKAGES, LoopbackSlurm, missing_tools


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


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[LoopbackSlurm]:
    """A real one-node Slurm on loopback; FAILS when Slurm is missing unless EMEWS_SKIP_SLURM=1."""
    missing = missing_tools()
    if missing:
        message = (f"Slurm test cluster needs {', '.join(missing)}: "
                   f"apt-get install {' '.join(APT_PACKAGES)}")
        if os.environ.get("EMEWS_SKIP_SLURM") == "1":
            pytest.skip(message + " (skipped: EMEWS_SKIP_SLURM=1)")
        pytest.fail(message + " (or set EMEWS_SKIP_SLURM=1 to skip explicitly)")
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
