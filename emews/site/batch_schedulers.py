"""Batch schedulers obtain nodes (Slurm, LSF, PBS, local): directive template, submit, state and
cancel per batch system (the site's ``scheduler:``; not the workflow's trial scheduler).

Each class is a template of ``#PREFIX`` directives built from the site, plus the
site's raw ``directives`` (with or without the prefix) appended verbatim.
"""

from __future__ import annotations

import re
import shlex
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from emews.core.errors import ConfigError, EmewsError
from emews.processes.tools import run_tool
from emews.site.layout import Layout
from emews.site.schema import SchedulerConfig, control_char
from emews.site.walltime import format_hm

QUEUED, RUNNING, DONE, UNKNOWN = "queued", "running", "done", "unknown"
#: what :meth:`BatchScheduler.lookup` says of a job id its scheduler does not know: one it has
#: forgotten since it ended (:meth:`~BatchScheduler.job_state`: ``done``), or one never submitted to it
NOT_FOUND = "not found"


def state_of(found: str) -> str:
    """``queued`` | ``running`` | ``done`` | ``unknown`` of what :meth:`BatchScheduler.lookup` found:
    a job the scheduler does not know is over (it forgets a job some time after its end)."""
    return DONE if found == NOT_FOUND else found


class BatchScheduler(ABC):
    """One batch system."""

    type: ClassVar[str]
    prefix: ClassVar[str] = ""
    output_name: ClassVar[str] = "job.out"
    #: What :meth:`output_path` accepts, for the error message.
    path_allowed: ClassVar[str] = (
        "a path without whitespace, quotes, backslashes or # (directives are not parsed by a shell)"
    )
    states: ClassVar[dict[str, str]] = {}
    #: the script goes to the submit command's standard input, not as its argument
    script_on_stdin: ClassVar[bool] = False

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config

    # -- script -------------------------------------------------------------
    @abstractmethod
    def template(self, layout: Layout, exp_dir: Path) -> list[str]:
        """Directive arguments (without the prefix) from the site's fields."""

    def output_path(self, exp_dir: Path) -> str:
        """The job's output file in ``exp_dir``, as its directive must spell it.

        Directive lines are read by the scheduler's own parser, not by a shell: a path it
        would split or cut short is a ConfigError (raised before anything is written).
        """
        text = str(exp_dir)
        bad = control_char(text) or next((c for c in text if not self._path_char_ok(c)), None)
        if bad is not None:
            raise ConfigError(
                f"the experiment directory {text!r} contains {bad!r}, which a {self.prefix} directive cannot carry",
                key="--exp-dir",
                allowed=self.path_allowed,
            )
        return f"{text}/{self.output_name}"

    def _path_char_ok(self, char: str) -> bool:
        return not char.isspace() and char not in "\"'\\#"

    def directives(self, layout: Layout, exp_dir: Path) -> list[str]:
        """Full directive lines: the template, then the raw ``directives``."""
        lines = [f"{self.prefix} {arg}" for arg in self.template(layout, exp_dir)]
        for raw in self.config.directives:
            raw = raw.strip()
            lines.append(raw if raw.startswith("#") else f"{self.prefix} {raw}")
        return lines

    # -- client commands ------------------------------------------------------
    @abstractmethod
    def submit_command(self, script: Path) -> list[str]: ...

    @abstractmethod
    def parse_job_id(self, stdout: str) -> str: ...

    @abstractmethod
    def cancel_command(self, job_id: str) -> list[str]: ...

    def submit_line(self, script: Path) -> str:
        """The submit command as a shell line (``bsub < job.sh`` when the script goes on stdin)."""
        line = shlex.join(self.submit_command(script))
        return f"{line} < {shlex.quote(str(script))}" if self.script_on_stdin else line

    def submit(self, script: Path) -> str:
        stdin = Path(script).read_text(encoding="utf-8") if self.script_on_stdin else None
        proc = run_tool(self.submit_command(script), stdin=stdin)
        return self.parse_job_id(proc.stdout)

    def cancel(self, job_id: str) -> None:
        run_tool(self.cancel_command(job_id))

    def job_state(self, job_id: str) -> str:
        """``queued`` | ``running`` | ``done`` | ``unknown``: a job the scheduler does not know is
        over (it forgets a job some time after its end)."""
        return state_of(self.lookup(job_id))

    @abstractmethod
    def lookup(self, job_id: str) -> str:
        """``queued`` | ``running`` | ``done`` | ``unknown`` | ``not found`` (:data:`NOT_FOUND`)."""

    def _map(self, code: str) -> str:
        return self.states.get(code.strip().upper(), UNKNOWN) if code.strip() else UNKNOWN

    def _bad_output(self, stdout: str) -> EmewsError:
        text = stdout.strip() or "(nothing)"
        return EmewsError(f"{self.submit_command(Path('job.sh'))[0]} printed no job id: {text}")


