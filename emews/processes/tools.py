"""Running scheduler client tools, with their stderr in the error."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from emews.core.errors import EmewsError


def run_tool(
    argv: Sequence[str], *, stdin: str | None = None, timeout: float = 60.0, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a client command; EmewsError names it and carries its stderr when it fails."""
    try:
        proc = subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=None if stdin is not None else subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise EmewsError(f"{argv[0]}: command not found (is this a login node of the site?)") from None
    except subprocess.TimeoutExpired:
        raise EmewsError(f"{' '.join(argv)}: no answer after {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip() or "(no output)"
        raise EmewsError(f"{' '.join(argv)} failed with exit status {proc.returncode}: {detail}")
    return proc
