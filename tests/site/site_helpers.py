"""Helpers shared by the site tests (a uniquely named module, unlike ``conftest``)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
LOOPBACK_SITE = HERE / "slurm-loopback.yaml"
RUGGED = HERE.parent / "objectives" / "rugged.py"
REPO = HERE.parents[1]


def repo_env(**extra: str) -> dict[str, str]:
    """This environment with the repository first on ``PYTHONPATH`` (a batch job imports this emews)."""
    return {**os.environ, **extra, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def launch_rugged(tmp_path: Path, env: dict[str, str], *, mode: str, evaluations: int, isolation: str) -> Path:
    """``emews launch`` a random search of ``RUGGED`` (every task in ``mode``) on the loopback Slurm
    site; the experiment's folder (``tmp_path / "exp"``) once the job is submitted."""
    import yaml

    wf = tmp_path / "wf.yaml"
    wf.write_text(yaml.safe_dump({
        "optimizer": {"name": "random", "options": {"seed": 2}}, "objective": {"module": str(RUGGED)},
        "space": {"x": {"type": "float", "lower": 0.0, "upper": 1.0}, "mode": {"type": "constant", "value": mode}},
        "budget": {"evaluations": evaluations}, "task": {"isolation": isolation}}))
    exp = tmp_path / "exp"
    launched = emews("launch", str(wf), "--site", str(LOOPBACK_SITE), "--exp-dir", str(exp), cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stderr
    return exp


def emews(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -m emews ARGS`` in ``cwd``, its output captured."""
    return subprocess.run([sys.executable, "-m", "emews", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)

_FAKE = """#!/bin/bash
# Fake {name}: records its name and args (one per line), the script file and stdin, then answers.
d='{capture}'; name='{name}'
n=0; while [ -e "$d/$name.$n.argv" ]; do n=$((n+1)); done
printf '%s\\n' "$name" "$@" > "$d/$name.$n.argv"
last="${{!#}}"
if [ $# -gt 0 ] && [ -f "$last" ]; then cp "$last" "$d/$name.$n.script"; fi
cat > "$d/$name.$n.stdin"
{body}
"""


def _write_fake(bindir: Path, capture: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text(_FAKE.format(name=name, capture=capture, body=body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


class FakeTools:
    """Fake scheduler clients on PATH; ``calls(name)`` returns what each run received."""

    def __init__(self, root: Path) -> None:
        self.bin = root / "bin"
        self.capture = root / "capture"
        self.bin.mkdir(parents=True)
        self.capture.mkdir(parents=True)

    def add(self, name: str, body: str) -> None:
        _write_fake(self.bin, self.capture, name, body)

    def calls(self, name: str) -> list[list[str]]:
        files = sorted(self.capture.glob(f"{name}.*.argv"),
                       key=lambda p: int(p.name.split(".")[1]))
        return [p.read_text().splitlines() for p in files]

    def stdin(self, name: str, index: int = 0) -> str:
        return (self.capture / f"{name}.{index}.stdin").read_text()

    def script(self, name: str, index: int = 0) -> str:
        return (self.capture / f"{name}.{index}.script").read_text()


def submitted_mpiexec_line(in_tmp: Path, fake_tools: FakeTools, site: str, overrides: list[str]) -> str:
    """``emews launch random --site SITE --set ...`` into ``exp``: the ``mpiexec`` line of the job
    script the fake ``qsub`` was handed (which must be the one written into the experiment)."""
    import emews.cli
    from emews.site.jobs import JOB_SCRIPT

    sets = [arg for item in overrides for arg in ("--set", item)]
    assert emews.cli.main(["launch", "random", "--site", site, *sets, "--exp-dir", "exp"]) == 0
    script = (in_tmp / "exp" / JOB_SCRIPT).read_text()
    assert fake_tools.script("qsub") == script
    (line,) = [ln for ln in script.splitlines() if ln.startswith("mpiexec ")]
    return line


def launched_with_binding(in_tmp: Path, fake_tools: FakeTools, site: str, workers_per_node: int,
                          gpus_per_worker: int, option: str) -> list[str]:
    """:func:`submitted_mpiexec_line` of ``site`` (account ABC1) with ``workers_per_node`` workers of
    ``gpus_per_worker`` GPUs each, whose line must start every rank of the node (the optimizer's
    too) with the binding flags ``option``; the ``--set`` items, for ``load_site``."""
    overrides = [
        "scheduler.account=ABC1",
        f"launcher.workers_per_node={workers_per_node}",
        f"node.gpus_per_worker={gpus_per_worker}",
    ]
    line = submitted_mpiexec_line(in_tmp, fake_tools, site, overrides)
    ranks = workers_per_node + 1
    want = f"mpiexec -n {ranks} --ppn {ranks} {option} {sys.executable} -m emews run "
    assert line.startswith(f"{want}{(in_tmp / 'exp').resolve()} --lease "), line
    return overrides
