"""A task whose objective cannot write its file on a full disk: the disk's failure, not the point's.

Every evaluation after the disk filled up failed alike (``OSError: [Errno 28] No space left on
device``), each recorded as the objective's failure: a real run of 40 with the disk full after 6
ended ``6 ok, 34 failed``, exit 0, its budget spent and the optimizer taught that 34 points were
bad, and ``emews resume`` had nothing left to run. Now the first such failure stops the run with
that cause in one line (exit 1), the task is left unfinished, and ``emews resume`` runs it once
there is room.
"""

from __future__ import annotations

from pathlib import Path

from emews.core.results import Outcome, Status
from emews.runtime.full_disk import FullDisk
from testutil import MODEL_WRITER, full_tmpfs, stored_rows, task_1_meets_a_full_disk, write_gated_workflow


def test_a_task_that_finds_the_disk_full_stops_the_run_and_is_run_again_by_resume(emews_cmd, tmp_path: Path) -> None:
    wf, events, gate = write_gated_workflow(tmp_path, MODEL_WRITER, budget={"evaluations": 4})
    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "1", "--exp-dir", str(exp))
    task_1_meets_a_full_disk(job, exp, events, gate)
    assert [(r["id"], r["status"]) for r in stored_rows(exp)] == [(0, "ok")]  # no failure charged to a point

    resumed = emews_cmd("resume", str(exp), timeout=300)  # room again: the tmpfs is gone
    assert resumed.returncode == 0, resumed.stderr
    rows = stored_rows(exp)
    assert {r["status"] for r in rows} == {"ok"} and len(rows) == 4 and 1 in [r["id"] for r in rows], rows


def test_a_failure_that_does_not_name_the_disk_is_its_when_the_disk_has_no_room_left(tmp_path: Path) -> None:
    """``torch.save`` on a full disk says ``RuntimeError: basic_ios::clear: iostream error`` and
    ``numpy.save`` ``OSError: 1000000 requested and 135664 written``: with the experiment's disk
    (almost) full when such a failure arrives, it is the disk's; with room, or a timeout, it is not."""
    error = 'Traceback (most recent call last):\n  File "m.py", line 3, in run\nRuntimeError: basic_ios::clear: iostream error\n'
    failed = Outcome(7, Status.FAILED, error=error)
    with full_tmpfs(tmp_path / "disk") as disk:
        (disk / "runs" / "000" / "000007").mkdir(parents=True)
        why = FullDisk(disk).why(failed)
        assert why is not None and why.startswith(
            "RuntimeError: basic_ios::clear: iostream error, with 0 bytes left on"
        )
        assert why.endswith(f"(its run dir: {disk}/runs/000/000007)")
        assert FullDisk(disk).why(Outcome(7, Status.TIMEOUT, error="timed out after 5 s")) is None
    assert FullDisk(tmp_path).why(failed) is None  # room: the objective's own failure
    quota = Outcome(
        8,
        Status.FAILED,
        error="command cp exited with status 1; last lines of stderr:\n"
        "cp: error writing 'model.bin': Disk quota exceeded\n",
    )
    assert FullDisk(tmp_path).why(quota) == "cp: error writing 'model.bin': Disk quota exceeded"


def test_a_traceback_made_under_another_locale_is_the_disks_by_its_errno(tmp_path: Path) -> None:
    """The system's words follow the locale (LANG=de_DE: ``Auf dem Gerät ist kein Speicherplatz mehr
    verfügbar``); Python's ``[Errno 28]`` does not."""
    german = (
        "Traceback (most recent call last):\nOSError: [Errno 28] Auf dem Gerät ist kein Speicherplatz mehr verfügbar\n"
    )
    why = FullDisk(tmp_path).why(Outcome(3, Status.FAILED, error=german))
    assert why == "OSError: [Errno 28] Auf dem Gerät ist kein Speicherplatz mehr verfügbar"
    assert FullDisk(tmp_path).why(Outcome(3, Status.FAILED, error="ValueError: [Errno 280] not a disk")) is None
