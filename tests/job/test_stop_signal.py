"""A stop signal to ``emews launch`` ends the job with every rank finalizing MPI and exiting on its
own, in order: rank 0 writes its outputs, the ranks leave together, mpiexec kills nobody.

Found in review: with 4 workers running training trials, SIGTERM ended with emews' own stop line and
then mpiexec's "BAD TERMINATION ... EXIT CODE: 9 ... Killed (signal 9)" (6 of 7 runs), rank 0 killed
in one of them. The cause: a worker the signal stopped first sent its last message and left, so the
STOP the optimizer rank sends every worker stayed unread; MPICH's MPI_Finalize fails on an unmatched
message ("Communicator being freed has 1 unmatched message(s)"), the rank exits without telling the
process manager it finalized, and Hydra's proxy SIGKILLs every rank still running."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from gated_job import launch_gated

from testutil import events, query, remove_listed_segments, stored_rows, trainer_workflow, wait_until

RATES = [0.5, 0.1, 0.9, 0.3, 0.05, 0.7, 0.2, 0.4]


def test_sigterm_with_four_workers_training_ends_without_a_kill(emews_cmd, tmp_path: Path) -> None:
    """Four trials (one a worker) report steps 1 and 2 and wait at a gate before step 3 (ASHA decides
    nothing before its grace period of 3). SIGTERM to ``emews launch`` once all four reported step 2;
    once rank 0 logged that running trials pause, the gate opens: each trial's step-3 report is
    answered with pause (or ASHA's stop). The launch exits 143 with emews' stop line last, no rank is killed (no
    BAD TERMINATION), ``summary.json`` says the signal, and each trial is stored paused or ended at step 3."""
    log, gate = tmp_path / "log.jsonl", tmp_path / "gate"
    emews_cmd.env.update(TRAINER_LOG=str(log), TRAINER_GATE=str(gate), TRAINER_GATE_AT="3")
    wf = trainer_workflow(tmp_path, RATES, task={"isolation": "process"},
                        trial_scheduler={"name": "asha", "options": {"max_t": 9, "grace_period": 3}},
                        walltime={"grace": 100})
    job = emews_cmd.popen("launch", str(wf), "--workers", "4", "--exp-dir", "exp")
    exp = tmp_path / "exp"

    def at_the_gate() -> set[int]:
        return {e["task"] for e in events(log) if e["event"] == "report" and e["step"] == 2}

    assert wait_until(lambda: len(at_the_gate()) == 4, timeout=180), events(log)
    job.send_signal(signal.SIGTERM)
    rank0_log = exp / "emews.log"
    assert wait_until(lambda: "pause at their next report" in rank0_log.read_text(), timeout=120)
    gate.touch()
    out, err = job.communicate(timeout=240)
    assert "BAD TERMINATION" not in out + err and "signal 9" not in out + err, (out, err)
    assert job.returncode == 143, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("emews: stopped by SIGTERM: ") and "continue with: emews resume" in last, err
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["interrupted"] == "stopped by SIGTERM" and summary["exit_status"] == 143
    assert (exp / "results.csv").is_file()
    # each trial at the gate went on to step 3: paused there, or stopped by ASHA's rung 3 (a result)
    paused = dict(query(exp, "SELECT task, step FROM pauses"))
    ended = {r["id"] for r in stored_rows(exp)}
    assert set(paused.values()) <= {3} and set(paused) | ended == at_the_gate() and not set(paused) & ended
    assert "unread messages dropped" not in rank0_log.read_text()
    assert emews_cmd.leftovers_after_exit() == []


@pytest.mark.parametrize("leave", ["drop", "keep"])
def test_a_message_left_unread_is_dropped_before_the_ranks_leave(leave: str, tmp_path: Path) -> None:
    """Rank 1 sends rank 0 a message nobody reads. Leaving with ``leave_together`` (``drop``) both
    ranks finalize MPI and mpiexec exits 0. With a bare barrier (``keep``) rank 0's MPI_Finalize
    fails on the unmatched message: the hazard the drop removes is real (rank 0 then exits
    without finalizing, and Hydra kills rank 1 if it still runs)."""
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    script = str(Path(__file__).resolve().parent / "unread_message_rank.py")
    try:
        done = subprocess.run([mpiexec, "-n", "2", sys.executable, script, leave, str(tmp_path)],
                              capture_output=True, text=True, timeout=240)
    finally:  # with ``keep`` Hydra kills rank 1, and MPICH's segment stays in /dev/shm
        remove_listed_segments(tmp_path)
    said = done.stdout + done.stderr
    if leave == "drop":
        assert done.returncode == 0 and "BAD TERMINATION" not in said, said
        assert [(tmp_path / f"rank-{r}").read_text() for r in (0, 1)] == ["finalized", "finalized"]
    else:
        assert "unmatched message" in (tmp_path / "rank-0").read_text(), said


def test_a_job_that_ignores_the_forwarded_stop_is_killed_after_the_grace(monkeypatch, tmp_path: Path) -> None:
    """The launch forwards a SIGTERM to the job and gives it ``STOP_GRACE_SECONDS`` to wind down, then
    kills it. The grace was never applied: the signal arrived while the launch sat in a wait without
    a timeout, which went on after the handler ran, so a job that did not stop (a rank 0 that raised
    past its workers on a full disk) kept ``emews launch`` waiting for good. Here the job is a
    shell that ignores SIGTERM (``trap '' TERM``) and sleeps past the test's patience."""
    import os
    import threading

    import yaml

    from emews.job import launching
    from emews.site.site import load_site

    ready = tmp_path / "ready"
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump(
        {"extends": "local", "environment": {"setup": ["trap '' TERM", f"touch {ready}", "exec sleep 60"]}}))
    monkeypatch.setattr(launching, "STOP_GRACE_SECONDS", 1.0)
    assert threading.current_thread() is threading.main_thread()  # where run_here takes the signals

    def stop_when_ready() -> None:
        if wait_until(ready.exists, timeout=60):
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_ready, daemon=True).start()
    status, received = launching.run_here(load_site(str(site)), ["true"], 1)
    assert received == signal.SIGTERM
    assert status == 128 + signal.SIGKILL  # killed at the end of the grace, not ended by its sleep


