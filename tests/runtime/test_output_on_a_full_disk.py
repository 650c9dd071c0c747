"""What an isolated task printed, on a full disk: the run dirs' file system (a real tmpfs mounted on
``runs/000``) has no room, the store has.

The child moved its spool into the task's run dir; the write failed (No space left on device), the
child's loop ended on the OSError and sent its stop message as the task's outcome: the optimizer
rank failed on it (``AttributeError: 'ChildStopped' object has no attribute 'started'``), and the
next child died at its start with a traceback on the job's stderr. Now the task's result stands,
the output that found no room is not kept (no empty file is left), one line per worker says so,
and the run goes on; with room again, the output is kept as before.
"""

from __future__ import annotations

from pathlib import Path

from gated_job import launch_gated

from testutil import full_tmpfs, said, stored_rows, wait_until


def test_output_the_run_dirs_have_no_room_for_is_said_once_and_the_run_goes_on(emews_cmd, tmp_path: Path) -> None:
    gated = launch_gated(emews_cmd, tmp_path, evaluations=6, timeout=300)
    job, exp = gated.job, gated.exp
    assert wait_until(gated.started, timeout=180), said(job)
    with full_tmpfs(exp / "runs" / "000") as runs:
        gated.gate.touch()
        assert job.wait(timeout=300) == 0, said(job)
        err = job.stderr.read()
        assert "Traceback" not in err and "AttributeError" not in (exp / "emews.log").read_text(), err
        notes = [line for line in err.splitlines() if "what a task printed was not kept" in line]
        assert 1 <= len(notes) <= 2, err                                   # once per worker at most
        assert all("stdout.txt: not written: the disk is full" in line for line in notes), notes
        assert sorted(p.name for p in runs.iterdir()) == ["filler"]         # no empty run dir file left
        assert [r["status"] for r in stored_rows(exp)] == ["ok"] * 6

    # room again (the tmpfs gone): the resumed tasks' output is kept as before, none of the earlier one
    resumed = emews_cmd("resume", str(exp), "--set", "budget.evaluations=8", timeout=300)
    assert resumed.returncode == 0 and "not kept" not in resumed.stderr, resumed.stderr
    kept = sorted(p.parent.name for p in (exp / "runs" / "000").glob("*/stdout.txt"))
    assert kept == ["000006", "000007"], kept
    assert all(f"task {int(name)} says" in (exp / "runs" / "000" / name / "stdout.txt").read_text() for name in kept)
