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


#: what :func:`thread_counters` reads of each thread
THREAD_FIELDS = ("run_ns", "wait_ns", "slices", "vcsw", "ivcsw")


def thread_counters(pids: list[int]) -> dict[str, dict[str, int]]:
    """Each thread of ``pids`` (``"<pid>/<tid>"``): CPU time and time spent runnable but waiting
    for a core (``schedstat``, ns), timeslices, voluntary and involuntary context switches."""
    out: dict[str, dict[str, int]] = {}
    for pid in pids:
        try:
            tids = [t.name for t in Path(f"/proc/{pid}/task").iterdir()]
        except OSError:
            continue
        for tid in tids:
            base = Path(f"/proc/{pid}/task/{tid}")
            try:
                run_ns, wait_ns, slices = (int(v) for v in (base / "schedstat").read_text().split())
                status = dict(
                    line.split(":\t", 1) for line in (base / "status").read_text().splitlines() if ":\t" in line
                )
            except (OSError, ValueError):
                continue
            out[f"{pid}/{tid}"] = {
                "run_ns": run_ns,
                "wait_ns": wait_ns,
                "slices": slices,
                "vcsw": int(status["voluntary_ctxt_switches"]),
                "ivcsw": int(status["nonvoluntary_ctxt_switches"]),
            }
    return out


def counters_between(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """What each thread present at both ends did in between."""
    return {t: {k: after[t][k] - before[t][k] for k in THREAD_FIELDS} for t in after if t in before}
