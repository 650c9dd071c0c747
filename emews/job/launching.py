"""Starting an experiment's job: what ``emews launch``, ``emews resume`` and ``emews.run`` share.

One way to do each thing: the command line parses its arguments and calls :func:`launch` or
:func:`resume`; ``emews.run`` builds the same :class:`~emews.config.workflow.Workflow` from its
arguments and calls :func:`launch`. On the ``local`` site the launcher line (``mpiexec``) runs
here, in its own session: a SIGTERM or SIGINT to this process is forwarded to it as it came, once
(a second SIGINT too: ``mpiexec`` then aborts the job), and this process waits for the job. On
another site ``job.sh`` is rendered and submitted, and the batch job owns the lease.
"""

from __future__ import annotations

import codecs
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

from emews.config.experiment import (
    SITE_FILE,
    WORKFLOW_FILE,
    create_experiment,
    next_numbered,
    read_info,
    require_experiment,
    run_exit_status,
    run_record,
    update_budget,
    update_info,
    update_site,
)
from emews.config.lease import Lease, acquire, joined
from emews.config.planned_budget import fit_to_plan
from emews.config.workflow import Workflow, load_workflow
from emews.config.yamlio import file_key
from emews.core.errors import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, ConfigError, EmewsError
from emews.core.wording import counted
from emews.job.job_environment import check_job_environment
from emews.job.job_start import JobStart, job_ranks, start_seconds
from emews.job.moved import DirectoryWatch
from emews.job.nothing_left import nothing_left, stored_and_unfinished
from emews.job.shm_records import records_folder, sweep, sweep_earlier, sweep_pools
from emews.job.start_marks import marks_folder
from emews.processes.oom import OomWatch
from emews.processes.tree import kill_trees, stop_with
from emews.site import Site, load_site
from emews.site.jobs import (
    batch_job_over,
    exit_command,
    job_command,
    say_ended_before_run,
    submit_experiment,
    watch_command,
)
from emews.site.loader import env_overridden
from emews.store import opening as stores

if TYPE_CHECKING:
    pass

#: how long the launching process waits for the job to wind down after it forwarded a stop signal
STOP_GRACE_SECONDS = 120.0
#: what ``emews resume --set`` may change
RESUME_ALLOWED = (
    "budget.evaluations=N, budget.steps=N, budget.time=HH:MM:SS|2h, walltime.limit=HH:MM:SS, walltime.margin=SECONDS, "
    "and for the resumed job's allocation scheduler.walltime=HH:MM:SS, scheduler.queue=NAME, scheduler.account=NAME"
)
#: the site keys ``emews resume --set`` may change: the next allocation's (as ``EMEWS_WALLTIME``,
#: ``EMEWS_QUEUE`` and ``EMEWS_ACCOUNT`` do), never the layout the experiment was made for
RESUME_SITE_KEYS = ("scheduler.walltime", "scheduler.queue", "scheduler.account")


@dataclass(frozen=True)
class Launched:
    """What a launch did: the experiment directory (``None`` after a dry run) and the exit status
    (the run's on a local site; 0 once a batch job is submitted)."""

    exp_dir: Path | None
    status: int


