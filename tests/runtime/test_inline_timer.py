"""An inline task's timer: ``task.timeout`` is a ``setitimer`` on the worker rank, and a timeout
beyond the timer's range made every evaluation fail with ``OverflowError: timestamp out of range for
platform time_t`` (20 of 20: finding 3g of ``shared/findings/reliability-2026-11.md``); such a
timeout (finite, so accepted by check) now means no timer, as under process isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from testutil import stored_rows, write_workflow


@pytest.mark.parametrize("timeout", [1e10, 1e300])
def test_an_inline_timeout_beyond_the_timers_range_runs_every_task(emews_cmd, tmp_path: Path, timeout: float) -> None:
    wf = write_workflow(tmp_path, budget={"evaluations": 3}, task={"timeout": timeout, "isolation": "inline"})
    assert emews_cmd("check", str(wf)).returncode == 0
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert [(r["status"], r["error"]) for r in rows] == [("ok", None)] * 3
