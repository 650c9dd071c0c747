"""A job's start, watched from the process that launched it (``emews launch``, ``resume``, ``attach``).

Two things go wrong in the first moments of a job, before its rank 0 can act, and only the
launching process can see them:

* **A stop that Hydra drops.** ``emews launch`` passes a SIGTERM or SIGINT on to ``mpiexec``; Hydra
  passes it on to the ranks through its proxies, and drops one that comes before its proxies run
  (the job then ran to its end). A stop that comes before the job's rank 0 has joined the
  experiment's lease (a pool's: registered in the store) is therefore also sent to rank 0 itself,
  once it has: by then every rank on its node has its stop handler (they meet in a collective
  first), and rank 0 stops the run as it stops it at the walltime margin. A stop that comes later
  goes the usual way only; rank 0 takes a repeated signal as the one it got.
* **A start that never ends.** ``MPI_Init`` waits for every rank of the job: a rank stopped before it
  (SIGSTOP, a node that froze) held every other one there until the walltime, where nothing in a
  rank can act (mpi4py holds the GIL in ``MPI_Init``). With a ``bound``, a job whose rank 0 has not
  joined within it is stopped (:attr:`JobStart.stuck`; the launcher says so in one line).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from emews.config.experiment import run_exit_status
from emews.config.lease import Owner, joined
from emews.core.errors import EXIT_FAILED, EXIT_OK, ConfigError, EmewsError
from emews.core.textfiles import write_atomic
from emews.job import shm_records, start_marks
from emews.processes.mpich_shm import mapped_by_pids
from emews.processes.tree import alive, descendants, kill_trees, with_arguments
from emews.runtime.env_seconds import seconds_from_environment
from emews.runtime.setup_bound import SETUP_TIMEOUT, setup_seconds

#: how often the lease is read while a local job's start is watched (only until rank 0 has joined):
#: a stop that came before it is handed to rank 0 this soon after it joined
POLL_SECONDS = 0.05
#: a batch job's watch starts at :data:`POLL_SECONDS` and doubles its wait up to this: its lease (a
#: pool's store) is read about once a second after the first 2.5 s, not 20 times, on a parallel file
#: system's metadata server; the bound (a minute by default) ends at most this much later, and
#: nothing else waits for the watch (it hands no stop over, and rank 0 itself starts the first task)
BATCH_POLL_SECONDS = 1.0
#: how often a batch job's watch looks whether its launcher still runs
LAUNCHER_POLL_SECONDS = 0.5
#: how long a batch job's watch that is stopped itself (``scancel``, the batch system's kill: it stops
#: every process of the job) waits for its launcher to end before it removes the ranks' marks (that a
#: rank still starting would make again); the batch system kills what is left after ~30 s
STOPPED_PATIENCE = 20.0
#: the signals that stop a batch job's watch with its job
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: the variable that sets the bound of a job's start outright (seconds)
START_TIMEOUT_VARIABLE = "EMEWS_START_TIMEOUT"
#: without it, the bound is ``EMEWS_SETUP_TIMEOUT``'s but at least this: tests and users set that one
#: low for an objective's setup, and a start that is only slow (Python's imports on a busy node) is not stuck
START_FLOOR = 60.0


def start_bound(environ: Mapping[str, str] = os.environ) -> float:
    """The bound of a job's start: ``EMEWS_START_TIMEOUT``, else ``EMEWS_SETUP_TIMEOUT`` (the setup
    bound) but at least :data:`START_FLOOR`; a :class:`ConfigError` naming the variable when one is
    no number of seconds (``emews launch``, ``resume`` and ``attach`` refuse it before the job)."""
    setup = max(setup_seconds(environ), START_FLOOR)
    return seconds_from_environment(START_TIMEOUT_VARIABLE, setup, environ)


def start_seconds(environ: Mapping[str, str]) -> float:
    """:func:`start_bound` as the watch reads it: a value that is no number of seconds counts as unset
    (refused before the job; a batch job's environment is the batch system's, and rank 0 refuses it there)."""
    try:
        setup = max(setup_seconds(environ), START_FLOOR)
    except ConfigError:
        setup = SETUP_TIMEOUT
    try:
        return seconds_from_environment(START_TIMEOUT_VARIABLE, setup, environ)
    except ConfigError:
        return setup


def not_started(seconds: float, ranks: str | None = None) -> str:
    """Why a job stopped for its start ended: not started within ``seconds``; ``ranks``: which ranks
    never came (:func:`~emews.job.start_marks.missing`), when known."""
    which = f"{ranks}: stopped or lost before it" if ranks else "one stopped or lost before MPI started"
    return (
        f"its ranks did not all start within {seconds:.0f} s ({which}; {START_TIMEOUT_VARIABLE} raises the bound); "
        "the job was stopped"
    )


class JobStart:
    """One job's start, watched (see the module). ``rank_zero``: where the job's rank 0 runs once it
    has joined, else ``None`` (an :class:`EmewsError`: it cannot tell now, the bound waits); ``bound``: stop the job when rank 0 has not joined within it (seconds
    from :meth:`begin`; ``None``: no bound); ``marks``: the folder where the job's ``ranks`` ranks
    mark their start (:mod:`~emews.job.start_marks`), to name those that never came, removed at
    :meth:`close`; ``on_stuck``: told why, before a stuck job is stopped; ``poll_max``: the longest
    wait between two looks whether rank 0 joined (from :data:`POLL_SECONDS`, doubled at each look);
    ``segments``: the job's records of MPICH segments (:mod:`~emews.job.shm_records`), where a stuck
    job's are written before it is stopped (its ranks in ``MPI_Init`` could not), for its end to remove:
    those its launcher's process tree maps, and ``job_ranks()``'s (:func:`job_ranks`: under Slurm the
    ranks are not in that tree), which are stopped with the launcher's tree; ``record_looks``: also
    write ``job_ranks()``'s at each look until rank 0 joined, each name once (a batch job's watch: a
    cancel kills its ranks in ``MPI_Init`` with the watch, before anything else could record them).
    :meth:`begin` once the job runs, :meth:`close` once it ended."""

    def __init__(
        self,
        rank_zero: Callable[[], Owner | None],
        *,
        bound: Callable[[Mapping[str, str]], float] | None = None,
        marks: Path | None = None,
        ranks: int = 0,
        on_stuck: Callable[[str], None] | None = None,
        poll_max: float = POLL_SECONDS,
        segments: Path | None = None,
        job_ranks: Callable[[], list[int]] | None = None,
        record_looks: bool = False,
    ):
        self._rank_zero = rank_zero
        self._bound = bound
        self._marks = marks
        self._ranks = ranks
        self._on_stuck = on_stuck
        self._poll_max = poll_max
        self._segments = segments
        self._job_ranks = job_ranks
        self._looked_at = job_ranks if record_looks else None  # whose segments each look records
        self._recorded: set[str] = set()  # the segments written to ``segments`` (by the watch's thread)
        self._ended = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending: int | None = None  # a stop to hand to rank 0 once it has joined
        self._joined = False
        #: why the job was stopped for not starting within the bound (:func:`not_started`), else ``None``
        self.stuck: str | None = None

    def begin(self, pid: int, environ: Mapping[str, str]) -> None:
        """The job was started (``pid``: its launcher's, stopped with its process tree; ``environ``:
        its environment, where the bound is read)."""
        if self._bound is not None:
            seconds = self._bound(environ)
            deadline = time.monotonic() + seconds
            self._watch(lambda: self._expire(pid, deadline, seconds))

    @property
    def watching(self) -> bool:
        """Whether the start is still watched (rank 0 has not joined, and the job was not stopped)."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, signum: int) -> None:
        """A stop signal was forwarded to the job: if rank 0 has not joined yet, send it there once it has."""
        with self._lock:
            if self._joined or self._pending is not None:
                return
            self._pending = signum
        self._watch(lambda: False)

    def _watch(self, expired: Callable[[], bool]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, args=(expired,), name="emews-job-start", daemon=True)
            self._thread.start()

    def _run(self, expired: Callable[[], bool]) -> None:
        wait = POLL_SECONDS
        while not self._ended.wait(wait):
            wait = min(wait * 2, self._poll_max)
            if self._looked_at is not None:
                self._record(self._looked_at())
            try:
                owner = self._rank_zero()
            except EmewsError:  # cannot tell now (a pool's store that does not answer): asked again, not stopped
                continue
            if owner is not None:
                with self._lock:
                    self._joined, signum = True, self._pending
                if signum is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):  # it ended meanwhile
                        os.kill(owner.pid, signum)
                if self._marks is not None:  # every rank passed MPI_Init: now, before the job may be moved
                    start_marks.remove(self._marks)
                return
            if expired():
                return

    def _expire(self, pid: int, deadline: float, seconds: float) -> bool:
        """Stop the job if its start is past ``deadline`` (its bound, ``seconds`` long)."""
        if time.monotonic() < deadline:
            return False
        why = not_started(seconds, None if self._marks is None else start_marks.missing(self._marks, self._ranks))
        if self._on_stuck is not None:
            self._on_stuck(why)  # before the stop: the job's end reads it
        self.stuck = why
        ranks = [rank for rank in self._job_ranks() if rank != os.getpid()] if self._job_ranks is not None else []
        self._record([pid, *descendants(pid), *ranks])  # the ranks waiting in MPI_Init map their node's segment
        kill_trees([pid, *ranks])  # srun's tasks wait in MPI_Init after srun is gone, until the job ends
        return True

    def _record(self, pids: list[int]) -> None:
        """Write the MPICH segments ``pids`` map, and that were not written yet, to the job's records."""
        if self._segments is None:
            return
        new = mapped_by_pids(pids) - self._recorded
        if new:
            shm_records.record(self._segments, new)
            self._recorded |= new

    def close(self) -> None:
        """The job ended: stop watching it."""
        self._ended.set()
        if self._thread is not None:
            self._thread.join()
        if self._marks is not None:
            start_marks.remove(self._marks)