def launch(
    workflow: Workflow,
    site: Site,
    *,
    workers: int | None = None,
    exp_dir: Path | None = None,
    dry_run: bool = False,
    relay: bool = False,
    pools: int | None = None,
) -> Launched:
    """Create the experiment of ``workflow`` and run it on ``site`` (here on a local site, as a
    batch job elsewhere). ``relay``: the job's output goes through this process's ``sys.stdout`` and
    ``sys.stderr`` (a notebook's cell output), not straight to its file descriptors. ``pools``: the
    tasks go through the PostgreSQL store's shared queue, run by this many jobs of ``workers`` each
    (the first also runs the optimizer; the others are ``emews attach``'s)."""
    if workers is not None and workers < 1:
        raise ConfigError("must be at least 1", key="--workers")
    if pools is not None:
        check_pools(workflow, pools)
    workers = site.total_workers(workers)
    workflow.check_task_size(workers)
    check_job_environment()  # before anything is made: the job would refuse it (or the start's watch ignore it)
    cut = fit_to_plan(workflow)  # a sweep runs its points: the experiment's budget says so
    for line in ([cut] if cut else []) + workflow.warnings():
        print(f"emews: warning: {line}", file=sys.stderr)
    target = (exp_dir or next_numbered(Path("experiments"), workflow.name)).absolute()
    if not site.is_local:
        script = site.render_batch_script(  # validates before any write
            target,
            workers,
            job_command(target),
            exit_command=exit_command(target),
            watch_command=watch_command(target, None, workers + 1),
        )
        if dry_run:
            print(script)
            print(
                "# dry run: nothing written; emews launch writes it to job.sh and submits it with: "
                + site.submit_line(target / "job.sh")
            )
            return Launched(None, EXIT_OK)
    elif dry_run:  # what run_here starts: the site's vars, its setup lines, the launcher line
        env = [f"{key}={value}" for key, value in site.environment_vars().items()]
        print(shlex.join([*(["env", *env] if env else []), *site.local_command(workers + 1, job_command(target))]))
        return Launched(None, EXIT_OK)
    store = stores.new_store(
        workflow.model.store.url, workflow.name
    )  # a database that answers, before anything is made
    created = create_experiment(
        target,
        name=workflow.name,
        workflow=workflow.to_dict(),
        site=site.to_dict(),
        info={
            "workers": workers,
            "site": site.name,
            **({"store": store} if store else {}),
            **({"pools": pools} if pools else {}),
        },
    )
    if store is not None:
        try:
            with stores.open_store(created) as opened:  # the schema and tables: the rights to make them, now
                if pools:
                    from emews.store.pool_queue import PoolQueue

                    PoolQueue(opened).enable()  # type: ignore[arg-type]  # a PostgreSQL store (check_pools)
        except BaseException:
            shutil.rmtree(created, ignore_errors=True)
            raise
    lease = acquire(created, "emews launch")
    if site.is_local:
        with lease, LocalPools(created, workers, (pools or 1) - 1) as others:
            status = run_local(site, created, workers, lease.token, relay=relay)
            others.end(stop=status != EXIT_OK)
            return Launched(created, status)
    try:
        job_id = _submit(site, created, workers, lease)
    except BaseException:
        shutil.rmtree(created, ignore_errors=True)
        raise
    print(f"submitted job {job_id} to {site.name}; results will appear in {stores.store_place(created)}")
    if pools and pools > 1:
        from emews.job.attaching import attach

        for _ in range(pools - 1):
            attach(created, site=site, workers=workers)
    print(f"follow it with: emews status {shlex.quote(str(created))}")
    return Launched(created, EXIT_OK)


#: why ``budget.steps`` is refused with pools (at launch and at the resume of a pooled experiment)
STEPS_WITH_POOLS = "a step budget is not counted across pools yet (each pool's trials report to that pool alone)"
STEPS_WITH_POOLS_ALLOWED = "budget.evaluations or budget.time with --pools"


def check_pools(workflow: Workflow, pools: int) -> None:
    """``--pools K``: K >= 1, a PostgreSQL store, no trial scheduler (not across pools yet)."""
    if pools < 1:
        raise ConfigError("must be at least 1", key="--pools", allowed="1, 2, ... jobs sharing the experiment's queue")
    if not (workflow.model.store.url or os.environ.get("EMEWS_STORE_URL")):
        raise ConfigError(
            "worker pools need a PostgreSQL store",
            file=workflow.label,
            key="store.url",
            allowed="a postgresql:// URL in the workflow or EMEWS_STORE_URL (docs/postgres.md)",
        )
    if workflow.model.budget.steps is not None:
        raise ConfigError(STEPS_WITH_POOLS, file=workflow.label, key="budget.steps", allowed=STEPS_WITH_POOLS_ALLOWED)
    if workflow.model.trial_scheduler is not None and not workflow.make_trial_scheduler().spans_pools:
        raise ConfigError(
            f"{workflow.model.trial_scheduler.name}'s decisions do not span pools yet (promotions, "
            "exploits and waits happen in one job)",
            file=workflow.label,
            key="trial_scheduler",
            allowed="asha (variant: stopping, the default) or median with --pools; any scheduler without",
        )


