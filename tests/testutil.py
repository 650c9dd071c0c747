"""Test helpers: running the ``emews`` command for real, and workflow files in a tmp dir."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from emews.processes.mpich_shm import mapped_by_pids, remove_unmapped

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
FAULTY = TESTS / "objectives" / "faulty.py"
TRAINER = TESTS / "objectives" / "trainer.py"
GATED = TESTS / "objectives" / "gated.py"
KILLED = TESTS / "objectives" / "killed.py"
SHM_MAPPER = TESTS / "objectives" / "shm_mapper.py"


def wait_until(done: Callable[[], Any], timeout: float = 60.0, poll: float = 0.02) -> Any:
    """Poll ``done()`` until it returns something true (returned) or ``timeout`` passes (its last value).

    The timeout is a generous safety net against a hang, never a measurement."""
    deadline = time.monotonic() + timeout
    while True:
        value = done()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(poll)


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports: their sockets are held open together while the
    kernel picks them (one at a time, a port just let go may be picked again: 1 pair in 20,000).
    Free when picked only: a server started on one later may find it taken by another test's
    (:func:`pgserver.start_server` then tries the next)."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port where nothing listens while the block runs: it is held bound, not
    listening (a connection is refused), so no other test's server can start on it meanwhile
    (a port picked free and let go can be, and a connection then reaches that server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


class EventLog:
    """Events recorded from any thread, numbered in the order they happened.

    Tests prove overlap and order with it ("a task started while a refit ran"), never durations.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.events: list[tuple[str, Any]] = []

    def record(self, kind: str, key: Any = None) -> int:
        """Append one event; return its sequence number."""
        with self._cond:
            self.events.append((kind, key))
            self._cond.notify_all()
            return len(self.events) - 1

    def clear(self) -> None:
        with self._cond:
            self.events.clear()

    def seqs(self, kind: str) -> dict[Any, int]:
        """Key -> sequence number of the first ``kind`` event with that key."""
        with self._cond:
            found: dict[Any, int] = {}
            for seq, (k, key) in enumerate(self.events):
                if k == kind:
                    found.setdefault(key, seq)
            return found

    def spans(self, begin: str, end: str) -> list[tuple[int, int]]:
        """(begin, end) sequence numbers of every ``begin`` event matched by the ``end`` of its key."""
        ends = self.seqs(end)
        return sorted((seq, ends[key]) for key, seq in self.seqs(begin).items() if key in ends)

    def wait_until(self, holds: Callable[[list[tuple[str, Any]]], bool], timeout: float = 60.0) -> bool:
        """Block until ``holds(events)`` (or ``timeout``); whether it did."""
        with self._cond:
            return self._cond.wait_for(lambda: holds(self.events), timeout)

    def wait_for(self, kind: str, timeout: float = 60.0, after: int = -1) -> bool:
        """Block until a ``kind`` event was recorded after sequence number ``after`` (or
        ``timeout``); whether it was."""
        with self._cond:
            return self._cond.wait_for(
                lambda: any(k == kind for k, _ in self.events[after + 1:]), timeout)


#: the log that objectives run in worker threads (``run_in_threads``) and the test share
EVENTS = EventLog()


