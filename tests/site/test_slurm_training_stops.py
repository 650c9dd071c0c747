"""Training trials of a batch job stopped the ways Slurm stops one, on the real loopback Slurm.

Requeued (``scontrol requeue``, as a preemption with ``PreemptMode=REQUEUE`` does): the trials pause
at their next report each time and continue in the requeued job from the step they paused at.
Slurm's stop signal reaches every process of the job, and ``mpiexec`` passes on the one it got: a
worker rank gets the SIGTERM twice, and took the second for a second stop (abort the trial at once),
so a trial never paused and a job requeued twice gave its trials up as failed ('the run stopped 2
times while this task ran').

Warned (``--signal=B:USR1@SECONDS``, the batch shell's early warning): the run pauses its trials and
stops at the walltime margin (exit status 3); the shell died of the signal before, failing the job."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import yaml
from site_helpers import LOOPBACK_SITE, emews, repo_env
from slurm_loopback import LoopbackSlurm

from emews.site.jobs import job_status
from testutil import TRAINER, events, wait_until

EPOCHS = 40


def _requeue_now(job_id: str, env: dict[str, str]) -> None:
    """``scontrol requeue`` the job, then let it start at once (a requeued job waits ~2 minutes)."""
    subprocess.run(["scontrol", "requeue", job_id], env=env, check=True, capture_output=True)
    assert wait_until(lambda: subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True,
                                             text=True).stdout.strip() == "PENDING", timeout=120)
    subprocess.run(["scontrol", "update", f"jobid={job_id}", "starttime=now"], env=env, check=True,
                   capture_output=True)


def _launch_trainers(tmp_path: Path, log: Path) -> tuple[Path, str, dict[str, str]]:
    """``emews launch`` 3 trials of ``EPOCHS`` steps on the loopback Slurm: the experiment, its job
    id and the environment its commands run with. The trials are paced (half a second a step, as
    real epochs, not a synchronization) until the file :func:`_unpaced` names exists: a test makes it
    once the job is stopped as it wants, and the trials then train their other steps at full speed."""
    env = repo_env(TRAINER_LOG=str(log), TRAINER_STEP_SLEEP="0.5", TRAINER_PACE_UNTIL=str(_unpaced(tmp_path)))
    wf = tmp_path / "wf.yaml"
    wf.write_text(yaml.safe_dump({
        "optimizer": {"name": "sweep"}, "objective": {"module": str(TRAINER), "metric": "loss"},
        "space": {"rate": {"type": "ordered", "values": [0.1, 0.2, 0.3]},
                  "epochs": {"type": "constant", "value": EPOCHS}},
        "budget": {"evaluations": 3}, "task": {"isolation": "process", "timeout": 600},
        "walltime": {"grace": 20}}))
    exp = tmp_path / "exp"
    launched = emews("launch", str(wf), "--site", str(LOOPBACK_SITE), "--exp-dir", str(exp), cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stderr
    return exp, json.loads((exp / "job.json").read_text())["job_id"], env


def _unpaced(tmp_path: Path) -> Path:
    """The file whose existence ends the trials' pacing."""
    return tmp_path / "unpaced"


def _reported_after(log: Path, starts: int) -> bool:
    """Each of the 3 trials started ``starts`` times and reported since its last start."""
    seen: dict[int, list[str]] = {}
    for event in events(log):
        seen.setdefault(event["task"], []).append(event["event"])
    return len(seen) == 3 and all(kinds.count("start") == starts and kinds[-1] == "report" for kinds in seen.values())


def _stored(exp: Path) -> tuple[list[tuple], dict[int, list[int]], dict[int, list[int]]]:
    """The results, each trial's reported steps and the steps it paused at."""
    with sqlite3.connect(exp / "results.db") as db:
        results = db.execute("SELECT id, status, error FROM results ORDER BY id").fetchall()
        steps = {t: [s for (s,) in db.execute("SELECT step FROM reports WHERE trial = ? ORDER BY step", (t,))]
                 for t in range(3)}
        pauses = {t: [s for (s,) in db.execute("SELECT step FROM pauses WHERE task = ? ORDER BY step", (t,))]
                  for t in range(3)}
    return results, steps, pauses


def test_a_job_requeued_twice_pauses_its_trials_and_continues_each_from_its_step(slurm_cluster: LoopbackSlurm,
                                                                                  tmp_path: Path) -> None:
    from test_slurm_loopback import wait_for

    log = tmp_path / "trainer.jsonl"
    exp, job_id, env = _launch_trainers(tmp_path, log)

    def reported_after(starts: int) -> bool:
        return _reported_after(log, starts)

    for starts in (1, 2):
        assert wait_until(lambda: reported_after(starts), timeout=240), events(log)
        _requeue_now(job_id, env)
    assert wait_until(lambda: reported_after(3), timeout=240), events(log)
    _unpaced(tmp_path).touch()  # requeued twice: the rest need not be paced
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    assert wait_until(lambda: not (exp / "lease.json").exists(), timeout=60)

    results, steps, pauses = _stored(exp)
    assert results == [(t, "ok", None) for t in range(3)]
    assert steps == {t: list(range(1, EPOCHS + 1)) for t in range(3)}  # every step once: none lost, none twice
    for task in range(3):
        restored = [e["restored"] for e in events(log) if e["event"] == "start" and e["task"] == task]
        assert len(pauses[task]) == 2, pauses  # paused at each requeue, not aborted
        assert restored == [0, *pauses[task]]  # each requeued job continued from the step it paused at