def job_ranks(lease_token: str | None, pool_dir: Path | None = None) -> list[int]:
    """The processes on this node that run a rank of the job started with ``lease_token`` (of the pool at
    ``pool_dir``), by their command line (:func:`~emews.site.jobs.job_command`): ``srun``'s ranks are
    slurmstepd's children, and Hydra's ``mpiexec`` in a Slurm job starts its proxies with ``srun`` too."""
    if pool_dir is not None:
        return with_arguments("--pool", str(pool_dir))
    return with_arguments("--lease", lease_token) if lease_token else []


def watch_batch_start(
    exp_dir: Path, lease_token: str | None, ranks: int, launcher: int, pool_dir: Path | None = None
) -> int:
    """``job.sh``'s watch of its job's start, beside its launcher line (``launcher``: its pid; ``ranks``:
    the job's): the job's rank 0 joins the lease (an attached pool's, at ``pool_dir``: registers the
    pool in the store) within the start's bound, or the launcher is stopped with its process tree here
    (the batch job then ends with its script, the other nodes' ranks with it) and why is left for the
    job's exit command (:func:`batch_job_exit`); meanwhile the MPICH segments the job's ranks on this node
    map are recorded at each look, for that command to remove. Ends once rank 0 joined, the job was stopped, or the
    launcher ended, removing the ranks' marks; a stop signal (the job cancelled as it starts) ends it
    too, once the launcher ended (:data:`STOPPED_PATIENCE`); exit status 0."""
    marks = start_marks.marks_folder(exp_dir, lease_token, pool_dir)
    if marks is None:  # a script written by hand: no lease to join
        return EXIT_OK
    pool = None
    if pool_dir is not None:
        from emews.job.pool_run import current_job_id  # not a launch's watch: it imports no store
        from emews.job.pool_started import PoolLead

        pool = PoolLead(exp_dir, current_job_id(), below=launcher)
    lead = pool if pool is not None else (lambda: joined(exp_dir, str(lease_token), batch=True))

    def leave(why: str) -> None:
        write_atomic(start_marks.stuck_file(marks), [why.encode("utf-8")], durable=False)

    start = JobStart(
        lead,
        bound=start_seconds,
        marks=marks,
        ranks=ranks,
        on_stuck=leave,
        poll_max=BATCH_POLL_SECONDS,
        segments=shm_records.records_folder(exp_dir, lease_token, pool_dir),
        job_ranks=lambda: job_ranks(lease_token, pool_dir),
        record_looks=True,  # a cancel (SIGTERM to every process of the job) kills ranks in MPI_Init at once
    )
    stopped = threading.Event()
    handled = (
        threading.current_thread() is threading.main_thread()
    )  # a signal handler can be set (not in tests' threads)
    previous = {signum: signal.signal(signum, lambda *_: stopped.set()) for signum in STOP_SIGNALS} if handled else {}
    start.begin(launcher, os.environ)
    try:
        while start.watching and alive(launcher) and not stopped.is_set():
            time.sleep(LAUNCHER_POLL_SECONDS)
        patience = time.monotonic() + STOPPED_PATIENCE
        while stopped.is_set() and alive(launcher) and time.monotonic() < patience:  # its ranks end with it
            time.sleep(LAUNCHER_POLL_SECONDS / 5)
    finally:
        start.close()  # the marks removed: not left behind by a job cancelled as it started
        if pool is not None:
            pool.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return EXIT_OK