def said(proc: subprocess.Popen, timeout: float = 60) -> str:
    """For an assertion message: what ``proc`` (started in its own session) printed and its exit
    status; a process still running is killed first (its session), so that a failing wait never
    hangs on a job that waits on the test (a gate the test has not opened)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=timeout)
    return f"exit {proc.returncode}\n{out}\n{err}"


class EmewsCommand:
    """Runs ``python -m emews ...`` in a working directory, tagging every process it starts."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.token = uuid.uuid4().hex
        self.env = {**os.environ, "EMEWS_TEST_TOKEN": self.token, "PYTHONUNBUFFERED": "1"}
        self.killed_segments: set[str] = set()  # the MPICH segments the processes :meth:`kill_all` killed mapped

    def __call__(self, *args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "emews", *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"emews {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "emews", *args], cwd=self.cwd, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def leftovers_after_exit(self, timeout: float = 30.0) -> list[str]:
        """Leftover processes once the dying ones had ``timeout`` to go (children of killed ranks
        die with their parents, PDEATHSIG, but not at the same instant)."""
        if wait_until(lambda: not self.leftover_processes(), timeout):
            return []
        return self.leftover_processes()

    def leftover_processes(self) -> list[str]:
        """Command lines of live processes that carry this command's token (orphans)."""
        return list(self.processes().values())

    def processes(self) -> dict[int, str]:
        """Pid -> command line of every live process that carries this command's token."""
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if self.token.encode() in (entry / "environ").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
        return found

    def kill_all(self) -> None:
        """SIGKILL every process of the job at once (launch, mpiexec, ranks, objective children),
        as a node failure or a walltime kill does. Every process is stopped (SIGSTOP) before any is
        killed, so none sees another die first and reacts (a proxy that loses ``mpiexec`` sends its
        ranks SIGTERM, which they handle as a clean stop)."""
        stopped: set[int] = set()
        while fresh := set(self.processes()) - stopped:  # until nothing new was started meanwhile
            self._signal(fresh, signal.SIGSTOP)
            stopped |= fresh
        self.killed_segments |= mapped_by_pids(stopped)
        self._signal(stopped, signal.SIGKILL)

    def remove_killed_segments(self, timeout: float = 30.0) -> None:
        """Once the processes :meth:`kill_all` killed are gone (``timeout``), remove the MPICH segments
        they mapped that no live process maps: a killed job leaves its segment in /dev/shm, and the
        product removes it only at the experiment's next run. For a test's end (its assertions on what
        the product removed came first)."""
        wait_until(lambda: not mapped_by_pids(self.processes()) & self.killed_segments, timeout)
        remove_unmapped(self.killed_segments)
        self.killed_segments.clear()

    @staticmethod
    def _signal(pids: set[int], sig: signal.Signals) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass


class DroppingSite(NamedTuple):
    """A local site whose launcher line is a shell that drops every SIGTERM (``mpiexec`` runs as its
    child and is never passed one): a model of Hydra's ``mpiexec`` dropping a stop that comes before
    its proxies run. ``deaf`` exists once the shell drops SIGTERM."""

    site: Path
    deaf: Path


def dropping_site(folder: Path) -> DroppingSite:
    """Write :class:`DroppingSite`'s site file in ``folder``."""
    site, deaf = folder / "dropping.yaml", folder / "deaf"
    setup = ["trap '' TERM", f"touch {deaf}", '"$@"', "exit $?"]
    site.write_text(yaml.safe_dump({"extends": "local", "environment": {"setup": setup}}))
    return DroppingSite(site, deaf)


def stopping_rank(folder: Path, action: str, rank: int = 2) -> list[str]:
    """Shell lines that wrap the ranks' Python in the arguments (``"$@"``) of the launcher line: rank
    ``rank`` (``PMI_RANK``, Hydra's) then does ``action`` to itself (``kill -STOP``, ``kill -9``)
    before it execs Python, until the file ``folder/healed`` exists."""
    wrapper = folder / "rank.sh"
    wrapper.write_text(
        "#!/bin/bash\n"
        f'if [ "$PMI_RANK" = {rank} ] && [ ! -e {folder / "healed"} ]; then {action} $$; fi\n'
        'exec "$@"\n')
    wrapper.chmod(0o755)
    return [
        "args=()",
        f'for a in "$@"; do if [ "$a" = {sys.executable} ]; then args+=({wrapper} "$a"); else args+=("$a"); fi; done',
        'set -- "${args[@]}"',
    ]


def stopping_site(folder: Path, action: str) -> Path:
    """A local site whose ranks start through :func:`stopping_rank`'s shell."""
    site = folder / "stopping.yaml"
    site.write_text(yaml.safe_dump({"extends": "local", "environment": {"setup": stopping_rank(folder, action)}}))
    return site


def refused_in_one_line(capsys: Any, path: Path, *extra: str) -> str:
    """The one line ``emews check PATH`` and ``emews launch PATH`` say (the same), both exiting 2,
    no traceback, no experiment made (``capsys``: pytest's, ``extra``: more arguments to both)."""
    from emews.cli import main

    exp = path.parent / "exp-never"
    lines = []
    for command in (["check", str(path), *extra], ["launch", str(path), "--exp-dir", str(exp), *extra]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        lines.append(err.strip())
    assert lines[0] == lines[1] and not exp.exists(), lines
    return lines[0]


def stored_rows(exp: Path) -> list[dict]:
    """The rows of an experiment's results table, as dicts, in id order."""
    db = sqlite3.connect(exp / "results.db")
    db.row_factory = sqlite3.Row
    out = [dict(r) for r in db.execute("SELECT * FROM results ORDER BY id")]
    db.close()
    return out


def query(exp: Path, sql: str) -> list[tuple]:
    """Rows of ``sql`` on an experiment's store."""
    db = sqlite3.connect(exp / "results.db")
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def read_only(exp: Path, sql: str) -> list[tuple]:
    """Rows of ``sql`` on a live run's store, opened read-only (``[]`` while there is no such table yet)."""
    path = exp / "results.db"
    if not path.exists():
        return []
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return db.execute(sql).fetchall()
        finally:
            db.close()
    except sqlite3.OperationalError:
        return []


#: rank 0's log line once the walltime margin is reached, with the pause time (UNIX)
WALLTIME_LINE = re.compile(r"walltime margin reached \(pause time ([0-9.]+)")


def status_comes_to_say(cmd: EmewsCommand, text: str, exp: str = "exp", timeout: float = 120) -> None:
    """Ask ``emews status EXP`` until it says ``text``; fails with the last answer. What a running
    job shows is published asynchronously: rank 0 records a running task in the store once it has
    run half a second (``GroupCommit.record_after``), each pool tells the store its busy ranks within
    a second or so (``BUSY_EVERY``), all later under load; a status read once right after the tasks
    left their marks may predate it."""
    answers: list[str] = []

    def says() -> bool:
        status = cmd("status", exp, timeout=120)
        answers.append(f"exit {status.returncode}\n{status.stdout}{status.stderr}")
        return status.returncode == 0 and text in status.stdout

    assert wait_until(says, timeout), answers[-1]


def walltime_pause_time(exp: Path, timeout: float = 180.0) -> float | None:
    """The pause time rank 0 logs when the walltime margin is reached (waits up to ``timeout``
    for the line, a safety net; ``None`` without it)."""
    log = exp / "emews.log"
    found = wait_until(lambda: log.exists() and WALLTIME_LINE.search(log.read_text()), timeout=timeout)
    return float(found.group(1)) if found else None


def events(path: Path) -> list[dict]:
    """The JSON lines an objective logged (``[]`` before the file exists), those written whole (a
    process may be writing the last one)."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.endswith("}")]


class RecordingRunner:
    """A task runner for ``worker_loop`` that records the ids of the tasks it ran; each task looks
    for messages ``polls`` times (as a child's wait does), then ends at once with ``outcome(task)``."""

    def __init__(self, outcome: Callable[[Any], Any], polls: int = 0) -> None:
        self.outcome, self.polls = outcome, polls
        self.ran: list[int] = []

    def start(self) -> None: ...

    def close(self) -> None: ...

    def run(self, task: Any, should_abort: Callable[[], bool], team: Any = None) -> Any:
        self.ran.append(task.id)
        for _ in range(self.polls):
            should_abort()
        return self.outcome(task)


def drained(endpoint: Any) -> list:
    """The messages waiting at a transport ``endpoint`` now, in order (it holds none after)."""
    out = []
    while (msg := endpoint.poll()) is not None:
        out.append(msg)
    return out


def run_inline(make: Callable[[], Any], *, space: Any, objective: Any, budget: int, workers: int, seed: int = 0,
               **spec: Any) -> tuple[Any, Any]:
    """A run in threads (``run_in_threads``) of the optimizer ``make()`` makes on ``objective``
    (an ``ObjectiveRef``), its tasks inline, no progress line (``spec``: more ``RunSpec`` fields),
    which must end without an error: ``(its RunSummary, that optimizer)``."""
    from emews.job.wiring import RunSpec, run_in_threads

    made: list[Any] = []

    def factory() -> Any:
        made.append(make())
        return made[0]

    summary = run_in_threads(RunSpec(space=space, make_optimizer=factory, objective=objective, budget=budget, seed=seed,
                                     isolation="inline", show_progress=False, **spec), workers)
    assert summary.error is None, getattr(summary.error, "traceback", summary.error)
    return summary, made[0]


RUGGED = TESTS / "objectives" / "rugged.py"


def rugged_workflow(folder: Path, mode: str, budget: int, *, name: str = "wf", extra_space: dict | None = None,
                    optimizer: dict | None = None, task: dict | None = None) -> Path:
    """A workflow of ``objectives/rugged.py`` in ``mode`` (random search, seed 3); ``task`` replaces
    the default task section when given."""
    space = {"x": {"type": "float", "lower": 0.0, "upper": 1.0}, "mode": {"type": "constant", "value": mode},
             **(extra_space or {})}
    sections: dict[str, Any] = {"objective": {"module": str(RUGGED)}, "space": space,
                                "optimizer": optimizer or {"name": "random", "options": {"seed": 3}},
                                "budget": {"evaluations": budget}}
    if task is not None:
        sections["task"] = task
    return write_workflow(folder, name, **sections)


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



def write_gated_workflow(folder: Path, source: str, **sections: Any) -> tuple[Path, Path, Path]:
    """An objective module written from ``source`` (its ``run`` reads ``params["events"]``, a folder
    for its marks, and waits for the file ``params["gate"]``) and a workflow that runs it, with one
    float ``x`` and ``sections`` over :func:`write_workflow`'s: ``(workflow, events, gate)``."""
    module, events, gate = folder / "gated_objective.py", folder / "events", folder / "gate"
    module.write_text(source)
    events.mkdir()
    wf = write_workflow(folder, objective={"module": str(module), "metric": "loss"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "events": {"type": "constant", "value": str(events)},
                               "gate": {"type": "constant", "value": str(gate)}},
                        **sections)
    return wf, events, gate


#: an objective for :func:`write_gated_workflow` that writes a 64 KiB model into its run dir: task 0 at
#: once, every later one after the gate opens (a test fills the disk meanwhile: :func:`full_tmpfs`)
MODEL_WRITER = """
import os, time
from pathlib import Path

import emews


def run(params):
    ctx = emews.current_task()
    Path(params["events"], str(ctx.task_id)).touch()
    deadline = time.monotonic() + 120
    while ctx.task_id > 0 and not os.path.exists(params["gate"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    model = ctx.run_dir / "model.bin"
    try:
        model.write_bytes(bytes(1 << 16))
    except OSError:
        model.unlink(missing_ok=True)  # a careful writer leaves nothing: the store keeps its room
        raise
    return params["x"]
"""


def fill_but_pages(disk: Path, pages: int) -> None:
    """Fill ``disk`` with a file, then give ``pages`` pages back (0: a full disk; 1: room for one small file)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096):
                pass
    finally:
        os.close(fd)
    if pages:
        os.truncate(filler, max(filler.stat().st_size - 4096 * pages, 0))


@contextlib.contextmanager
def full_tmpfs(folder: Path) -> Iterator[Path]:
    """A real tmpfs mounted at ``folder`` with every page taken (skips where mounting is refused)."""
    folder.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        fill_but_pages(folder, 0)
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def task_1_meets_a_full_disk(job: subprocess.Popen, exp: Path, events: Path, gate: Path) -> str:
    """A :data:`MODEL_WRITER` run (:func:`write_gated_workflow`) whose task 1 makes its run dir on a full
    tmpfs once task 0 wrote its model: the job exits 1 with one ``emews`` line and no traceback, which
    names task 1's full disk and ``emews resume``; that line."""
    assert wait_until(lambda: (events / "1").exists(), timeout=180), said(job)  # task 0 wrote its model
    with full_tmpfs(exp / "runs" / "000"):  # task 1's run dir is made there, after the gate
        gate.touch()
        assert job.wait(timeout=300) == 1, said(job)
        err = job.stderr.read()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("emews")]
    assert len(lines) == 1, err
    assert "task 1 failed for want of disk space: OSError: [Errno 28] No space left on device" in lines[0], err
    assert "emews resume" in lines[0], err
    return lines[0]


def killed_workflow(folder: Path, how: str, timeout: float = 120, **sections: Any) -> tuple[Path, Path]:
    """The workflow of ``tests/objectives/killed.py`` (its log, ``how`` its first run is killed),
    one evaluation: ``(workflow, log)``; ``sections``: more of the workflow's."""
    log = folder / "log.jsonl"
    wf = write_workflow(folder, objective={"module": str(KILLED), "metric": "loss"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0},
                               "how": {"type": "constant", "value": how},
                               "log": {"type": "constant", "value": str(log)}},
                        budget={"evaluations": 1}, task={"timeout": timeout, "retries": 1, "isolation": "process"},
                        **sections)
    return wf, log


def trainer_workflow(folder: Path, rates: list[float], epochs: int = 9, name: str = "wf", **sections: Any) -> Path:
    """A sweep of the training objective (``tests/objectives/trainer.py``) over ``rates``, one
    evaluation each, ``epochs`` steps per trial; ``sections`` add or replace workflow sections."""
    sections.setdefault("optimizer", {"name": "sweep"})
    return write_workflow(
        folder, name=name,
        objective={"module": str(TRAINER), "metric": "loss"},
        space={"rate": {"type": "ordered", "values": rates}, "epochs": {"type": "constant", "value": epochs}},
        budget={"evaluations": len(rates)}, **sections)


#: what a read of an experiment (``emews status``, ``emews results``) must not load: the report's frames
#: (pandas and numpy), the workflow's validation (pydantic) and the sites (asked only of a batch job)
HEAVY_FOR_A_READ = ("pandas", "numpy", "matplotlib", "pydantic", "emews.site")

#: ``emews ARGS`` in a fresh Python that counts the store connections it opens (sqlite3's audit event;
#: psycopg's connect, when told to) and says them with the heavy modules it loaded, on stderr's last line
_COUNTED_COMMAND = """
import json, sys
opened = []
sys.addaudithook(lambda event, args: opened.append("sqlite3") if event == "sqlite3.connect" else None)
if sys.argv[1] == "postgres":
    import psycopg
    real = psycopg.connect
    def connect(*args, **kwargs):
        opened.append("psycopg")
        return real(*args, **kwargs)
    psycopg.connect = connect
from emews.cli import main
status = main(sys.argv[2:])
sys.stdout.flush()
heavy = sorted(m for m in sys.modules if m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))
print(json.dumps({"status": status, "opened": opened, "heavy": heavy}), file=sys.stderr)
"""


class CommandCost(NamedTuple):
    """What a command printed, and what it cost: the heavy modules it loaded, the connections it opened."""

    status: int
    out: str
    heavy: list[str]
    opened: list[str]
    err: str = ""  # what it said on stderr before the count


def ages_masked(text: str) -> str:
    """``text`` (what ``emews status`` printed) with its ages ("heartbeat 12 s ago", "3 min ago")
    made one word: two reads of one experiment a second apart differ only there."""
    return re.sub(r"\b\d[\w .]* ago\b", "<age> ago", text)


def command_cost(cmd: EmewsCommand, *args: str, postgres: bool = False,
                 heavy: tuple[str, ...] = HEAVY_FOR_A_READ) -> CommandCost:
    """``emews ARGS`` by ``cmd`` (its folder and environment), in a fresh Python: the modules of
    ``heavy`` (and their submodules) it loaded and the store connections it opened (``"sqlite3"`` or
    ``"psycopg"`` each; ``postgres``: count psycopg's, which the command then finds imported)."""
    code = _COUNTED_COMMAND.replace("HEAVY", repr(heavy))
    proc = subprocess.run([sys.executable, "-c", code, "postgres" if postgres else "sqlite", *args], cwd=cmd.cwd,
                          env=cmd.env, capture_output=True, text=True, timeout=120)
    *err, last = proc.stderr.strip().splitlines()
    said = json.loads(last)
    return CommandCost(said["status"], proc.stdout, said["heavy"], said["opened"], "\n".join(err))


def modules_loaded_by(imports: str, packages: tuple[str, ...], prefixes: tuple[str, ...]) -> list[str]:
    """The modules a fresh Python holds after ``import {imports}`` whose top package is one of
    ``packages`` or whose name starts with one of ``prefixes`` (what a rank or a worker would load)."""
    code = (f"import sys, {imports}\n"
            f"print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in {packages!r} "
            f"or m.startswith({prefixes!r}))))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def pbt_workflow(folder: Path, rates: list[float], epochs: int = 9, interval: int = 3) -> Path:
    """A PBT search over ``rates`` with objectives/trainer.py (``epochs`` epochs, an exploit every
    ``interval`` steps, the bottom quarter clones the top quarter and mutates ``rate``), one trial per rate."""
    return write_workflow(
        folder, optimizer={"name": "sweep"}, objective={"module": str(TESTS / "objectives" / "trainer.py"),
                                                        "metric": "loss"},
        space={"rate": {"type": "ordered", "values": rates}, "epochs": {"type": "constant", "value": epochs}},
        budget={"evaluations": len(rates)}, task={"isolation": "process", "timeout": 600},
        trial_scheduler={"name": "pbt", "options": {"perturbation_interval": interval, "quantile_fraction": 0.25,
                                                    "resample_probability": 0.0, "mutations": ["rate"]}})


#: a CANDLE GA parameter file's entries (NT3's kinds: categorical, ordered, float with sigma, int)
CANDLE_GA = [
    {"name": "activation", "type": "categorical", "element_type": "string",
     "values": ["softmax", "elu", "softplus", "softsign", "relu", "tanh", "sigmoid", "hard_sigmoid", "linear"]},
    {"name": "optimizer", "type": "categorical", "element_type": "string", "values": ["adam", "rmsprop"]},
    {"name": "dropout", "type": "float", "lower": 0, "upper": 0.9, "sigma": 0.045},
    {"name": "batch_size", "type": "ordered", "element_type": "int", "values": [16, 32, 64, 128, 256],
     "sigma": 1},
    {"name": "epochs", "type": "constant", "value": 5},
    {"name": "dense", "type": "int", "lower": 10, "upper": 500, "sigma": 50},
    {"name": "use_bn", "type": "logical"},
]


def shm_mapper_workflow(folder: Path, then: str) -> tuple[Path, Path]:
    """A workflow of one evaluation of ``objectives/shm_mapper.py`` (inline, ``then``: return, kill,
    wait for ``folder/gate``); its path and the file where its rank writes the segments it maps."""
    out = folder / "mapped"
    space = {"out": str(out), "then": then, "gate": str(folder / "gate")}
    wf = write_workflow(
        folder,
        objective={"module": str(SHM_MAPPER), "function": "run"},
        space={key: {"type": "constant", "value": value} for key, value in space.items()},
        budget={"evaluations": 1},
        task={"timeout": 600, "isolation": "inline"},
    )
    return wf, out


def segments_left(mapped: Path) -> list[str]:
    """Which of the MPICH segments listed in ``mapped`` (:func:`shm_mapper_workflow`) are still in /dev/shm;
    an AssertionError when it lists none (the rank did not write it, or mapped no segment)."""
    names = mapped.read_text().split() if mapped.exists() else []
    assert names and all(name.startswith("mpich_shm_") for name in names), names
    return [name for name in names if (Path("/dev/shm") / name).exists()]


#: a plain MPI job that writes each rank's segments to ``OUT/rank-N`` and then, rank 1, kills itself
#: once rank 0 wrote its own (``kill``), or every rank waits for the file ``OUT/gate`` (``wait``)
PLAIN_MPI_JOB = """\
import os, signal, sys, time
from mpi4py import MPI
from emews.processes.mpich_shm import mapped_here

out, then = sys.argv[1], sys.argv[2]
rank = MPI.COMM_WORLD.Get_rank()
with open(os.path.join(out, f"rank-{rank}.tmp"), "w") as f:
    f.write("\\n".join(mapped_here()))
os.rename(os.path.join(out, f"rank-{rank}.tmp"), os.path.join(out, f"rank-{rank}"))
if then == "kill" and rank == 1:
    while not os.path.exists(os.path.join(out, "rank-0")):  # rank 0 said its segments: mpiexec may kill it
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)
while not os.path.exists(os.path.join(out, "gate")):
    time.sleep(0.1)
MPI.COMM_WORLD.Barrier()
"""


class PlainJob:
    """:data:`PLAIN_MPI_JOB` under the mpiexec next to this Python, 2 ranks, in ``folder`` (``env``: its
    environment, this process's by default)."""

    def __init__(self, folder: Path, then: str, env: dict[str, str] | None = None) -> None:
        folder.mkdir()
        (folder / "job.py").write_text(PLAIN_MPI_JOB)
        self.folder = folder
        mpiexec = Path(sys.executable).parent / "mpiexec"
        self.proc = subprocess.Popen(
            [str(mpiexec), "-n", "2", sys.executable, str(folder / "job.py"), str(folder), then],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=env,
        )

    def mapped(self) -> list[str]:
        """The segments its ranks mapped, once both said."""
        assert wait_until(lambda: all((self.folder / f"rank-{r}").exists() for r in (0, 1)), timeout=120), said(
            self.proc
        )
        names = sorted({n for r in (0, 1) for n in (self.folder / f"rank-{r}").read_text().split()})
        assert names, said(self.proc)
        return names

    def end(self) -> None:
        (self.folder / "gate").touch()
        try:
            self.proc.communicate(timeout=120)
        finally:
            said(self.proc)  # killed, should it not have ended


def remove_listed_segments(folder: Path) -> None:
    """Remove the MPICH segments the ranks of an MPI job a test ran itself listed in ``folder/segments-N``
    (each rank writes ``mapped_here()`` there) that no live process maps: a job whose rank was killed
    leaves its segment in /dev/shm, and no emews launch is there to remove it."""
    remove_unmapped(name for listed in folder.glob("segments-*") for name in listed.read_text().split())
