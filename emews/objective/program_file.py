"""Whether a command objective's program file can be run as it is named (``[./model.sh]``).

The kernel runs a file that is executable and is either a binary or a script whose first line
is ``#!interpreter``. A script saved without that line, without ``chmod +x`` or with Windows
line endings (``#!/bin/sh\\r``) is refused by ``exec`` with a message that names none of this
(``Exec format error``, ``Permission denied``, ``No such file or directory``): this says which.
"""

from __future__ import annotations

import os
from pathlib import Path

#: how much of the file is read to tell a script from a binary
HEAD_BYTES = 1024


def program_problem(path: Path) -> str | None:
    """Why ``path`` (a program named with a ``/``) cannot be run; ``None`` when it can, or when
    nothing can be said without running it (a binary, a file that cannot be read)."""
    if not path.exists():
        return "not found"
    if path.is_dir():
        return "is a directory, not a program"
    if not os.access(path, os.X_OK):
        return f"is not executable: make it so (chmod +x {path.name}) or name its interpreter first ([sh, {path.name}])"
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:
        return None
    if b"\0" in head or head.startswith(b"\x7fELF"):
        return None  # a binary: exec knows it, or says so itself
    if not head.startswith(b"#!"):
        return (
            "has no interpreter line, so the system cannot run it: make its first line one "
            f"(#!/bin/sh, #!/usr/bin/env python3) or name its interpreter first ([python3, {path.name}])"
        )
    if head.split(b"\n", 1)[0].endswith(b"\r"):
        return "has Windows line endings (its #! line ends in a carriage return): convert it with dos2unix"
    return None
