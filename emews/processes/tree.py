"""Process trees: find what an objective started and kill it, so nothing outlives its task.

Linux only (``/proc/PID/task/TID/children``). A worker rank makes itself a
*child subreaper*: a grandchild whose parent died (or that daemonised with a double
fork) is re-parented to the worker instead of to init, so it is still found
under the worker and killed with the rest, whatever session or process group it
moved to.
"""

from __future__ import annotations

import functools
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from emews.core.parent_death import die_with, die_with_parent, prctl

_PR_SET_CHILD_SUBREAPER = 36
#: how often an orphan watch looks whether its parent is still there
ORPHAN_POLL = 0.2


def become_subreaper() -> None:
    """Orphaned descendants of this process become its children (not init's)."""
    prctl(_PR_SET_CHILD_SUBREAPER, 1)


def take_descendants_along(parent_pid: int, every: float = ORPHAN_POLL) -> None:
    """For a subreaper that runs user code (the isolated child): when ``parent_pid`` dies, even by
    ``kill -9``, kill every process below this one, then exit (status 1). It replaces the
    parent-death SIGKILL, which would leave them to init: a model an objective started with
    ``subprocess`` would train on unsupervised in a run dir that the next run uses again. A thread
    watches, so a main thread busy in native code does not hold it up."""

    def watch() -> None:
        wait_for_parent_to_end(parent_pid, every)
        kill_trees(descendants(os.getpid()))
        os._exit(1)

    threading.Thread(target=watch, name="emews-orphan-watch", daemon=True).start()
    die_with_parent(0)  # the watch does it now (0: no signal)


def wait_for_parent_to_end(parent_pid: int, every: float = ORPHAN_POLL) -> None:
    """Return once ``parent_pid``, this process's parent, has ended: asleep on a pidfd of it (Linux
    5.3+: no wake-up until it ends), else looking every ``every`` seconds."""
    try:
        pidfd = os.pidfd_open(parent_pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or the parent is gone already
        pidfd = None
    if pidfd is not None:
        try:
            if os.getppid() == parent_pid:  # the pidfd is of our parent, not of a process given its pid again
                select.select([pidfd], [], [])  # readable once the process has ended
            return
        finally:
            os.close(pidfd)
    while os.getppid() == parent_pid:
        time.sleep(every)


def stop_with(parent_pid: int) -> Callable[[], None]:
    """For a job started by ``emews launch`` (a ``preexec_fn``): SIGTERM, a clean stop, when the
    launch dies, even by ``kill -9``, so the run never goes on unsupervised."""
    return functools.partial(die_with, parent_pid, signal.SIGTERM)


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's), or ``[]`` when it is gone."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            found.extend(int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, parents before their children."""
    out: list[int] = []
    stack = children(pid)
    while stack:
        child = stack.pop()
        out.append(child)
        stack.extend(children(child))
    return out


def kill_trees(pids: Iterable[int]) -> None:
    """SIGKILL each of ``pids`` and everything below it (repeated until nothing is left that
    could still fork); reap the ones that are this process's children."""
    targets = list(pids)
    for _ in range(5):
        tree = [t for pid in targets for t in (pid, *descendants(pid))]
        living = [p for p in tree if alive(p)]
        for pid in living:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reap(tree)
        if not living:
            break
        targets = living


def with_arguments(*args: str) -> list[int]:
    """The live processes whose command line holds ``args`` one after the other (of those whose
    command line this user can read)."""
    wanted = b"\0" + b"\0".join(arg.encode() for arg in args) + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                if wanted in b"\0" + cmdline.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def reap(pids: Iterable[int] = ()) -> None:
    """Collect the exit status of finished children among ``pids`` (no zombies left)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def age(pid: int) -> float | None:
    """Seconds since ``pid`` started, on this host's clock since boot; ``None`` when it does not run."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None
    return None if fields[0] in ("Z", "X") else time.clock_gettime(time.CLOCK_BOOTTIME) - started


def strays(parent: int, keep: Iterable[int] = ()) -> list[int]:
    """Children of ``parent`` other than ``keep`` (zombies included, so they can be reaped)."""
    kept = set(keep)
    if parent == os.getpid() and not kept and not has_children():
        return []
    return [c for c in children(parent) if c not in kept]


def has_children() -> bool:
    """Whether this process has any child, running or exited (one system call, no /proc scan)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True