class LocalPools:
    """``count`` attached pools of ``workers`` each, started here beside an experiment's first job
    (``emews attach``, each in its own session, stopped if this process dies)."""

    def __init__(self, exp_dir: Path, workers: int, count: int) -> None:
        self._command = [sys.executable or "python3", "-m", "emews", "attach", str(exp_dir), "--workers", str(workers)]
        self._count = count
        self._children: list[subprocess.Popen] = []

    def __enter__(self) -> LocalPools:
        self._children = [
            subprocess.Popen(self._command, start_new_session=True, preexec_fn=stop_with(os.getpid()))
            for _ in range(self._count)
        ]
        return self

    def end(self, *, stop: bool) -> None:
        """Wait for the pools (they end once the experiment is finished); ``stop``: the first job
        did not finish it, so stop them first (the queue stays for ``emews resume``)."""
        for child in self._children:
            if stop:
                child.send_signal(signal.SIGTERM)
        for child in self._children:
            try:
                child.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                kill_trees([child.pid])  # its mpiexec and ranks too: they run in a session of their own
                child.wait()
        self._children = []

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.end(stop=True)


def resume(
    exp_dir: Path,
    *,
    workers: int | None = None,
    workflow_overrides: Mapping[str, Any] | None = None,
    site_overrides: Sequence[str] = (),
    relay: bool = False,
) -> Launched:
    """Continue a stopped experiment (its budget and walltime settings may change first)."""
    from emews.output.export import open_store, refuse_lost_store

    exp_dir = require_experiment(exp_dir.absolute())
    if workers is not None and workers < 1:
        raise ConfigError("must be at least 1", key="--workers")
    overrides = dict(workflow_overrides or {})  # the keys as typed (workflow.KEY too)
    site_keys = [item.partition("=")[0].strip() for item in site_overrides]
    refused = [typed for typed in site_keys if file_key(typed, "site")[1] not in RESUME_SITE_KEYS]
    refused += [typed for typed in overrides if not file_key(typed, "workflow")[1].startswith(("budget.", "walltime."))]
    if refused:
        raise ConfigError(
            "resume can only change the budget, the walltime settings and the allocation",
            file="--set",
            key=refused[0],
            allowed=RESUME_ALLOWED,
        )
    lease = acquire(exp_dir, "emews resume", job_done=batch_job_over(exp_dir))
    stored: tuple[int, int] | None = None
    try:
        # the store first: an experiment a newer emews made is refused naming the schemas, before its
        # site.yaml and workflow.yaml, which may hold keys of that version, are read; a corrupt or
        # incompatible store is a clear error now, not a failed job
        store = open_store(exp_dir)
        if store is None:
            refuse_lost_store(exp_dir)
        else:
            with store:
                store.verify(writing=True)
                stored = stored_and_unfinished(store)
        if read_info(exp_dir).get("pools") and nothing_left(exp_dir, stored) is not None:
            pools_told_done(exp_dir)
        site = load_site(str(exp_dir / SITE_FILE), site_overrides)
        workers = site.total_workers(workers or read_info(exp_dir).get("workers"))
        check_job_environment()
        # the objective and the optimizer as launch checks them: one edited, moved or deleted since (a
        # points file too) is one line now, not a job whose every task fails (the budget spent on it)
        load_workflow(str(exp_dir / WORKFLOW_FILE), overrides, check_imports=True)
        if overrides:
            steps = [typed for typed in overrides if file_key(typed, "workflow")[1] == "budget.steps"]
            if steps and read_info(exp_dir).get("pools"):
                raise ConfigError(STEPS_WITH_POOLS, file="--set", key=steps[0], allowed=STEPS_WITH_POOLS_ALLOWED)
            update_budget(exp_dir, overrides)
        done = nothing_left(exp_dir, stored)
    except BaseException:
        lease.release()
        raise
    if done is not None:
        lease.release()
        print(f"emews: nothing to resume: {done.why}; raise it with --set {done.setting} to go on", file=sys.stderr)
        return Launched(exp_dir, done.status)
    try:
        if (
            site_overrides or env_overridden()
        ):  # the next allocation's (--set or EMEWS_WALLTIME...), as the job reads it
            update_site(exp_dir, site.to_dict())
        # emews status counts this run's workers; the records are this emews's from now on (the job
        # migrates the store to its schema); written only when that changes them
        ran = {"workers": workers, **run_record()}
        if any(read_info(exp_dir).get(key) != value for key, value in ran.items()):
            update_info(exp_dir, **ran)
    except BaseException:
        lease.release()
        raise
    if site.is_local:
        with lease:
            return Launched(exp_dir, run_local(site, exp_dir, workers, lease.token, relay=relay))
    job_id = _submit(site, exp_dir, workers, lease)
    print(f"submitted job {job_id} to {site.name} to resume {exp_dir}")
    return Launched(exp_dir, EXIT_OK)


