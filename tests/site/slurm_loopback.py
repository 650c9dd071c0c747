"""A one-node Slurm cluster on 127.0.0.1 for tests (see /work/shared/SLURM-ON-LOOPBACK.md).

munged runs with its own key and socket, slurmctld and slurmd with a temporary
slurm.conf on free ports; every daemon is our child, stopped by its PID.
Clients need ``SLURM_CONF`` (see :attr:`LoopbackSlurm.env`).

Run by hand: ``python tests/site/slurm_loopback.py`` prints the SLURM_CONF to
export and keeps the cluster up until Ctrl-C.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, also when run by hand
from testutil import free_ports  # noqa: E402

DAEMONS = ("munged", "mungekey", "munge", "unmunge", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")
APT_PACKAGES = ("slurm-wlm", "munge")
#: the first job ids a cluster may take (below Slurm's MaxJobId, 67,043,328 by default)
FIRST_JOB_IDS = range(1_000, 60_000_000)
#: the variable that marks a cluster's daemons and what they start (its value: :attr:`LoopbackSlurm.mark`)
DAEMON_MARK = "EMEWS_LOOPBACK_SLURM"


def missing_tools() -> list[str]:
    """Programs the cluster needs that are not installed."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [tool for tool in DAEMONS if shutil.which(tool, path=search) is None]


#: the cgroup v1 controller Slurm's proctrack/cgroup puts a job's processes in (cgroup/v1 plugin)
FREEZER = Path("/sys/fs/cgroup/freezer")
#: the cgroup v1 controller Slurm's task/cgroup holds a job to its ``--mem`` with (ConstrainRAMSpace)
MEMORY = Path("/sys/fs/cgroup/memory")


def cgroup_missing(memory: bool = False) -> str:
    """What a cluster with proctrack/cgroup (and ``memory``: a job's ``--mem`` enforced) lacks here
    ("": nothing): a writable cgroup v1 freezer (and memory) hierarchy (Slurm 22.05's cgroup/v2
    plugin wants systemd, which does not run here)."""
    for controller in (FREEZER, MEMORY) if memory else (FREEZER,):
        if not (controller / "tasks").is_file() or not os.access(controller, os.W_OK):
            return f"a writable cgroup v1 {controller.name} hierarchy at {controller}"
    return ""


def _tool(name: str) -> str:
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which(name, path=search)
    if not found:
        raise RuntimeError(f"{name} is not installed (apt-get install {' '.join(APT_PACKAGES)})")
    return found


def kill_job_processes(job_id: str) -> list[int]:
    """SIGKILL every process of Slurm job ``job_id`` (its environment names the job), as a node lost or
    a ``scancel`` past its KillWait does: no process of the job has time to stop; their pids."""
    killed = []
    for proc in Path("/proc").iterdir():
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if f"SLURM_JOB_ID={job_id}".encode() in environ and proc.name.isdigit():
            try:
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
            except ProcessLookupError:
                pass
    return killed


