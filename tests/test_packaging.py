"""A non-editable install carries the built-in optimizers, objectives, workflows and site configs."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from testutil import REPO

SITES = ("summit", "polaris", "frontier", "perlmutter", "aurora")


def test_wheel_install_runs_a_builtin_workflow(tmp_path: Path) -> None:
    wheels, target, work = tmp_path / "wheels", tmp_path / "site", tmp_path / "work"
    work.mkdir()
    # the installed setuptools builds it (the test extra names it): a build-isolation venv would
    # install the same setuptools again, the larger part of this test's time, and change nothing shipped
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), str(REPO)], check=True, capture_output=True, timeout=300)
    wheel = next(wheels.glob("emews_mpi-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target)}
    # one interpreter imports the installed package and runs ``emews check ga --site S`` for every
    # shipped site config (the command's own main; a process per site cost seconds each under load)
    probe = subprocess.run([sys.executable, "-c", "import emews, emews.optimizers.ga, emews.optimizers.bayes, "
                            "emews.optimizers.mbo, emews.contrib.optuna; print(emews.__file__); "
                            "from emews.cli import main; "
                            f"print([main(['check', 'ga', '--site', s, '--set', 'scheduler.account=ABC123']) for s in {SITES!r}])"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.startswith(str(target))
    assert probe.stdout.splitlines()[-1] == str([0] * len(SITES)), probe.stdout + probe.stderr
    proc = subprocess.run([sys.executable, "-m", "emews", "launch", "random", "--workers", "2",
                           "--set", "budget.evaluations=20", "--exp-dir", "exp"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    db = sqlite3.connect(work / "exp" / "results.db")
    assert db.execute("SELECT COUNT(*) FROM results WHERE status = 'ok'").fetchone()[0] == 20
    shipped = {p.relative_to(target).as_posix() for p in target.rglob("*.R")}
    assert {"emews/contrib/rbridge.R", "emews/optimizers/mbo.R"} <= shipped, shipped  # R code ships too