def test_a_stop_signal_as_the_job_starts_is_said_in_one_line_and_resume_runs_it(emews_cmd, tmp_path: Path) -> None:
    """SIGTERM to ``emews launch`` as soon as it says the experiment starts (mpiexec starting, the ranks
    not yet able to say anything): the launch exited 143 without a word, and ``emews status`` said
    nothing of a stop. Now one line says the job was stopped as it started and how to go on (or, when
    rank 0 was far enough, its own stop line: one line either way); ``emews resume`` then runs it."""
    # the gate stays shut until the stopped run has ended: it cannot finish before the signal
    gated = launch_gated(emews_cmd, tmp_path, evaluations=4, timeout=30)
    job = gated.job
    assert job.stderr.readline().startswith("experiment ")  # printed as mpiexec is started
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=240)
    assert job.returncode == 128 + signal.SIGTERM, err
    said = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and "SIGTERM" in said[0] and "emews resume" in said[0], err
    assert emews_cmd.leftovers_after_exit() == []
    gated.gate.touch()
    resumed = emews_cmd("resume", "exp", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert len(stored_rows(tmp_path / "exp")) == 4


def test_a_stop_that_mpiexec_drops_reaches_rank_0_once_it_has_joined(emews_cmd, tmp_path: Path) -> None:
    """Hydra's mpiexec passes a stop signal on through its proxies and drops one that comes before
    they run: the job then ran to its end and the launch exited 143 with no stop line. Here the
    launcher line is a shell that drops every SIGTERM (``trap '' TERM``; mpiexec is its child), so
    only the handover can stop the run: it sends the stop to rank 0 once rank 0 has joined the lease.
    The tasks wait at a gate the test opens only after the launch ended (without the handover they
    run on until their own deadline, and the run completes)."""
    from testutil import dropping_site

    site, deaf = dropping_site(tmp_path)
    gated = launch_gated(emews_cmd, tmp_path, evaluations=4, timeout=30, deadline=60, options=("--site", str(site)))
    job = gated.job
    assert job.stderr.readline().startswith("experiment ")
    assert wait_until(deaf.exists, timeout=60)
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=240)
    assert job.returncode == 128 + signal.SIGTERM, err
    said = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and "stopped by SIGTERM" in said[0] and "emews resume" in said[0], err
    assert json.loads((tmp_path / "exp" / "summary.json").read_text())["interrupted"] == "stopped by SIGTERM"
    assert stored_rows(tmp_path / "exp") == []  # stopped while the first tasks waited at the gate
    assert emews_cmd.leftovers_after_exit() == []
    gated.gate.touch()
    resumed = emews_cmd("resume", "exp", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert len(stored_rows(tmp_path / "exp")) == 4


def test_a_killed_launch_is_named_as_the_stop(emews_cmd, tmp_path: Path) -> None:
    """``kill -9`` of ``emews launch`` while its tasks wait at the gate: ``mpiexec`` gets SIGTERM from
    its parent-death signal and the ranks stop cleanly, but ``summary.json`` and ``emews status`` said
    ``stopped by SIGTERM``, a signal nobody sent. Now they name the launch that ended (its pid) and the
    signal that reached the job; ``emews resume`` goes on."""
    gated = launch_gated(emews_cmd, tmp_path, evaluations=4, timeout=60)
    exp, launch = gated.exp, gated.job
    assert wait_until(lambda: len(gated.started()) == 2, timeout=180)
    launch.kill()
    launch.communicate(timeout=60)
    # the job ends on its own: rank 0 writes summary.json, then gives the lease up
    assert wait_until(lambda: (exp / "summary.json").is_file() and not (exp / "lease.json").exists(), timeout=240)
    said = f"stopped: its emews launch (pid {launch.pid}) ended (SIGTERM)"
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["interrupted"] == said and summary["exit_status"] == 143, summary
    status = emews_cmd("status", "exp")
    assert f"exit status 143: {said}; continue with: emews resume" in status.stdout, status.stdout
    assert emews_cmd.leftovers_after_exit() == []
    gated.gate.touch()
    resumed = emews_cmd("resume", "exp", timeout=240)
    assert resumed.returncode == 0, resumed.stderr
    assert len(stored_rows(exp)) == 4
