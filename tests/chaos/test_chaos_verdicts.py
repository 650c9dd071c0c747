"""The chaos harnesses' record (tests/chaos/chaos_verdicts.py): each case one JSON line with what was
seen and its verdict, whether the case held or an assertion ended it (re-raised)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chaos_verdicts import recorded


def test_each_case_is_recorded_with_its_verdict_whatever_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "record.jsonl"
    monkeypatch.setenv("EMEWS_CHAOS_RECORD", str(path))
    with recorded("case A", {"hit": True}):
        pass
    with pytest.raises(AssertionError, match="promise broken"), recorded("case B", {"hit": False}):
        raise AssertionError("promise broken")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [
        {"case": "case A", "hit": True, "verdict": "held"},
        {"case": "case B", "hit": False, "verdict": "AssertionError: promise broken"},
    ]


def test_nothing_is_recorded_without_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMEWS_CHAOS_RECORD", raising=False)
    monkeypatch.chdir(tmp_path)
    seen: dict = {}
    with recorded("case", seen):
        pass
    assert seen == {"verdict": "held"} and list(tmp_path.iterdir()) == []