class SlurmScheduler(BatchScheduler):
    """Slurm: ``sbatch`` / ``squeue`` (``sacct`` fallback) / ``scancel``."""

    type = "slurm"
    prefix = "#SBATCH"
    output_name = "job-%j.out"
    states = {
        s: QUEUED
        for s in ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "REQUEUE_FED", "SUSPENDED")
    }
    states |= {s: RUNNING for s in ("RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED")}
    states |= {
        s: DONE
        for s in (
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
            "PREEMPTED",
            "BOOT_FAIL",
            "DEADLINE",
            "SPECIAL_EXIT",
            "REVOKED",
        )
    }

    def template(self, layout: Layout, exp_dir: Path) -> list[str]:
        c = self.config
        args = [f"--job-name={c.job_name}"]
        if c.account:
            args.append(f"--account={c.account}")
        if c.queue:
            args.append(f"--partition={c.queue}")
        args += [f"--nodes={c.nodes}", f"--ntasks={layout.ranks}", f"--time={c.walltime}"]
        if layout.gpus_per_rank:
            args.append(f"--gpus-per-node={layout.gpus_per_node}")
        args.append(f"--output={self.output_path(exp_dir)}")
        return args

    path_allowed = "a path without backslashes or control characters"
    #: Left unquoted in ``--output=``; anything else is double-quoted (verified with sbatch 22.05).
    _PLAIN = re.compile(r"[\w./+:@=,~%-]*")

    def _path_char_ok(self, char: str) -> bool:
        return char != "\\"

    def output_path(self, exp_dir: Path) -> str:
        """sbatch reads ``"..."`` with ``\\"`` inside, and ``%%`` is a literal ``%`` in its
        file name patterns (a backslash would turn the patterns off, so it is refused)."""
        super().output_path(exp_dir)
        path = str(exp_dir).replace("%", "%%") + "/" + self.output_name
        if self._PLAIN.fullmatch(path):
            return path
        return '"' + path.replace('"', '\\"') + '"'

    def submit_command(self, script: Path) -> list[str]:
        return ["sbatch", "--parsable", str(script)]

    def parse_job_id(self, stdout: str) -> str:
        for line in stdout.splitlines():
            match = re.match(r"^\s*(\d+)(?:;\S+)?\s*$", line) or re.search(r"Submitted batch job (\d+)", line)
            if match:
                return match.group(1)
        raise self._bad_output(stdout)

    def cancel_command(self, job_id: str) -> list[str]:
        return ["scancel", job_id]

    def lookup(self, job_id: str) -> str:
        """From squeue, else sacct; a job slurmctld has forgotten (``MinJobAge`` after its end) and
        accounting does not know either is over."""
        proc = run_tool(["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"], check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            return self._map(proc.stdout.split()[0])
        forgotten = "Invalid job id specified" in proc.stderr
        proc = run_tool(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"], check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            return self._map(proc.stdout.split()[0].split()[0])
        return NOT_FOUND if forgotten else UNKNOWN


class LsfScheduler(BatchScheduler):
    """IBM LSF: ``bsub < job.sh`` / ``bjobs`` / ``bkill`` (``-W`` is HH:MM, rounded up).

    The script goes on bsub's standard input, where every LSF reads its ``#BSUB`` lines; a script
    named as bsub's argument has them read only where ``lsf.conf`` sets ``LSB_BSUB_PARSE_SCRIPT=Y``
    (IBM Spectrum LSF 10.1, bsub ``job_script``), else it runs with none of them.
    """

    type = "lsf"
    prefix = "#BSUB"
    script_on_stdin = True
    path_allowed = (
        "a path without whitespace, quotes, backslashes, # or % (directives are not parsed by a shell, "
        "and bsub replaces %J and %I in -o)"
    )

    def _path_char_ok(self, char: str) -> bool:
        return super()._path_char_ok(char) and char != "%"

    output_name = "job-%J.out"
    states = {
        "PEND": QUEUED,
        "PSUSP": QUEUED,
        "WAIT": QUEUED,
        "RUN": RUNNING,
        "USUSP": RUNNING,
        "SSUSP": RUNNING,
        "PROV": RUNNING,
        "DONE": DONE,
        "EXIT": DONE,
        "ZOMBI": DONE,
    }

    def template(self, layout: Layout, exp_dir: Path) -> list[str]:
        c = self.config
        args = []
        if c.account:
            args.append(f"-P {c.account}")
        args.append(f"-J {c.job_name}")
        if c.queue:
            args.append(f"-q {c.queue}")
        args.append(f"-W {format_hm(c.walltime_seconds)}")
        if c.csm:  # IBM CSM's easy mode (bsub -nnodes: "the number of compute nodes required for the CSM job")
            args.append(f"-nnodes {c.nodes}")
        else:  # plain LSF: slots, spread over the nodes as the launcher places the ranks
            args.append(f"-n {layout.ranks}")
            if layout.ranks_per_node:
                args.append(f'-R "span[ptile={layout.ranks_per_node}]"')
        args.append(f"-o {self.output_path(exp_dir)}")
        return args

    def submit_command(self, script: Path) -> list[str]:
        return ["bsub"]

    def parse_job_id(self, stdout: str) -> str:
        match = re.search(r"Job <(\d+)> is submitted", stdout)
        if not match:
            raise self._bad_output(stdout)
        return match.group(1)

    def cancel_command(self, job_id: str) -> list[str]:
        return ["bkill", job_id]

    def lookup(self, job_id: str) -> str:
        """From bjobs; a job it has forgotten ("Job <N> is not found": ``CLEAN_PERIOD`` after its
        end, an hour by default) is over."""
        proc = run_tool(["bjobs", "-noheader", "-o", "stat", job_id], check=False)
        words = proc.stdout.split()
        if proc.returncode == 0 and words:
            return self._map(words[0])
        return NOT_FOUND if f"Job <{job_id}> is not found" in proc.stdout + proc.stderr else UNKNOWN


class PbsScheduler(BatchScheduler):
    """PBS Pro / OpenPBS: ``qsub`` / ``qstat -x -f`` / ``qdel``."""

    type = "pbs"
    prefix = "#PBS"
    states = {
        "Q": QUEUED,
        "H": QUEUED,
        "W": QUEUED,
        "T": QUEUED,
        "S": QUEUED,
        "U": QUEUED,
        "R": RUNNING,
        "E": RUNNING,
        "B": RUNNING,
        "X": DONE,
        "F": DONE,
        "M": DONE,
    }

    def template(self, layout: Layout, exp_dir: Path) -> list[str]:
        c = self.config
        args = [f"-N {c.job_name}"]
        if c.account:
            args.append(f"-A {c.account}")
        if c.queue:
            args.append(f"-q {c.queue}")
        args += [f"-l select={c.nodes}", f"-l walltime={c.walltime}", f"-o {self.output_path(exp_dir)}", "-j oe"]
        return args

    def submit_command(self, script: Path) -> list[str]:
        return ["qsub", str(script)]

    def parse_job_id(self, stdout: str) -> str:
        for line in stdout.splitlines():
            match = re.match(r"^\s*(\d+(?:\[\d*\])?(?:\.[\w.-]+)?)\s*$", line)
            if match:
                return match.group(1)
        raise self._bad_output(stdout)

    def cancel_command(self, job_id: str) -> list[str]:
        return ["qdel", job_id]

    def lookup(self, job_id: str) -> str:
        """From ``qstat -x -f``; a job the server does not know ("Unknown Job Id": no job history,
        or past it) is over."""
        proc = run_tool(["qstat", "-x", "-f", job_id], check=False)
        match = re.search(r"^\s*job_state\s*=\s*(\w)", proc.stdout, re.M)
        if proc.returncode == 0 and match:
            return self._map(match.group(1))
        return NOT_FOUND if "Unknown Job Id" in proc.stdout + proc.stderr else UNKNOWN


class LocalScheduler(BatchScheduler):
    """No batch system: the script is a plain shell script; nothing can be submitted."""

    type = "local"

    def template(self, layout: Layout, exp_dir: Path) -> list[str]:
        return []

    def directives(self, layout: Layout, exp_dir: Path) -> list[str]:
        return []

    def _refuse(self) -> EmewsError:
        return EmewsError("the local site has no batch scheduler; run its launch command instead")

    def submit_command(self, script: Path) -> list[str]:
        return ["bash", str(script)]

    def parse_job_id(self, stdout: str) -> str:
        raise self._refuse()

    def submit(self, script: Path) -> str:
        raise self._refuse()

    def cancel_command(self, job_id: str) -> list[str]:
        raise self._refuse()

    def lookup(self, job_id: str) -> str:
        return UNKNOWN


BATCH_SCHEDULERS: dict[str, type[BatchScheduler]] = {
    cls.type: cls for cls in (SlurmScheduler, LsfScheduler, PbsScheduler, LocalScheduler)
}


def scheduler_for(config: SchedulerConfig) -> BatchScheduler:
    """The scheduler class for ``config.type``."""
    return BATCH_SCHEDULERS[config.type](config)
