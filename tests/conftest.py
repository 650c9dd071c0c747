"""Shared fixtures (helpers live in ``testutil``, importable from every test folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testutil import EmewsCommand


@pytest.fixture
def emews_cmd(tmp_path: Path) -> EmewsCommand:
    return EmewsCommand(tmp_path)
