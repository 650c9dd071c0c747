"""The site's environment on a run started here: ``Site.environment_vars`` and ``local_command``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from emews.site import load_site

#: Prints what a rank sees: its argv, pid, cwd and the variables the site should set.
REPORT = ("import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'pid': os.getpid(), "
          "'cwd': os.getcwd(), 'env': {k: os.environ.get(k) for k in "
          "('FROM_SETUP', 'FROM_VARS', 'OMP_NUM_THREADS')}}))")
HOSTILE_ARGS = ["a b", "$(touch PWNED)", "`touch PWNED`", "it's \"q\"", "x\ntouch PWNED", "-c"]


def write_site(root: Path, name: str, body: str) -> str:
    folder = root / "site-configs"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(body)
    return name


ENV_SITE = """extends: local
environment:
  setup: |
    export FROM_SETUP="set up $((6 * 7))"
    cd {cwd}
  vars: {{FROM_VARS: "a b $(touch PWNED)", OMP_NUM_THREADS: 1}}
"""


def run(command: list[str], env: dict[str, str], cwd: Path) -> tuple[dict, subprocess.Popen]:
    with subprocess.Popen(command, env={**os.environ, **env}, cwd=cwd, text=True,
                          stdout=subprocess.PIPE) as proc:
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1]), proc


def test_environment_vars_are_the_site_vars_as_strings(in_tmp: Path) -> None:
    site = load_site(write_site(in_tmp, "envsite", ENV_SITE.format(cwd="/")), environ={})
    assert site.environment_vars() == {"FROM_VARS": "a b $(touch PWNED)", "OMP_NUM_THREADS": "1"}
    site.environment_vars()["FROM_VARS"] = "changed"
    assert site.environment_vars()["FROM_VARS"] == "a b $(touch PWNED)"
    assert load_site("local", environ={}).environment_vars() == {}


def test_without_setup_the_command_is_the_launcher_line(in_tmp: Path) -> None:
    site = load_site("local", ["environment.vars.X=1"], environ={})
    command = [sys.executable, "-c", "pass"]
    assert site.local_command(3, command) == site.launch_command(3, command)


def test_setup_runs_in_the_shell_that_execs_the_real_launcher(in_tmp: Path) -> None:
    """Real mpiexec (the local site's): setup's exports and cd reach the rank, the vars too,
    and the arguments arrive unchanged, never evaluated by the shell."""
    work = in_tmp / "setup cwd"
    work.mkdir()
    site = load_site(write_site(in_tmp, "envsite", ENV_SITE.format(cwd=json.dumps(str(work)))),
                     environ={})
    command = site.local_command(1, [sys.executable, "-c", REPORT, *HOSTILE_ARGS])
    assert command[:2] == ["bash", "-c"] and command[3] == "emews"
    assert command[4:] == site.launch_command(1, [sys.executable, "-c", REPORT, *HOSTILE_ARGS])
    seen, _ = run(command, site.environment_vars(), in_tmp)
    assert seen["argv"] == HOSTILE_ARGS
    assert seen["cwd"] == str(work)
    assert seen["env"] == {"FROM_SETUP": "set up 42", "FROM_VARS": "a b $(touch PWNED)",
                           "OMP_NUM_THREADS": "1"}
    assert not list(in_tmp.rglob("PWNED"))


def test_the_launcher_replaces_the_setup_shell(in_tmp: Path) -> None:
    """``exec``: the process started is the launcher itself, so signals reach it directly."""
    name = write_site(in_tmp, "bare", "extends: local\nlauncher: {type: none, command: null}\n"
                      "environment: {setup: ['export FROM_SETUP=1']}\n")
    site = load_site(name, environ={})
    seen, proc = run(site.local_command(1, [sys.executable, "-c", REPORT]), {}, in_tmp)
    assert seen["pid"] == proc.pid
    assert seen["env"]["FROM_SETUP"] == "1"