def test_slurms_early_warning_to_the_batch_shell_stops_at_the_walltime_margin(slurm_cluster: LoopbackSlurm,
                                                                                tmp_path: Path) -> None:
    """``scancel --batch --signal=USR1`` is what ``--signal=B:USR1@SECONDS`` sends, when Slurm chooses
    (up to a minute early): the run pauses every trial, stops as at the walltime margin (exit 3, the
    job's too), and ``emews resume`` continues each trial from the step it paused at."""
    from test_slurm_loopback import wait_for

    log = tmp_path / "trainer.jsonl"
    exp, job_id, env = _launch_trainers(tmp_path, log)
    assert wait_until(lambda: _reported_after(log, 1), timeout=240), events(log)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], env=env, check=True, capture_output=True)
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    assert wait_until(lambda: not (exp / "lease.json").exists(), timeout=60)
    shown = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True).stdout
    assert "ExitCode=3:0" in shown, shown  # the job's exit status is the run's: stopped at the walltime margin
    summary = json.loads((exp / "summary.json").read_text())
    assert summary["interrupted"] == "stopped at the walltime margin" and summary["exit_status"] == 3
    _, _, paused = _stored(exp)
    assert all(len(paused[t]) == 1 for t in range(3)), paused

    _unpaced(tmp_path).touch()
    resumed = emews("resume", str(exp), cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    assert wait_until(lambda: not (exp / "lease.json").exists(), timeout=60)
    results, steps, pauses = _stored(exp)
    assert results == [(t, "ok", None) for t in range(3)]
    assert steps == {t: list(range(1, EPOCHS + 1)) for t in range(3)}
    for task in range(3):
        restored = [e["restored"] for e in events(log) if e["event"] == "start" and e["task"] == task]
        assert restored == [0, *pauses[task]]


def _worker_rank(exp: Path, rank: int) -> int | None:
    """The PID of the job's rank ``rank`` (an ``emews run EXP`` process with ``PMI_RANK=rank``)."""
    for proc in Path("/proc").iterdir():
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"run" in command and str(exp).encode() in command and f"PMI_RANK={rank}".encode() in environ:
            return int(proc.name)
    return None


def test_a_worker_rank_killed_mid_training_ends_the_job_with_one_line_and_resume_continues(
        slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    """``kill -9`` of a worker rank (not rank 0): mpiexec ends the job (no hang); its output said only
    mpiexec's BAD TERMINATION banner, where a local launch says how to go on: it now says the job
    ended before its run did and to resume, and ``emews resume`` continues every trial from its own
    newest checkpoint."""
    import os
    import signal

    from test_slurm_loopback import wait_for

    log = tmp_path / "trainer.jsonl"
    exp, job_id, env = _launch_trainers(tmp_path, log)
    assert wait_until(lambda: _reported_after(log, 1), timeout=240), events(log)
    victim = wait_until(lambda: _worker_rank(exp, 2), timeout=30)
    assert victim is not None
    os.kill(victim, signal.SIGKILL)
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    out = (exp / f"job-{job_id}.out").read_text()
    said = [line for line in out.splitlines() if line.startswith("emews")]
    assert len(said) == 1 and "the job ended before its run did (the launcher exited with status" in said[0], out
    assert said[0].endswith(f"continue with: emews resume {exp}"), out

    _unpaced(tmp_path).touch()
    resumed = emews("resume", str(exp), cwd=tmp_path, env=env)  # takes over the lease the killed job left
    assert resumed.returncode == 0, resumed.stderr
    assert wait_for(lambda: job_status(exp), "done", 300) == "done"
    assert wait_until(lambda: not (exp / "lease.json").exists(), timeout=60)
    results, steps, _ = _stored(exp)
    assert results == [(t, "ok", None) for t in range(3)]
    for task in range(3):
        own = [e for e in events(log) if e["task"] == task]
        starts = [i for i, e in enumerate(own) if e["event"] == "start"]
        assert len(starts) == 2, own  # run again once, by the resumed job
        before = [e["step"] for e in own[: starts[1]] if e["event"] == "report"]
        restored = own[starts[1]]["restored"]
        assert 0 < restored <= max(before)  # from a checkpoint of the killed job's, not from scratch
        assert own[starts[1]]["trail"] == list(range(1, restored + 1))  # its own, not another trial's
        assert set(steps[task]) == set(range(1, EPOCHS + 1))  # nothing lost
