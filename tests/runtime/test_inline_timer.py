"""An inline task's timer: ``task.timeout`` is a ``setitimer`` on the worker rank, and a timeout
beyond the timer's range made every evaluation fail with ``OverflowError: timestamp out of range for
platform time_t`` (20 of 20: finding 3g of ``shared/findings/reliability-2026-11.md``); such a
timeout (finite, so accepted by check) now means no timer, as under process isolation. The timer puts
back the SIGALRM handler and timer it found (an objective's own, from its ``setup``)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from emews.runtime.inline import _Alarm, _TaskTimedOut
from testutil import stored_rows, wait_until, write_workflow


@pytest.mark.parametrize("timeout", [1e10, 1e300])
def test_an_inline_timeout_beyond_the_timers_range_runs_every_task(emews_cmd, tmp_path: Path, timeout: float) -> None:
    wf = write_workflow(tmp_path, budget={"evaluations": 3}, task={"timeout": timeout, "isolation": "inline"})
    assert emews_cmd("check", str(wf)).returncode == 0
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert [(r["status"], r["error"]) for r in rows] == [("ok", None)] * 3


def test_the_task_timer_puts_back_the_handler_and_timer_it_found() -> None:
    """An objective's own SIGALRM handler and timer (set up before a task) are back after the task's
    timer: the handler was left raising the task timeout's exception (outside any task then), and the
    timer cancelled. A timer of its own that ran out during the task fires once the task is over."""
    ticks: list[int] = []

    def own(signum: int, frame: object) -> None:
        ticks.append(signum)

    previous = signal.signal(signal.SIGALRM, own)
    try:
        signal.setitimer(signal.ITIMER_REAL, 600.0)
        with _Alarm(300.0):
            pass
        assert signal.getsignal(signal.SIGALRM) is own
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 600.0
        signal.setitimer(signal.ITIMER_REAL, 0.01)  # runs out while the task's timer holds the clock
        with pytest.raises(_TaskTimedOut), _Alarm(0.05):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the task, until its timer fires
                time.sleep(0.01)
        assert signal.getsignal(signal.SIGALRM) is own
        assert wait_until(lambda: ticks, 60) and ticks == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
