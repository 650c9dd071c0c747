"""Shared fixtures (helpers live in ``testutil``, importable from every test folder).

One hypothesis profile for the whole suite: no deadline and no "input generation is slow"
health check, so that a machine whose cores are busy with other work does not fail a test
(the suite must pass beside ``stress-ng --cpu 2``).

The suite runs on three pytest-xdist workers (``-n 3 --dist loadgroup`` in setup.cfg): much of a
test's time is spent waiting on child processes (``mpiexec`` jobs, R, PostgreSQL, Chromium), so a
third worker fills the cores. Each test file is one unit of work (its module fixtures are built
once), and tests that share one expensive thing across files share a unit: every test on the
loopback Slurm (one cluster per session, one worker) and every report test of the shared
experiments in ``tests/reporting/conftest.py``.
"""

from __future__ import annotations

import compileall
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from testutil import EVENTS, EmewsCommand, EventLog

#: what a crashed xdist worker left running is killed by the controller (``worker_cleanup``); the
#: ``memory_cgroup`` fixture, a real memory cgroup around one command, lives in ``memory_cgroup``; a
#: test that leaves an MPICH segment in /dev/shm fails at its teardown, naming it (``shm_leaks``)
pytest_plugins = ("worker_cleanup", "memory_cgroup", "shm_leaks")

settings.register_profile("emews", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("emews")


#: fixtures whose users must run on one xdist worker, and the unit of work they share
SHARED_UNITS = {"slurm_cluster": "slurm", "faulty_exp": "report-runs", "resumed_exp": "report-runs"}


#: what the suite's child processes import from this checkout (ranks, objectives, test helpers)
COMPILED = ("emews", "optimizers", "objectives", "tests")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile this checkout once, in the controller, when the environment says not to write
    bytecode (``PYTHONDONTWRITEBYTECODE``): otherwise each of the suite's thousands of child
    processes (every rank of every ``mpiexec`` job) compiles every module it imports again, about a
    quarter of a small launch's CPU. Reading bytecode is still allowed; a stale file is recompiled
    by Python as usual (its source's mtime is checked)."""
    if hasattr(session.config, "workerinput") or not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    root = Path(__file__).resolve().parents[1]
    for name in COMPILED:
        compileall.compile_dir(root / name, quiet=2)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--chaos-examples",
        type=int,
        default=None,
        help="examples of tests/chaos (a long local soak); EMEWS_CHAOS_EXAMPLES too",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Hand ``--chaos-examples`` to tests/chaos, whose settings are read when it is imported; keep
    the checks the suite's commands pass (``emews.core.check_cache``) in a folder of this run, not in
    the user's ``~/.cache``: an answer kept by an earlier run of other code must not pass a test."""
    if config.getoption("--chaos-examples") is not None:
        os.environ["EMEWS_CHAOS_EXAMPLES"] = str(config.getoption("--chaos-examples"))
    if "EMEWS_CHECK_CACHE" not in os.environ and not hasattr(config, "workerinput"):
        folder = tempfile.mkdtemp(prefix="emews-test-checks-")
        os.environ["EMEWS_CHECK_CACHE"] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group every test into its xdist unit of work (before xdist reads the marks)."""
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        shared = sorted({SHARED_UNITS[name] for name in getattr(item, "fixturenames", ()) if name in SHARED_UNITS})
        unit = shared[0] if shared else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(unit))


@pytest.fixture
def emews_cmd(tmp_path: Path) -> Iterator[EmewsCommand]:
    """``python -m emews`` in ``tmp_path``; at the end, what the jobs its ``kill_all`` killed left in
    /dev/shm is removed (``EmewsCommand.remove_killed_segments``)."""
    cmd = EmewsCommand(tmp_path)
    yield cmd
    cmd.remove_killed_segments()


@pytest.fixture
def events() -> EventLog:
    """The shared event log, empty at the start of the test."""
    EVENTS.clear()
    yield EVENTS
    EVENTS.clear()
