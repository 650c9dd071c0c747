"""Whether a command objective's program file can be run as it is named (``[./model.sh]``).

The kernel runs a file that is executable and is either a binary or a script whose first line
is ``#!interpreter``. A script saved without that line, without ``chmod +x`` or with Windows
line endings (``#!/bin/sh\\r``) is refused by ``exec`` with a message that names none of this
(``Exec format error``, ``Permission denied``, ``No such file or directory``): this says which.
"""

from __future__ import annotations

import os
import shutil
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


def interpreter_problem(path: Path, search_path: str | None = None) -> str | None:
    """Why the interpreter ``path``'s ``#!`` line names cannot be run here (``#!/opt/x/python3`` that
    does not exist, ``#!/usr/bin/env python3.12`` with no ``python3.12`` on ``search_path``, default
    ``$PATH``); ``None`` when it can, or when ``path`` is no script with a readable ``#!`` line. The
    kernel's ``exec`` says only "No such file or directory", of the script."""
    try:
        with path.open("rb") as handle:
            line = handle.readline(HEAD_BYTES)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode(errors="replace").split()
    if not words:
        return None
    interpreter = words[0]
    if Path(interpreter).name == "env":
        named = next((word for word in words[1:] if not word.startswith("-") and "=" not in word), None)
        if named is None or shutil.which(named, path=search_path) is not None:
            return None
        return f"its #! line runs {named!r} through env, and no {named} is on PATH here"
    if os.access(interpreter, os.X_OK) and not os.path.isdir(interpreter):
        return None
    what = "is not executable" if os.path.exists(interpreter) else "does not exist"
    return f"its #! line names the interpreter {interpreter}, which {what} here"
