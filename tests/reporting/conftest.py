"""Experiments made by short real runs (under a real ``mpiexec``), shared by the report tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from stores import MODES, count
from testutil import GATED, EmewsCommand, wait_until, write_workflow


@pytest.fixture(scope="session", autouse=True)
def _browsers_quit_at_the_end() -> Iterator[None]:
    """The session's headless browsers end with it (``browser.quit_all``)."""
    yield
    import browser

    browser.quit_all()


@pytest.fixture(scope="session")
def faulty_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run in which evaluations succeeded, failed, crashed and timed out."""
    folder = tmp_path_factory.mktemp("faulty")
    wf = write_workflow(folder, optimizer={"name": "sweep"},
                        space={"mode": {"type": "categorical", "values": MODES},
                               "x": {"type": "ordered", "values": [0.5, 1.5, 3.0]}},
                        budget={"evaluations": 3 * len(MODES)},
                        task={"timeout": 3, "isolation": "process", "memory_limit": "400MB"})
    proc = EmewsCommand(folder)("launch", str(wf), "--workers", "3", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    return folder / "exp"


@pytest.fixture(scope="session")
def resumed_exp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run stopped by SIGTERM with tasks in flight, then finished by ``emews resume``."""
    folder = tmp_path_factory.mktemp("resumed")
    gate = folder / "gate"
    wf = write_workflow(folder, objective={"module": str(GATED), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0},
                               "y": {"type": "int", "lower": 1, "upper": 9},
                               "act": {"type": "categorical", "values": ["relu", "tanh"]}},
                        budget={"evaluations": 16}, task={"timeout": 600, "isolation": "process"})
    cmd = EmewsCommand(folder)
    cmd.env.update(GATE_FILE=str(gate), GATE_FROM="8", GATE_TIMEOUT="600")
    job = cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    exp = folder / "exp"
    assert wait_until(lambda: count(exp, "SELECT COUNT(*) FROM results") >= 8, timeout=180), job.stderr.read()
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=180) == 128 + signal.SIGTERM, job.stderr.read()
    assert count(exp, "SELECT COUNT(*) FROM tasks t LEFT JOIN results r ON r.id = t.id WHERE r.id IS NULL") > 0
    gate.touch()
    proc = cmd("resume", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert count(exp, "SELECT COUNT(*) FROM tasks WHERE attempt > 0") > 0  # tasks really ran again
    return exp
