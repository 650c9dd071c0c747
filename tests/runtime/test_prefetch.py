"""Prefetch against hoarding: fast tasks make the run-time estimate tiny and workers take many tasks
ahead; slower tasks behind them must not wait on one worker while another has nothing to do.

A failed task's run time only ever lengthens the estimate (instant failures no longer deepen
prefetch): tested on its own part and in a real ``emews launch``."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import pytest

from emews.core.results import Outcome, Status, Task
from emews.runtime.dispatch import Send
from emews.runtime.slots import SlotDispatch, WorkerSlots
from testutil import TESTS, stored_rows, wait_until, write_workflow

FAST_OR_GATED = TESTS / "objectives" / "fast_or_gated.py"


def task(i: int) -> Task:
    return Task(i, {"x": i}, seed=i, submitted=0.0)


def outcome(task_id: int, seconds: float, status: Status = Status.OK) -> Outcome:
    return Outcome(task_id, status, started=100.0, finished=100.0 + seconds)


# -- the estimate: failures ----------------------------------------------------------------------
def test_instant_failures_do_not_deepen_prefetch_but_long_ones_lengthen_the_estimate() -> None:
    """A run of instant failures made the estimate tiny and the depth 256: one worker took every
    task queued, slow ones included. A failure now counts only where it lengthens the estimate."""
    slots = WorkerSlots([1, 2], prefetch=8, short_task=0.005)
    for _ in range(20):
        slots.release(slots.take()[0], 1e-5, failed=True)
    assert slots.depth == 1 and slots.mean_run is None and slots.capacity == 2
    slots.release(slots.take()[0], 1e-3)  # a success is the estimate's first sample
    assert slots.depth == 5 and slots.mean_run == pytest.approx(1e-3)
    slots.release(slots.take()[0], 1e-5, failed=True)  # shorter than the mean: not counted
    assert slots.mean_run == pytest.approx(1e-3)
    slots.release(slots.take()[0], 1.0, failed=True)  # a long failure (a timeout) counts
    assert slots.mean_run == pytest.approx(0.9e-3 + 0.1) and slots.depth == 1


def test_the_slot_dispatch_hands_one_task_per_worker_while_only_failures_came_back() -> None:
    dispatch = SlotDispatch([1, 2], prefetch=256)
    queue = deque(task(i) for i in range(20))
    sent: list[tuple[int, int]] = []
    for _ in range(8):
        for event in dispatch.place(queue, start=True):
            if isinstance(event, Send):
                sent.append((event.rank, len(event.payload)))
                dispatch.ended(event.rank, [outcome(t.id, 1e-5, Status.FAILED) for t in event.payload])
    assert {n for _, n in sent} == {1} and dispatch.capacity == 2


# -- both, for real ------------------------------------------------------------------------------
@pytest.mark.parametrize("first", ["fail"])
def test_gated_tasks_behind_instant_ones_start_on_both_workers(emews_cmd, tmp_path: Path, first: str) -> None:
    """16 instant tasks (failures, or successes), then 6 held at a gate, on 2 workers: each worker
    starts a gated task while the gate is closed (before, one worker took all six ahead and would
    have run them back to back while the other idled); each runs once. The gate opens once two
    gated tasks started, or after a safety net of 90 s (then the test fails)."""
    points = tmp_path / "points.jsonl"
    lines = [{"kind": first, "i": i} for i in range(16)] + [{"kind": "gated", "i": i} for i in range(6)]
    points.write_text("".join(json.dumps(p) + "\n" for p in lines))
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep", "options": {"file": str(points)}},
        objective={"module": str(FAST_OR_GATED), "function": "run"},
        space={"kind": {"type": "categorical", "values": ["fail", "fast", "gated"]},
               "i": {"type": "int", "lower": 0, "upper": 100}},
        budget={"evaluations": len(lines), "fail_fast": 0}, task={"isolation": "process", "timeout": 300})
    marks, gate = tmp_path / "marks", tmp_path / "open"
    marks.mkdir()
    emews_cmd.env.update(GATE_FILE=str(gate), MARK_DIR=str(marks))
    proc = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")

    def started() -> dict[str, str]:  # task id -> the ranks that started it, a line each (once written)
        return {m.name: text for m in marks.iterdir() if (text := m.read_text()).endswith("\n")}

    try:
        wait_until(lambda: len(started()) >= 2 or proc.poll() is not None, timeout=90)
        started_while_closed = started()
    finally:
        gate.touch()
        out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert sorted(started_while_closed.values()) == ["1\n", "2\n"], \
        f"gated tasks started while the gate was closed (task id: rank): {started_while_closed}"
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == len(lines) and len({r["id"] for r in rows}) == len(lines)
    gated = [r for r in rows if json.loads(r["params"])["kind"] == "gated"]
    assert {r["status"] for r in gated} == {"ok"} and {r["rank"] for r in gated} == {1, 2}
    assert sorted(m.name for m in marks.iterdir()) == sorted(str(r["id"]) for r in gated)
    for m in marks.iterdir():  # each gated task started once, on the rank that reported it
        (rank,) = m.read_text().split()
        assert int(rank) == next(r["rank"] for r in gated if str(r["id"]) == m.name)
    assert emews_cmd.leftovers_after_exit() == []
