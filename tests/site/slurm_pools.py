"""What the tests of pools on the real loopback Slurm share (test_pool_on_slurm, test_pool_scancel,
test_pool_jobs_not_started): the suite's PostgreSQL server, batch jobs that import this tree, a
Slurm job's state, and a gated launch (tests/store/pooled.py) whose pool holds its tasks at the
gate while the test attaches pools on Slurm. A test module takes the fixtures by importing them."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "store"))  # the suite's PostgreSQL server (tests/store/pgserver.py)
sys.path.insert(0, str(TESTS))
from pgserver import PgServer, running_server  # noqa: E402
from pooled import gated_command  # noqa: E402
from testutil import EmewsCommand  # noqa: E402


@pytest.fixture(scope="module")
def postgres() -> Iterator[PgServer]:
    with running_server("emews-pg-slurm-") as server:
        yield server


@pytest.fixture(autouse=True)
def jobs_import_this_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch jobs the tests submit import this tree's emews."""
    old = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(TESTS.parent) + (os.pathsep + old if old else ""))


def job_state(job_id: str) -> str:
    """Slurm job ``job_id``'s state as emews sees it (``queued``, ``running``, ``done``)."""
    from emews.site.batch_schedulers import BATCH_SCHEDULERS
    from emews.site.schema import SchedulerConfig

    return BATCH_SCHEDULERS["slurm"](SchedulerConfig(type="slurm")).job_state(job_id)


@contextmanager
def gated_launch(folder: Path, workflow: Path, workers: int) -> Iterator[EmewsCommand]:
    """``emews launch WORKFLOW --workers N --pools 1`` in ``folder`` (the experiment ``folder/exp``),
    its tasks held at the gate ``folder/open``; the body runs other commands with the command given.
    When the body is done the gate opens and the launch must end with exit 0; however it ends, the
    gate opens and every process the command started is killed, and what they left in /dev/shm removed."""
    cmd = gated_command(folder)
    launch = cmd.popen("launch", str(workflow), "--workers", str(workers), "--pools", "1", "--exp-dir", "exp")
    try:
        yield cmd
        (folder / "open").touch()
        _, err = launch.communicate(timeout=300)
        assert launch.returncode == 0, err
    finally:
        (folder / "open").touch()
        cmd.kill_all()
        cmd.remove_killed_segments()
