"""Shared fixtures (helpers live in ``testutil``, importable from every test folder).

One hypothesis profile for the whole suite: no deadline and no "input generation is slow"
health check, so that a machine whose cores are busy with other work does not fail a test
(the suite must pass beside ``stress-ng --cpu 2``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from testutil import EVENTS, EmewsCommand, EventLog

settings.register_profile("emews", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("emews")


@pytest.fixture
def emews_cmd(tmp_path: Path) -> EmewsCommand:
    return EmewsCommand(tmp_path)


@pytest.fixture
def events() -> EventLog:
    """The shared event log, empty at the start of the test."""
    EVENTS.clear()
    yield EVENTS
    EVENTS.clear()