def process_alive(pid: int) -> bool:
    """True while /proc/PID/stat shows a live (not zombie/dead) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X", "x")


class LoopbackSlurm:
    """Start/stop munged + slurmctld + slurmd in a private directory."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        gpus: int = 0,
        bind_cores: bool = False,
        cgroup: bool = False,
        memory: bool = False,
    ) -> None:
        self._own_root = root is None
        #: track a job's processes in a cgroup (proctrack/cgroup, cgroup v1's freezer: as on real
        #: clusters, every process of a step is killed when the step ends, orphans too); else by
        #: their parents (proctrack/linuxproc: an orphaned process outlives its job)
        self.cgroup = cgroup or memory
        #: enforce a job's ``--mem`` with a memory cgroup (task/cgroup, ConstrainRAMSpace, memory a
        #: consumable resource): a job past it meets the kernel's OOM killer, as on real clusters
        self.memory = memory
        self.gpus = gpus  # fake GPUs (gres gpu, devices: links to /dev/null, /dev/zero, ...)
        #: srun binds each task to its cores (task/affinity: --cpu-bind works, as on Perlmutter and
        #: Frontier); else tasks run unbound (task/none)
        self.bind_cores = bind_cores
        self.root = Path(root or tempfile.mkdtemp(prefix="emews-slurm-"))
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        #: the first job id of this cluster (slurm.conf's FirstJobId): its jobs' ids count up from it
        self.first_job_id = random.choice(FIRST_JOB_IDS)
        #: the value of :data:`DAEMON_MARK` in its daemons' environment (and what they start, slurmstepd)
        self.mark = uuid.uuid4().hex

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    # -- start ----------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> LoopbackSlurm:
        try:
            self._start_munge()
            self._write_conf()
            self._spawn("slurmctld", [_tool("slurmctld"), "-D", "-i", "-f", str(self.conf)])
            self._spawn("slurmd", [_tool("slurmd"), "-D", "-N", "localhost", "-f", str(self.conf)])
            self._wait_idle(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.stdout", "wb")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**self.env, DAEMON_MARK: self.mark},
            start_new_session=True,
        )
        log.close()

    def _start_munge(self) -> None:
        key = self.root / "munge.key"
        subprocess.run([_tool("mungekey"), "-c", "-k", str(key)], check=True, capture_output=True)
        key.chmod(0o600)
        self.munge_socket.parent.mkdir(mode=0o755)
        self.munge_socket.parent.chmod(0o755)
        self._spawn(
            "munged",
            [
                _tool("munged"),
                "-F",
                "--force",
                f"--key-file={key}",
                f"--socket={self.munge_socket}",
                f"--pid-file={self.root / 'munged.pid'}",
                f"--log-file={self.root / 'munged.log'}",
                f"--seed-file={self.root / 'munged.seed'}",
            ],
        )
        deadline = time.monotonic() + 15
        while True:
            cred = subprocess.run([_tool("munge"), "-S", str(self.munge_socket), "-n"], capture_output=True)
            if (
                cred.returncode == 0
                and subprocess.run(
                    [_tool("unmunge"), "-S", str(self.munge_socket)], input=cred.stdout, capture_output=True
                ).returncode
                == 0
            ):
                return
            if time.monotonic() > deadline or self.procs["munged"].poll() is not None:
                raise RuntimeError(f"munged did not start: {self.log('munged')}")
            time.sleep(0.1)

    def _node_line(self) -> str:
        out = subprocess.run([_tool("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
        line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
        line = re.sub(r"^NodeName=\S+", "NodeName=localhost NodeAddr=127.0.0.1", line)
        return re.sub(r"\s*UpTime=\S+", "", line)

    def _write_conf(self) -> None:
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(exist_ok=True)
        r = self.root
        ctld_port, slurmd_port = free_ports(2)
        self.conf.write_text(
            "\n".join(
                [
                    "ClusterName=emewstest",
                    "SlurmctldHost=localhost(127.0.0.1)",
                    f"SlurmctldPort={ctld_port}",
                    f"SlurmdPort={slurmd_port}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    f"StateSaveLocation={r / 'state'}",
                    f"SlurmdSpoolDir={r / 'spool'}",
                    f"SlurmctldPidFile={r / 'slurmctld.pid'}",
                    f"SlurmdPidFile={r / 'slurmd.pid'}",
                    f"SlurmctldLogFile={r / 'slurmctld.log'}",
                    f"SlurmdLogFile={r / 'slurmd.log'}",
                    f"ProctrackType=proctrack/{'cgroup' if self.cgroup else 'linuxproc'}",
                    "TaskPlugin=" + (",".join(self._task_plugins()) or "task/none"),
                    "JobAcctGatherType=jobacct_gather/none",
                    "AccountingStorageType=accounting_storage/none",
                    "SelectType=select/cons_tres",
                    f"SelectTypeParameters=CR_Core{'_Memory' if self.memory else ''}",
                    "ReturnToService=2",
                    "MpiDefault=none",
                    "MailProg=/bin/true",
                    "SchedulerParameters=batch_sched_delay=0",
                    "MinJobAge=600",
                    # job ids of their own: MPICH names a node's shared memory after the PMI job ("JOBID.STEP"
                    # under srun), so a cluster that numbered from 1 again met the segment a killed job 1.0 of
                    # an earlier cluster left in /dev/shm, and its ranks waited in MPI_Init for good
                    f"FirstJobId={self.first_job_id}",
                    *self._gpu_lines(),
                    *self._cgroup_lines(),
                    self._node_line() + (f" Gres=gpu:{self.gpus}" if self.gpus else ""),
                    "PartitionName=debug Nodes=localhost Default=YES State=UP MaxTime=INFINITE",
                ]
            )
            + "\n"
        )

    def _task_plugins(self) -> list[str]:
        """task/cgroup holds a job to its memory, task/affinity binds its tasks to their cores."""
        return [name for name, used in (("task/cgroup", self.memory), ("task/affinity", self.bind_cores)) if used]

    def _gpu_lines(self) -> list[str]:
        """slurm.conf's GresTypes line and a gres.conf naming ``gpus`` character devices: slurmd
        wants devices, and sets CUDA_VISIBLE_DEVICES from their indices (nvidia0, nvidia1, ...)."""
        if not self.gpus:
            return []
        devices = ["/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", "/dev/random", "/dev/tty"]
        if self.gpus > len(devices):
            raise ValueError(f"at most {len(devices)} fake GPUs")
        folder = self.root / "dev"
        folder.mkdir(exist_ok=True)
        for index, device in enumerate(devices[: self.gpus]):
            (folder / f"nvidia{index}").symlink_to(device)
        (self.root / "gres.conf").write_text(f"Name=gpu File={folder}/nvidia[0-{self.gpus - 1}]\n")
        return ["GresTypes=gpu"]

    def _cgroup_lines(self) -> list[str]:
        """A cgroup.conf beside slurm.conf for proctrack/cgroup: Slurm's cgroup v1 plugin, on the v1
        hierarchy this machine mounts (its freezer controller; with ``memory``, its memory controller
        holds a job to its ``--mem``); nothing else constrained."""
        if not self.cgroup:
            return []
        (self.root / "cgroup.conf").write_text(
            "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainCores=no\n"
            f"ConstrainRAMSpace={'yes' if self.memory else 'no'}\nConstrainSwapSpace=no\nConstrainDevices=no\n"
        )
        return []

    def _wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}: {self.log(name)}")
            out = subprocess.run([_tool("sinfo"), "-h", "-o", "%T"], capture_output=True, text=True, env=self.env)
            state = out.stdout.strip()
            if out.returncode == 0 and state.startswith("idle"):
                return
            time.sleep(0.2)
        raise RuntimeError(
            f"node not idle after {timeout:.0f} s (state {state!r}): {self.log('slurmctld')} {self.log('slurmd')}"
        )

    # -- stop -----------------------------------------------------------------
    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM each daemon by PID (slurmd, slurmctld, munged), SIGKILL stragglers."""
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.pop(name, None)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            deadline = time.monotonic() + 5
            while process_alive(proc.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        """SIGKILL what this cluster started and outlived its daemons: a job's slurmstepd and its
        processes (a test that failed while its job hung, e.g. ranks spinning in MPI_Init beside a
        stopped one, left them running for good, slowing every later test); :meth:`started_here`
        tells them. Nothing else: ``SLURM_CONF`` is set session-wide by the ``slurm_cluster``
        fixture, so every process a test starts carries it, an xdist worker's too."""
        spared = {os.getpid(), os.getppid()}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in spared:
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if self.started_here(environ):
                for signum in (signal.SIGCONT, signal.SIGKILL):  # a stopped one too
                    try:
                        os.kill(int(entry.name), signum)
                    except OSError:
                        break

    def started_here(self, environ: bytes) -> bool:
        """Whether the process of ``environ`` (``/proc/PID/environ``) is this cluster's: a daemon or
        what a daemon started (its :data:`DAEMON_MARK`), or a process of one of its jobs (this
        cluster's ``SLURM_CONF`` and a ``SLURM_JOB_ID`` it issued, from :attr:`first_job_id` on)."""
        env = dict(item.split(b"=", 1) for item in environ.split(b"\0") if b"=" in item)
        if env.get(DAEMON_MARK.encode()) == self.mark.encode():
            return True
        job = env.get(b"SLURM_JOB_ID", b"")
        return env.get(b"SLURM_CONF") == str(self.conf).encode() and job.isdigit() and int(job) >= self.first_job_id

    def cleanup(self) -> None:
        """Remove the private directory (only one this object created), after :meth:`stop`."""
        if self._own_root and not self.procs:
            shutil.rmtree(self.root, ignore_errors=True)

    def log(self, name: str) -> str:
        """Tail of a daemon's log (for error messages)."""
        texts = []
        for path in (self.root / f"{name}.log", self.root / f"{name}.stdout"):
            if path.is_file():
                texts.append(path.read_text(errors="replace")[-2000:])
        return "\n".join(texts) or "(no log)"

    def __enter__(self) -> LoopbackSlurm:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.cleanup()


if __name__ == "__main__":
    cluster = LoopbackSlurm().start()
    print(f"export SLURM_CONF={cluster.conf}")
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        cluster.cleanup()
