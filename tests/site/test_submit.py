"""Submitting through fake ``bsub``/``qsub`` on PATH: what is submitted and how ids parse."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import emews.cli

from site_helpers import FakeTools
from emews.core.errors import ConfigError, EmewsError
from emews.site import load_site
from emews.site.jobs import (JOB_RECORD, JOB_SCRIPT, cancel_experiment, exit_command, job_command, job_status,
                             read_job, submit_experiment)
from emews.site.batch_schedulers import LsfScheduler, PbsScheduler, SlurmScheduler
from emews.site.schema import SchedulerConfig


def test_lsf_submit_records_the_job(in_tmp: Path, fake_tools: FakeTools) -> None:
    site = load_site("summit", ["scheduler.account=ABC123"], environ={})
    exp = in_tmp / "exp"
    job_id = submit_experiment(site, exp, site.total_workers(None), dry_run=False)
    assert job_id == "12345"
    script = exp.resolve() / JOB_SCRIPT
    # on standard input: bsub reads #BSUB lines there on every LSF; from a script named as its
    # argument only where lsf.conf sets LSB_BSUB_PARSE_SCRIPT=Y (else it runs it with none of them)
    assert fake_tools.calls("bsub") == [["bsub"]]
    assert fake_tools.stdin("bsub") == script.read_text()
    assert "#BSUB -P ABC123" in script.read_text()
    lines = script.read_text().rstrip().splitlines()
    launcher_line = lines[lines.index("emews_launcher=$!") - 1]  # in the background: the early warning's trap runs
    assert launcher_line.endswith(" ".join(job_command(exp.resolve())) + " &")
    # the stop signals ignored there: the end step outlives LSF's SIGTERM that follows its SIGINT
    assert lines[-1] == (
        f'trap "" TERM INT HUP; exec {" ".join(exit_command(exp.resolve()))} "$emews_status" "$emews_started" '
        '"$emews_signal"'
    )
    record = json.loads((exp / JOB_RECORD).read_text())
    assert record["job_id"] == "12345" and record["site"] == "summit"
    assert record["submitted"] and record["scheduler"] == "lsf"
    assert job_status(exp) == "running"
    cancel_experiment(exp)
    assert fake_tools.calls("bkill") == [["bkill", "12345"]]


def test_the_lsf_dry_run_shows_the_script_on_standard_input(
    in_tmp: Path, fake_tools: FakeTools, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = emews.cli.main(["launch", "random", "--site", "summit", "--set", "scheduler.account=ABC1", "--dry-run"])
    assert rc == 0
    script = in_tmp.resolve() / "experiments" / "random-001" / JOB_SCRIPT
    assert capsys.readouterr().out.rstrip().endswith(f"submits it with: bsub < {script}")
    assert fake_tools.calls("bsub") == [] and not script.parent.exists()


def test_pbs_submit_keeps_the_full_job_id(in_tmp: Path, fake_tools: FakeTools) -> None:
    site = load_site("polaris", ["scheduler.account=ABC123"], environ={})
    exp = in_tmp / "exp"
    assert submit_experiment(site, exp, 3) == "12345.polaris-pbs-01"
    assert fake_tools.calls("qsub") == [["qsub", str(exp.resolve() / JOB_SCRIPT)]]
    assert "#PBS -l filesystems=home:eagle" in fake_tools.script("qsub")
    assert read_job(exp)["job_id"] == "12345.polaris-pbs-01"
    assert job_status(exp) == "queued"
    assert fake_tools.calls("qstat") == [["qstat", "-x", "-f", "12345.polaris-pbs-01"]]
    cancel_experiment(exp)
    assert fake_tools.calls("qdel") == [["qdel", "12345.polaris-pbs-01"]]


def test_dry_run_writes_the_script_and_submits_nothing(in_tmp: Path, fake_tools: FakeTools) -> None:
    site = load_site("aurora", ["scheduler.account=ABC123"], environ={})
    exp = in_tmp / "exp"
    assert submit_experiment(site, exp, 11, dry_run=True) is None
    assert (exp / JOB_SCRIPT).is_file() and not (exp / JOB_RECORD).exists()
    assert fake_tools.calls("qsub") == []
    assert site.submit_command(exp / JOB_SCRIPT) == ["qsub", str(exp / JOB_SCRIPT)]


@pytest.mark.parametrize("site_name,overrides,key", [
    ("summit", [], "scheduler.account"),
    ("polaris", ["scheduler.account=A", "launcher.workers_per_node=4"],
     "launcher.workers_per_node"),
])
def test_config_errors_come_before_submission(in_tmp: Path, fake_tools: FakeTools,
                                              site_name: str, overrides: list[str],
                                              key: str) -> None:
    with pytest.raises(ConfigError) as info:  # polaris: its GPUs, which its cores follow, when loaded
        site = load_site(site_name, overrides, environ={})
        submit_experiment(site, in_tmp / "exp", site.config.launcher.workers_per_node)
    assert info.value.key == key
    assert fake_tools.calls("bsub") == fake_tools.calls("qsub") == []
    assert not (in_tmp / "exp" / JOB_SCRIPT).exists()


def test_scheduler_rejection_carries_its_stderr(in_tmp: Path, fake_tools: FakeTools) -> None:
    fake_tools.add("bsub", 'echo "Project XYZ: user not a member. Job not submitted." >&2; '
                           'exit 255')
    site = load_site("summit", ["scheduler.account=XYZ"], environ={})
    with pytest.raises(EmewsError) as info:
        submit_experiment(site, in_tmp / "exp", 5)
    assert "user not a member" in str(info.value) and "255" in str(info.value)
    assert not (in_tmp / "exp" / JOB_RECORD).exists()


def test_unparsable_answer_is_an_error(in_tmp: Path, fake_tools: FakeTools) -> None:
    fake_tools.add("qsub", 'echo "qsub: would you like a coffee?"')
    site = load_site("polaris", ["scheduler.account=A"], environ={})
    with pytest.raises(EmewsError) as info:
        site.submit(site_script(in_tmp, site))
    assert "no job id" in str(info.value)


def site_script(tmp: Path, site) -> Path:  # noqa: ANN001
    path = tmp / "job.sh"
    path.write_text(site.render_batch_script(tmp, 3, ["true"]))
    return path


def test_missing_client_says_so(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(in_tmp))
    site = load_site("summit", ["scheduler.account=A"], environ={})
    with pytest.raises(EmewsError) as info:
        site.submit(site_script(in_tmp, site))
    assert "bsub: command not found" in str(info.value)


def test_local_site_has_nothing_to_submit(in_tmp: Path) -> None:
    site = load_site("local", environ={})
    with pytest.raises(EmewsError):
        site.submit(in_tmp / "job.sh")
    assert site.job_state("1") == "unknown"


def test_status_without_a_job_record(in_tmp: Path) -> None:
    with pytest.raises(EmewsError) as info:
        job_status(in_tmp)
    assert "no batch job" in str(info.value)


@pytest.mark.parametrize("text,expected", [
    ("Submitted batch job 4242\n", "4242"), ("4242\n", "4242"), ("4242;cluster\n", "4242")])
def test_slurm_id_parsing(text: str, expected: str) -> None:
    assert SlurmScheduler(SchedulerConfig(type="slurm")).parse_job_id(text) == expected


@pytest.mark.parametrize("cls,code,state", [
    (SlurmScheduler, "PENDING", "queued"), (SlurmScheduler, "RUNNING", "running"),
    (SlurmScheduler, "CANCELLED", "done"), (SlurmScheduler, "", "unknown"),
    (LsfScheduler, "PEND", "queued"), (LsfScheduler, "EXIT", "done"),
    (PbsScheduler, "R", "running"), (PbsScheduler, "F", "done"), (PbsScheduler, "?", "unknown"),
])
def test_state_codes(cls, code: str, state: str) -> None:  # noqa: ANN001
    assert cls(SchedulerConfig(type=cls.type))._map(code) == state


@pytest.mark.parametrize("umask,mode", [(0o077, 0o700), (0o022, 0o755), (0o027, 0o750)])
def test_job_script_mode_follows_the_umask(in_tmp: Path, umask: int, mode: int) -> None:
    """job.sh may hold secrets (environment.vars): it is as private as the user's other files."""
    site = load_site("frontier", ["scheduler.account=A", "environment.vars.API_TOKEN=s3cr3t"],
                     environ={})
    old = os.umask(umask)
    try:
        submit_experiment(site, in_tmp / "exp", 3, dry_run=True)
    finally:
        os.umask(old)
    script = in_tmp / "exp" / JOB_SCRIPT
    assert stat.S_IMODE(script.stat().st_mode) == mode
    assert "export API_TOKEN=s3cr3t" in script.read_text()
    assert sorted(p.name for p in script.parent.iterdir()) == [JOB_SCRIPT]


@pytest.mark.parametrize("site_name,tool,answer", [
    ("summit", "bjobs", 'echo "Job <$4> is not found" >&2; exit 255'),
    ("polaris", "qstat", 'echo "qstat: Unknown Job Id $3" >&2; exit 153'),
])
def test_a_job_the_scheduler_has_forgotten_is_done(in_tmp: Path, fake_tools: FakeTools, site_name: str,
                                                   tool: str, answer: str) -> None:
    """LSF forgets a finished job after CLEAN_PERIOD (an hour by default), PBS without job history at
    once: the job was "unknown", so a lease a killed job left (no release) blocked emews resume for
    good ("in use by ... batch job N": wait, or emews cancel, neither of which ends it)."""
    site = load_site(site_name, ["scheduler.account=A"], environ={})
    exp = in_tmp / "exp"
    job_id = submit_experiment(site, exp, 3)
    fake_tools.add(tool, answer)
    assert job_status(exp) == "done"
    fake_tools.add(tool, 'echo "cannot connect to the server" >&2; exit 1')  # not an answer about the job
    assert job_status(exp) == "unknown", job_id
