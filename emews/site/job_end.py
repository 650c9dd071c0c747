"""When the running batch job's allocation ends, read from its batch system (UNIX time).

The optimizer rank pauses training trials a margin before this end (``walltime.margin``).
Each batch system says it differently; what is not known gives ``None`` (the caller then falls
back to the site's walltime counted from the job's start):

Slurm  ``SLURM_JOB_END_TIME``, "the UNIX timestamp for a job's projected end time", among
       sbatch(1)'s OUTPUT ENVIRONMENT VARIABLES (Slurm 21.08 and later).
PBS    no end-time variable: ``qstat -f $PBS_JOBID`` prints the job's attributes. Torque/Moab
       print ``Walltime.Remaining = SECONDS``; PBS Professional/OpenPBS print
       ``Resource_List.walltime = HH:MM:SS`` and ``stime`` (the time the job started, in
       ctime form), whose sum is the end.
LSF    the variables LSF sets for job execution (IBM Spectrum LSF 10.1, "Environment variables
       set for job execution") hold no end time: ``bjobs -noheader -hms -o runtimelimit
       $LSB_JOBID`` prints the run limit as hh:mm:ss (bjobs ``-hms``), counted here from the
       job's start as this process saw it (``started``), so a little late: the margin covers it.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from emews.site.walltime import parse_walltime

#: runs a scheduler client command and returns its standard output (``None``: it failed)
Query = Callable[[Sequence[str]], "str | None"]


def query_tool(argv: Sequence[str], timeout: float = 20.0) -> str | None:
    """Standard output of ``argv``; ``None`` when it is missing, fails or hangs."""
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def job_end_time(started: float, environ: Mapping[str, str] = os.environ, query: Query = query_tool) -> float | None:
    """The end of this batch job's allocation (UNIX time), or ``None`` when its batch system
    does not say (not in a batch job, or its client tools do not answer)."""
    slurm = environ.get("SLURM_JOB_END_TIME", "")
    if slurm.isdigit():
        return float(slurm)
    if environ.get("PBS_JOBID"):
        out = query(["qstat", "-f", environ["PBS_JOBID"]])
        return None if out is None else pbs_end(out, time.time())
    if environ.get("LSB_JOBID"):
        out = query(["bjobs", "-noheader", "-hms", "-o", "runtimelimit", environ["LSB_JOBID"]])
        limit = None if out is None else _seconds(out.strip().split("/")[0])
        return None if limit is None else started + limit
    return None


_ATTRIBUTE = re.compile(r"^\s*([\w.]+)\s*=\s*(.*?)\s*$", re.M)


def pbs_end(qstat_f: str, now: float) -> float | None:
    """The end time from ``qstat -f`` output (Torque's remaining walltime, else PBS Pro's start
    time plus the requested walltime)."""
    attributes = dict(_ATTRIBUTE.findall(qstat_f))
    remaining = attributes.get("Walltime.Remaining", "")
    if remaining.isdigit():
        return now + int(remaining)
    limit = _seconds(attributes.get("Resource_List.walltime", ""))
    if limit is None or "stime" not in attributes:
        return None
    try:
        start = time.mktime(time.strptime(attributes["stime"], "%a %b %d %H:%M:%S %Y"))
    except ValueError:
        return None
    return start + limit


def _seconds(text: str) -> int | None:
    """``HH:MM:SS`` (or ``HH:MM``) in seconds; ``None`` when it is not one."""
    try:
        return parse_walltime(text)
    except ValueError:
        return None