def batch_job_exit(
    exp_dir: Path,
    lease_token: str | None,
    launcher_status: int,
    since: float,
    pool_dir: Path | None = None,
    received: int = 0,
) -> int:
    """``job.sh``'s exit status (its last line): the job's, as :func:`~emews.site.jobs.job_exit_status`
    says (an attached pool's job, at ``pool_dir``: the launcher's), or 1 with the line that says why
    when the watch of its start stopped it; a job stopped by signal ``received`` (``scancel``, ``qdel``,
    ``bkill``; 0: none) exits 128 + its number, as ``emews launch`` on the local site does, with the
    line that says so when its run recorded nothing. First the MPICH segments that this job's ranks and an
    earlier job of the experiment killed whole recorded on this node go (:mod:`~emews.job.shm_records`)."""
    from emews.site.jobs import (  # not the watch's: it starts beside the ranks
        job_exit_status,
        say_ended_before_run,
        say_pool_not_started,
    )

    shm_records.sweep(shm_records.records_folder(exp_dir, lease_token, pool_dir))  # a killed rank's, this node's
    if pool_dir is None and lease_token:  # an earlier job killed whole (no end step ran): this node's
        shm_records.sweep_earlier(exp_dir, lease_token)
    marks = start_marks.marks_folder(exp_dir, lease_token, pool_dir)
    if marks is not None:
        start_marks.remove(marks)  # left by a watch that was stopped itself
        stuck = start_marks.stuck_file(marks)
        try:
            why = stuck.read_text(encoding="utf-8")
        except OSError:
            why = ""
        stuck.unlink(missing_ok=True)
        if why and pool_dir is not None:
            say_pool_not_started(exp_dir, pool_dir, why)
            return EXIT_FAILED
        if why:
            say_ended_before_run(exp_dir, why)
            return EXIT_FAILED
    if received and pool_dir is None and run_exit_status(exp_dir, since) is None:
        say_ended_before_run(exp_dir, f"stopped by {signal.Signals(received).name} as it started")
    if received:
        return 128 + received  # the ranks exit 0 to the launcher; the run's own status is in its summary
    return launcher_status if pool_dir is not None else job_exit_status(exp_dir, launcher_status, since)
