"""The job's start is bounded: a rank stopped (SIGSTOP, a node that froze) or killed before MPI
starts ends the job (the first within the start's bound: ``EMEWS_START_TIMEOUT``, else the setup
bound but at least a minute) with one line, exit status 1, and ``emews resume`` then runs the
experiment (test of rev59's review, its launcher-side fix: emews/job/job_start.py).

Found in review: a rank stopped before ``MPI_Init`` held every other rank in ``MPI_Init`` (mpi4py
holds the GIL there: nothing in the rank can act) until the walltime."""

from __future__ import annotations

import json
from pathlib import Path

from testutil import stopping_site, stored_rows, write_workflow


def launch_and_resume(emews_cmd, tmp_path: Path, action: str) -> str:
    """Launch 2 workers on the site of :func:`stopping_site`: it fails (exit 1, its emews lines
    returned); then, healed, resume: every evaluation runs."""
    (tmp_path / "model.py").write_text("def run(params):\n    return params['x']\n")
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}}, budget={"evaluations": 4})
    emews_cmd.env["EMEWS_START_TIMEOUT"] = "15"
    job = emews_cmd.popen("launch", str(wf), "--site", str(stopping_site(tmp_path, action)), "--workers", "2",
                          "--exp-dir", "exp")
    try:
        out, err = job.communicate(timeout=240)
    finally:  # without the bound the job waits in MPI_Init until killed
        emews_cmd.kill_all()
    assert job.returncode == 1, err
    said = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and "emews resume" in said[0], err
    assert emews_cmd.leftovers_after_exit() == []
    assert not (tmp_path / "exp" / "summary.json").exists()  # nothing ran
    assert list((tmp_path / "exp").glob(".start*")) == []  # the ranks' start marks are removed
    (tmp_path / "healed").touch()
    del emews_cmd.env["EMEWS_START_TIMEOUT"]  # the default bound: a busy machine's start is not stuck
    resumed = emews_cmd("resume", "exp", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert len(stored_rows(tmp_path / "exp")) == 4
    assert json.loads((tmp_path / "exp" / "summary.json").read_text())["exit_status"] == 0
    assert list((tmp_path / "exp").glob(".start*")) == []
    return said[0]


def test_a_rank_stopped_before_mpi_starts_ends_the_job_naming_it(emews_cmd, tmp_path: Path) -> None:
    """Rank 2 stops itself (SIGSTOP) before it execs Python: ranks 0 and 1 wait in MPI_Init (rank 0
    never joins the lease). The launch stops the job at the bound and says so; without the bound it
    ran until its walltime (the test's timeout)."""
    said = launch_and_resume(emews_cmd, tmp_path, "kill -STOP")
    assert "did not all start within 15 s (rank 2 of 3 never reached MPI_Init" in said, said


def test_a_rank_killed_before_mpi_starts_ends_the_job(emews_cmd, tmp_path: Path) -> None:
    """Rank 2 is killed (kill -9) before it execs Python: mpiexec ends the job at once (its other
    ranks with it) and the launch says so in one line."""
    said = launch_and_resume(emews_cmd, tmp_path, "kill -9")
    assert "a rank was killed" in said, said


def test_a_rank_that_only_starts_late_is_waited_for(emews_cmd, tmp_path: Path) -> None:
    """Rank 2 waits for a file before it execs Python; the test gives it once ranks 0 and 1 marked
    their start (both wait in MPI_Init, rank 2 named as missing in the marks): the job, late but
    within the bound, is not stopped and runs every evaluation; the marks are removed once it started."""
    from testutil import wait_until

    go, gate = tmp_path / "go", tmp_path / "gate"
    (tmp_path / "model.py").write_text(
        "import os, time\n\ndef run(params):\n"
        f"    while not os.path.exists({str(gate)!r}):\n        time.sleep(0.05)\n    return params['x']\n")
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}}, budget={"evaluations": 4}, task={"timeout": 200})
    emews_cmd.env["EMEWS_START_TIMEOUT"] = "200"
    site = stopping_site(tmp_path, f"until [ -e {go} ]; do sleep 0.1; done; :")
    job = emews_cmd.popen("launch", str(wf), "--site", str(site), "--workers", "2", "--exp-dir", "exp")
    try:
        from emews.job.start_marks import missing

        marks = lambda: next((tmp_path / "exp").glob(".start-*"), None)  # noqa: E731
        assert wait_until(lambda: marks() is not None and missing(marks(), 3).startswith("rank 2 of 3"), timeout=150)
        go.touch()
        # removed once rank 0 joined, while the job runs (was: at its end; after mv EXP EXP2, never)
        assert wait_until(lambda: marks() is None, timeout=150)
        assert not (tmp_path / "exp" / "summary.json").exists()  # its tasks wait at the gate: the job runs
        gate.touch()
        out, err = job.communicate(timeout=240)
    finally:
        emews_cmd.kill_all()
    assert job.returncode == 0, err
    assert len(stored_rows(tmp_path / "exp")) == 4
    assert list((tmp_path / "exp").glob(".start*")) == []
