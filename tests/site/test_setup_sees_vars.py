"""``environment.setup`` sees the site's ``environment.vars`` in a batch job, as it does on local.

Found in review: on ``local`` every rank's environment (setup's shell included) holds the vars, but
``job.sh`` ran the setup lines before its ``export`` lines, so a setup line using a var (OLCF's
``mkdir -p $MIOPEN_USER_DB_PATH``, ``source $PROJ/venv/bin/activate``) got an empty string in a
batch job only. Both on the real loopback Slurm and on local; what setup saw is written to a file.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml
from site_helpers import LOOPBACK_SITE, RUGGED, emews, repo_env
from slurm_loopback import LoopbackSlurm
from test_slurm_loopback import wait_for

from emews.site.jobs import job_status

SETUP = 'printf "%s" "$EMEWS_PROBE_DIR" > "$EMEWS_PROBE_DIR.seen"'


def _workflow(folder: Path) -> Path:
    from testutil import write_workflow

    return write_workflow(
        folder,
        optimizer={"name": "random", "options": {"seed": 1}},
        objective={"module": str(RUGGED)},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}, "mode": {"type": "constant", "value": "x"}},
        budget={"evaluations": 2},
        task={},
    )


def _site(folder: Path, base: dict, probe: Path) -> Path:
    site = folder / "site.yaml"
    site.write_text(
        yaml.safe_dump({**base, "environment": {"setup": [SETUP], "vars": {"EMEWS_PROBE_DIR": str(probe)}}})
    )
    return site


def test_setup_sees_the_vars_on_local(in_tmp: Path) -> None:
    probe = in_tmp / "probe local"
    site = _site(in_tmp, {"extends": "local"}, probe)
    done = emews(
        "launch",
        str(_workflow(in_tmp)),
        "--site",
        str(site),
        "--exp-dir",
        str(in_tmp / "exp"),
        cwd=in_tmp,
        env=repo_env(),
    )
    assert done.returncode == 0, done.stderr
    assert Path(f"{probe}.seen").read_text() == str(probe)


def test_setup_sees_the_vars_in_a_slurm_job(slurm_cluster: LoopbackSlurm, tmp_path: Path) -> None:
    probe = tmp_path / "probe job"
    site = _site(tmp_path, yaml.safe_load(LOOPBACK_SITE.read_text()), probe)
    exp = tmp_path / "exp"
    launched = emews(
        "launch", str(_workflow(tmp_path)), "--site", str(site), "--exp-dir", str(exp), cwd=tmp_path, env=repo_env()
    )
    assert launched.returncode == 0, launched.stderr
    assert wait_for(lambda: job_status(exp), "done", 240) == "done"
    job_id = json.loads((exp / "job.json").read_text())["job_id"]
    output = (exp / f"job-{job_id}.out").read_text()
    assert json.loads((exp / "summary.json").read_text())["exit_status"] == 0, output
    assert Path(f"{probe}.seen").read_text() == str(probe), output


def test_the_local_dry_run_prints_the_line_launch_runs(in_tmp: Path) -> None:
    """Found in review: on local, ``--dry-run`` printed the bare ``mpiexec`` line, without the
    site's vars and setup lines that ``emews launch`` runs it with; the printed line, run by bash,
    now does what launch would (here the setup writes what it saw and exits before the launcher)."""
    probe = in_tmp / "probe dry"
    site = in_tmp / "site.yaml"
    site.write_text(
        yaml.safe_dump(
            {"extends": "local", "environment": {"setup": [SETUP, "exit 0"], "vars": {"EMEWS_PROBE_DIR": str(probe)}}}
        )
    )
    dry = emews("launch", str(_workflow(in_tmp)), "--site", str(site), "--dry-run", cwd=in_tmp, env=repo_env())
    assert dry.returncode == 0, dry.stderr
    line = dry.stdout.strip()
    assert not (in_tmp / "experiments").exists()
    ran = subprocess.run(["bash", "-c", line], cwd=in_tmp, env=repo_env(), capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, (line, ran.stderr)
    assert Path(f"{probe}.seen").read_text() == str(probe), line
