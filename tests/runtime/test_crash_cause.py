"""What a crashed objective process said: a process-isolated objective that dies (a native library's
abort, OpenBLAS's ``Memory allocation still failed`` under ``task.memory_limit``) was recorded only as
``objective process exited with status 1``, its cause left in the task's ``stderr.txt`` (finding T3 of
``shared/findings/real-world-2026-11.md``). A command objective's failure already quoted its stderr."""

from __future__ import annotations

import json
from pathlib import Path

from emews.objective.context import task_run_dir
from testutil import stored_rows, write_workflow


def test_a_crashed_objective_process_is_named_by_what_it_wrote_to_stderr(emews_cmd, tmp_path: Path) -> None:
    modes = ["abort", "abort-signal", "segfault", "ok"]
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"},
        space={"mode": {"type": "categorical", "values": modes}, "x": {"type": "constant", "value": 3.0}},
        budget={"evaluations": len(modes)}, task={"timeout": 60, "isolation": "process"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = tmp_path / "exp"
    by_mode = {json.loads(r["params"])["mode"]: r for r in stored_rows(exp)}
    assert {m: r["status"] for m, r in by_mode.items()} == {
        "abort": "crashed", "abort-signal": "crashed", "segfault": "crashed", "ok": "ok"}
    # an exit status: the line that names the problem first (the cause reports and fail fast show),
    # then the exit and the last lines of stderr, as for a command
    abort = by_mode["abort"]["error"].splitlines()
    assert abort[0] == "OpenBLAS error: Memory allocation still failed", abort
    assert abort[1:] == ["objective process exited with status 1; last lines of stderr:",
                         "OpenBLAS error: Memory allocation still failed"], abort
    assert "training step 1" not in by_mode["abort"]["error"]  # stdout is not the cause
    # a signal: named by an error line of stderr when there is one, else by the signal
    signal_lines = by_mode["abort-signal"]["error"].splitlines()
    assert signal_lines[0] == "cuda runtime: fatal error: device lost", signal_lines
    assert "objective process died of signal SIGABRT (aborted); last lines of stderr:" in signal_lines
    assert by_mode["segfault"]["error"] == "objective process died of signal SIGSEGV (segmentation fault)"
    # what the task printed is still kept in its run dir, whole
    run_dir = task_run_dir(exp / "runs", by_mode["abort"]["id"])
    assert (run_dir / "stderr.txt").read_text() == "OpenBLAS error: Memory allocation still failed\n"
    assert (run_dir / "stdout.txt").read_text() == "training step 1\n"
