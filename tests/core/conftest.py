"""Fixtures shared by the tests under tests/core."""

from __future__ import annotations

from pathlib import Path

import pytest

from testutil import EmewsCommand


@pytest.fixture
def gate(emews_cmd: EmewsCommand, tmp_path: Path) -> tuple[Path, Path]:
    """``objectives/rugged.py``'s event folder and gate file, passed to the run's environment."""
    events, gate_file = tmp_path / "events", tmp_path / "gate"
    events.mkdir()
    emews_cmd.env.update(RUGGED_EVENTS=str(events), RUGGED_GATE=str(gate_file))
    return events, gate_file