def _submit(site: Site, exp_dir: Path, workers: int, lease: Lease) -> str:
    """Submit the job that will own ``lease``; the lease then names the job (not this process)."""
    try:
        job_id = submit_experiment(site, exp_dir, workers, lease_token=lease.token)
    except BaseException:
        lease.release()
        raise
    assert job_id is not None  # None only for a dry run
    lease.update(job_id=job_id, owners=[])
    return job_id


def pools_told_done(exp_dir: Path) -> None:
    """A pooled experiment with nothing left whose optimizer ended without saying so (it failed after
    the last result, or its job's pool did): the pools still wait for its word; say it for it, on a
    connection of its own that may write (resume reads the store read-only)."""
    from emews.store.pool_queue import queue_for_an_optimizer  # a pooled experiment's store is PostgreSQL

    queue = queue_for_an_optimizer(exp_dir)
    with queue.store:
        if not queue.finished():
            queue.finish()


def run_local(site: Site, exp_dir: Path, workers: int, lease_token: str, *, relay: bool = False) -> int:
    """Run the job here and return its exit status; a SIGTERM or SIGINT to this process is
    forwarded as it came (the job's stop line names it), then we wait for the job."""
    since = time.time()
    oom = OomWatch()  # a rank the kernel's OOM killer takes (an inline objective) is said as out of memory
    sweep_earlier(exp_dir, lease_token)  # what an earlier job killed with its launcher left in /dev/shm
    watch = DirectoryWatch(exp_dir)  # rank 0 says where it went if it is moved meanwhile
    start = JobStart(
        lambda: joined(exp_dir, lease_token),
        bound=start_seconds,
        marks=marks_folder(exp_dir, lease_token),
        ranks=workers + 1,
        segments=records_folder(exp_dir, lease_token),
        job_ranks=lambda: job_ranks(lease_token),
    )
    try:
        status, received = run_here(
            site,
            [*job_command(exp_dir), "--lease", lease_token],
            workers,
            relay=relay,
            first=f"experiment {exp_dir}: {counted(workers, 'worker')}",
            start=start,
        )
        here = watch.now()
    finally:
        watch.close()
    sweep(records_folder(here or exp_dir, lease_token))  # what a killed rank left in /dev/shm
    sweep_pools(here or exp_dir)  # and a pool killed whole meanwhile
    if here is None:  # deleted meanwhile: rank 0 said so
        return 128 + received if received else EXIT_FAILED
    exp_dir = here
    if start.stuck is not None:
        say_ended_before_run(exp_dir, start.stuck)
        return EXIT_FAILED
    recorded = run_exit_status(exp_dir, since)
    if received:  # rank 0 said so, unless the signal ended the job before its run could (mpiexec starting)
        if recorded is None:
            say_ended_before_run(exp_dir, f"stopped by {signal.Signals(received).name} as it started")
        return 128 + received  # the ranks exit 0 to MPI; the run's own status is there
    if recorded is not None:  # also when mpiexec then reported a rank that ended badly after it
        if status not in (EXIT_OK, recorded or EXIT_FAILED):  # not rank 0's own MPI_Abort: the process
            # manager failed (a kill -9 of Hydra's proxy), and rank 0's last lines went with it
            where = shlex.quote(str(exp_dir))
            print(
                f"emews: the run ended (exit status {recorded}) but mpiexec exited with status {status}: what the "
                f"run printed at its end may be lost; its summary: emews status {where}",
                file=sys.stderr,
            )
        return recorded
    if status in (EXIT_FAILED, EXIT_CONFIG):  # rank 0 said why itself (a configuration error in the job)
        return status
    # a rank killed (kill -9, the OOM killer, a segfault) or one that exited on its own (os._exit in an
    # inline objective) ended the job before the run wrote its summary: mpiexec's status (9, 11) said nothing
    killed = oom.cause("the kernel's OOM killer killed a rank") if oom.killed() else "a rank was killed or exited"
    say_ended_before_run(exp_dir, f"mpiexec exited with status {status}: {killed}; see emews.log")
    return EXIT_FAILED


