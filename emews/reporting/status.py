"""``emews status``: the scheduler's state of the run and its headline figures, once or refreshed."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from emews.core.errors import ConfigError
from emews.core.lost_ranks import lost_ranks_of
from emews.output.export import open_store, refuse_lost_store
from emews.reporting.files import read_files
from emews.reporting.headline import headline, store_figures
from emews.reporting.pool_status import pool_lines
from emews.reporting.trials import trial_lines
from emews.store.base import StoreUnreadable

#: scheduler states in which the run has not ended
LIVE_STATES = ("queued", "running")


def job_state(exp_dir: Path) -> tuple[str, bool]:
    """(the state in words, whether the run goes on) of a batch job or a local run."""
    from emews.config.experiment import JOB_RECORD
    from emews.config.lease import LEASE_FILE, LeaseRecord

    if (exp_dir / JOB_RECORD).exists():
        from emews.site.jobs import job_status  # the sites only where a batch job's state is asked

        state = job_status(exp_dir)
        return state + (_how_it_ended(exp_dir) if state == "done" else ""), state in LIVE_STATES
    lease = LeaseRecord.read(exp_dir / LEASE_FILE)
    running = lease is not None and not lease.copied(exp_dir) and any(owner.alive() for owner in lease.owners)
    return ("local, running" if running else "local, not running" + _local_ending(exp_dir)), running


def serving(exp_dir: Path, optimizer: bool) -> str | None:
    """What runs the experiment while ``emews serve`` holds it (its optimizer, no job of its own:
    the launch's job may have ended long ago), else ``None``; ``optimizer``: the store's optimizer
    lock is held (a serve on another host, whose process cannot be seen from here)."""
    from emews.config.lease import LEASE_FILE, SERVE_COMMAND, LeaseRecord

    lease = LeaseRecord.read(exp_dir / LEASE_FILE)
    if lease is None or lease.command != SERVE_COMMAND or lease.copied(exp_dir):
        return None
    alive = [owner.alive() for owner in lease.owners]
    if not (any(alive) or (optimizer and None in alive)):
        return None
    where = ", ".join(owner.describe() for owner in lease.owners)
    return f"emews serve ({where}) runs the optimizer, the pools run its tasks"


def _local_ending(exp_dir: Path) -> str:
    """How a local run that is over ended, when not well (as :func:`_how_it_ended` says it of a batch
    job): fail fast, a stop signal, an error; nothing for a run that finished, or that left no record."""
    from emews.config.exit_record import read_exit_record
    from emews.config.experiment import LOG_FILE, read_summary

    record, summary = read_exit_record(exp_dir), read_summary(exp_dir)
    if record is None:
        return ""
    status = record.get("exit_status")
    if not isinstance(status, int):  # its room taken at the start, never written: the run did not end itself
        return f", its last run ended before it could record how (a rank or the job killed: see {exp_dir / LOG_FILE})"
    if status == 0:
        return ""
    same_run = summary.get("exit_status") == status
    why = (summary.get("interrupted") or summary.get("error")) if same_run else None
    line = why.strip().splitlines()[0] if isinstance(why, str) and why.strip() else ""  # its first line only
    stopped = same_run and bool(summary.get("interrupted"))
    return f", the run ended with exit status {status}" + (f": {line}" if line else "") + _resume_hint(exp_dir, stopped)


def _resume_hint(exp_dir: Path, stopped: bool) -> str:
    """What to do about a run that stopped (a stop signal: scancel, Ctrl-C; the walltime margin), as
    its own last line said it; nothing for a run that ended any other way."""
    import shlex

    return f"; continue with: emews resume {shlex.quote(str(exp_dir))}" if stopped else ""


def _how_it_ended(exp_dir: Path) -> str:
    """What emews' own summary says of a batch job that is over: a job that failed (a scheduler's
    FAILED, a script that exited early) is "done" to the scheduler, but wrote no summary, or an
    older one (a resumed experiment's), or one with a failing exit status."""
    import json

    from emews.config.experiment import JOB_RECORD, SUMMARY_FILE

    summary = exp_dir / SUMMARY_FILE
    try:
        fresh = summary.stat().st_mtime >= (exp_dir / JOB_RECORD).stat().st_mtime
        data = json.loads(summary.read_text(encoding="utf-8")) if fresh else None
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        return _recorded_end(exp_dir) or ", without a summary of its run: " + _without_summary(exp_dir)
    status = data.get("exit_status")
    if not status:
        return ", the run finished"
    why = data.get("interrupted") or data.get("error")
    return (
        f", the run ended with exit status {status}"
        + (f": {why}" if why else "")
        + _resume_hint(exp_dir, bool(data.get("interrupted")))
    )


def _recorded_end(exp_dir: Path) -> str | None:
    """How the job's run ended by its exit record, when it wrote no summary (a full disk had no room
    for one: :mod:`emews.config.exit_record`); ``None`` when it recorded nothing either."""
    from emews.config.exit_record import recorded_exit
    from emews.config.experiment import JOB_RECORD, LOG_FILE

    try:
        status = recorded_exit(exp_dir, (exp_dir / JOB_RECORD).stat().st_mtime)
    except OSError:
        return None
    if status is None:
        return None
    return f", the run ended with exit status {status} and could not write its summary (see {exp_dir / LOG_FILE})"


def _without_summary(exp_dir: Path) -> str:
    """Why a batch job that is over left no summary: it never started (no output file: cancelled
    while queued, or refused by the batch system), or it ended before the run did (see its output)."""
    from emews.core.errors import EmewsError
    from emews.site.jobs import job_output

    try:
        output = job_output(exp_dir)
    except EmewsError:
        output = None
    if output is None:
        return "it ended before the run did (see its output file in the experiment)"
    if not output.exists():
        return f"it never started (no {output.name}: cancelled while queued, or refused by the batch system)"
    return f"it ended before the run did (see {output})"


def text(exp_dir: Path) -> tuple[str, bool]:
    """The status lines of ``exp_dir``, and whether its run goes on: its files read once, its store
    opened once (read-only) for the headline, the pools and the trials."""
    state, running = job_state(exp_dir)
    files = read_files(exp_dir)
    store = open_store(files.exp_dir)
    if store is None:
        refuse_lost_store(files.exp_dir)  # no store, yet the summary records results: not "nothing yet"
    try:
        figures = store_figures(files, store)
        pools = pool_lines(files, store)
        # a pooled run goes on past its job: under emews serve (any host), and in its running pools, which
        # train what they hold and run again what a lost pool held, with or without an optimizer
        running = running or pools.optimizer or pools.workers > 0
        trials = trial_lines(store, files.metric, running)
    finally:
        if store is not None:
            store.close()
    served = serving(exp_dir, pools.optimizer)  # not the launch's job (ended, or another run's line)
    state = state if served is None else served
    said = headline(files, figures, running=running)
    if pools.lines:  # a pooled run's workers are its running pools' (the optimizer's job may have none)
        said = replace(said, busy=pools.busy, workers=pools.workers)
        if not pools.optimizer:  # the pools end what is queued; no time to the budget's end without one
            said = replace(said, eta=None)
    notes = [f"note: {problem} (shown without it)" for problem in files.unreadable]
    # while it runs, the ranks its pools went on without so far (the store has them); after, the last run's
    lost = [lost.line() for lost in (pools.lost if running else lost_ranks_of(files.summary or {}))]
    lines = [f"job: {state}", *said.lines(), *lost, *pools.lines, *trials, *notes]
    return "\n".join(lines), running


def _appeared(exp_dir: Path) -> bool:
    """Whether the experiment ``exp_dir`` is there; a :class:`ConfigError` when the folder holds
    files yet is no experiment (emews launch creates one only in a new or empty folder)."""
    from emews.config.experiment import is_experiment, require_experiment

    if is_experiment(exp_dir):
        return True
    if exp_dir.is_dir() and any(exp_dir.iterdir()):
        require_experiment(exp_dir)
    return False


def _gone(exp_dir: Path) -> ConfigError:
    """The experiment directory watched was there and is not now: renamed, moved or deleted."""
    return ConfigError(
        "the experiment directory is gone while it was watched (renamed, moved or deleted)",
        file=str(exp_dir),
        allowed="emews status NEW_PATH --watch where it is now",
    )


def watch(exp_dir: Path, interval: float, stream: TextIO = sys.stdout) -> None:
    """Print the status every ``interval`` seconds until the run is over (or Ctrl-C).

    Started before the experiment exists (right after ``emews launch``, or before it), it waits
    for the directory, then for the run to start: a run is over once it is not running and has
    stored something or written its summary."""
    from emews.config.experiment import STORE_FILE, SUMMARY_FILE

    clear = stream.isatty()
    if exp_dir.exists() and not exp_dir.is_dir():  # a file never becomes one: no wait for good
        raise ConfigError("not an experiment directory (a file, not a folder)", file=str(exp_dir))
    try:
        if not _appeared(exp_dir):
            stream.write(f"waiting for {exp_dir} to appear (Ctrl-C stops)\n")
            stream.flush()
            while not _appeared(exp_dir):
                time.sleep(interval)
        while True:
            if not exp_dir.is_dir():
                raise _gone(exp_dir)
            try:
                lines, running = text(exp_dir)
            except StoreUnreadable as exc:  # the job is making it (its file is there, not its tables), or
                state, running = job_state(exp_dir)  # a PostgreSQL server is away for a while (store.retry)
                if not running:
                    raise
                lines = f"job: {state}; the results store cannot be read now: {exc.message}"
            except ConfigError:
                if not exp_dir.is_dir():  # gone while it was read
                    raise _gone(exp_dir) from None
                raise
            started = running or (exp_dir / SUMMARY_FILE).exists() or (exp_dir / STORE_FILE).exists()
            stamp = time.strftime("%H:%M:%S")
            waiting = "" if started else "; waiting for the run to start"
            stream.write(("\033[H\033[J" if clear else "") + f"{lines}\n(at {stamp}; every {interval:g} s{waiting})\n")
            stream.flush()
            if started and not running:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        stream.write("\n")
