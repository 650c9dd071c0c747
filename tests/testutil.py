"""Test helpers: running the ``emews`` command for real, and workflow files in a tmp dir."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAULTY = TESTS / "objectives" / "faulty.py"


class EmewsCommand:
    """Runs ``python -m emews ...`` in a working directory, tagging every process it starts."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.token = uuid.uuid4().hex
        self.env = {**os.environ, "EMEWS_TEST_TOKEN": self.token, "PYTHONUNBUFFERED": "1"}

    def __call__(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "emews", *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"emews {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "emews", *args], cwd=self.cwd, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def leftover_processes(self) -> list[str]:
        """Command lines of live processes that carry this command's token (orphans)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if self.token.encode() in (entry / "environ").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
        return found


def write_workflow(folder: Path, name: str = "wf", **sections: Any) -> Path:
    """Write a workflow YAML built from ``sections`` over a small valid default."""
    data: dict[str, Any] = {
        "optimizer": {"name": "random", "options": {"seed": 1}},
        "objective": {"module": str(FAULTY), "function": "run"},
        "space": {"x": {"type": "float", "lower": -2.0, "upper": 2.0},
                  "mode": {"type": "constant", "value": "ok"}},
        "budget": {"evaluations": 10},
        "task": {"timeout": 30, "isolation": "process"},
    }
    data.update(sections)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
