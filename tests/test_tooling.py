"""The linter, the formatter and the type checker pass over ``emews/`` and ``optimizers/`` (issue 29).

    python -m pytest -q tests/test_tooling.py

CI runs them here, through the README's test command: each tool runs from the repository root
with the configuration in ``pyproject.toml`` (``[tool.ruff]``, ``[tool.mypy]``), as a developer
runs it by hand:

    ruff check emews optimizers
    ruff format --check emews optimizers
    mypy
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from testutil import REPO

SOURCES = ["emews", "optimizers"]


def tool(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``python -m <tool> ...`` from the repository root (so that it reads ``pyproject.toml``)."""
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def passes(proc: subprocess.CompletedProcess[str]) -> bool:
    """True when the tool exited 0; otherwise its whole output is printed for the failure report."""
    if proc.returncode != 0:
        print(f"$ {' '.join(proc.args[2:])}  (exit {proc.returncode})\n{proc.stdout}{proc.stderr}")
    return proc.returncode == 0


def test_ruff_lint_passes() -> None:
    """Pyflakes, pycodestyle, import order, bugbear, the complexity limit (15) and pyupgrade."""
    assert passes(tool("ruff", "check", "--no-cache", "--output-format", "concise", *SOURCES))


def test_ruff_format_passes() -> None:
    """Every file is as `ruff format` writes it."""
    assert passes(tool("ruff", "format", "--check", "--no-cache", *SOURCES))


def test_mypy_passes() -> None:
    """The type checker, over the files and with the settings in ``[tool.mypy]``."""
    assert passes(tool("mypy"))