def run_here(
    site: Site,
    command: list[str],
    workers: int,
    *,
    relay: bool = False,
    first: str = "",
    start: JobStart | None = None,
) -> tuple[int, int | None]:
    """Run ``command`` on ``workers`` + 1 ranks here (the site's launcher line) in a session of its
    own, forwarding a SIGTERM or SIGINT to it as it came (``first``: said on stderr once one is
    forwarded, before the job starts; ``start``: the job's start, watched: a stop that came before
    its rank 0 could take it is sent there too, and a start past its bound is stopped); its exit status (128 + N: killed by signal N) and the signal
    forwarded, if one was."""
    launcher = site.local_command(workers + 1, command)
    env = {**os.environ, **site.environment_vars()}
    if not relay and sys.stderr.isatty():
        env["EMEWS_PROGRESS"] = "tty"
    pipe = subprocess.PIPE if relay else None
    received: list[int] = []
    started: list[subprocess.Popen] = []  # the job, once started: a signal before that is sent as it starts

    def forward(signum: int, frame: object) -> None:
        if not received or (signum == signal.SIGINT == received[0] and len(received) == 1):
            received.append(signum)  # a second Ctrl-C: mpiexec aborts the job, as it says it will
            if started:
                _forward(started[0], signum, first=len(received) == 1, grace=grace, start=start)

    # the grace is a timer: the signal comes during proc.wait(), which goes on waiting after the handler
    grace: list[threading.Timer] = []
    main = threading.current_thread() is threading.main_thread()
    # installed before the job starts: a stop signal then (was: it killed this process, the job ran on)
    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)} if main else {}
    relays: list[threading.Thread] = []
    if first:
        print(first, file=sys.stderr, flush=True)
    try:
        try:  # its own session: Ctrl-C reaches only us, and we forward the stop
            proc = subprocess.Popen(
                launcher, env=env, start_new_session=True, preexec_fn=stop_with(os.getpid()), stdout=pipe, stderr=pipe
            )
        except FileNotFoundError:
            raise EmewsError(f"cannot start {launcher[0]}: not found (is the mpich wheel installed?)") from None
        relays = [_relay(proc.stdout, sys.stdout), _relay(proc.stderr, sys.stderr)] if relay else []
        if start is not None:
            start.begin(proc.pid, env)
        started.append(proc)
        if received:  # it came while the job was being started
            _forward(proc, received[0], first=True, grace=grace, start=start)
        status = proc.wait()
    finally:
        for timer in grace:
            timer.cancel()
        if start is not None:
            start.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for thread in relays:
            thread.join()
    return (status if status >= 0 else 128 - status), (received[0] if received else None)


def _forward(
    proc: subprocess.Popen, signum: int, *, first: bool, grace: list[threading.Timer], start: JobStart | None
) -> None:
    """Send the job the stop signal ``signum``; after the first, it has ``STOP_GRACE_SECONDS`` to wind
    down before it is killed (the timer joins ``grace``), and ``start`` sends it to rank 0 too
    should the job not have been able to take it yet."""
    proc.send_signal(signum)
    if first:
        if start is not None:
            start.stop(signum)
        timer = threading.Timer(STOP_GRACE_SECONDS, proc.kill)  # the job did not wind down in time
        timer.daemon = True
        grace.append(timer)
        timer.start()


def _relay(source: IO[bytes] | None, target: TextIO) -> threading.Thread:
    """Copy ``source`` to ``target`` as it comes, on a thread of its own (joined by the caller)."""

    def copy() -> None:
        assert source is not None
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        with source:
            for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
                try:
                    target.write(decoder.decode(chunk))
                    target.flush()
                except (OSError, ValueError):  # the target went away: keep draining the pipe
                    pass

    thread = threading.Thread(target=copy, name="emews-relay", daemon=True)
    thread.start()
    return thread
