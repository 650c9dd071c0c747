"""The processes of a running job, read from ``/proc`` (the benchmarks' one reader)."""

from __future__ import annotations

from pathlib import Path


def pids_running(*arguments: str) -> list[int]:
    """Processes whose command line has every one of ``arguments`` as an argument; the
    ``mpiexec`` that started them is not one of them."""
    wanted = [a.encode() for a in arguments]
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if all(w in cmd for w in wanted) and b"mpiexec" not in cmd[0]:
                found.append(int(entry.name))
    return found
