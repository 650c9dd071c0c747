"""Errors that carry enough context to speak to a person."""

from __future__ import annotations

import difflib
import errno
import reprlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

#: exit statuses of every command: done, failed, configuration error (bad input)
EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2
#: a run that stopped itself at the walltime margin (``emews resume`` continues it); a stop signal
#: is 128 + its number instead
EXIT_WALLTIME = 3

_BRIEF = reprlib.Repr()
_BRIEF.maxlist = _BRIEF.maxtuple = _BRIEF.maxdict = 4
_BRIEF.maxstring = _BRIEF.maxother = 40


def brief(value: Any) -> str:
    """A short ``repr`` of ``value`` for messages (long lists and strings are cut with ``...``)."""
    return _BRIEF.repr(value)


class EmewsError(Exception):
    """Base class of the framework's own errors.

    An error callers may catch as a builtin names that builtin as its second base (``class
    SpaceError(EmewsError, ValueError)``). Only signals and notices that must get past an
    objective's ``except Exception`` are ``BaseException`` instead, on purpose: a stop signal
    (``runtime.interrupt.Interrupted``; ``WalltimeReached``, the walltime margin's stop; ``LauncherEnded``, the
    launching process's death), the task timer (``runtime.inline._TaskTimedOut``) and an
    abandoned trial (``training.messages.LinkClosed``); ``tests/core/test_error_root.py`` holds the list.
    """


class ConfigError(EmewsError):
    """Bad user input: names the file, the key and what is allowed. Exit status 2.

    ``more``: the other problems found in the same pass (every mistake of a file is listed, one
    line each, not only the first)."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        key: str | None = None,
        allowed: str | None = None,
        more: Sequence[ConfigError] = (),
    ) -> None:
        self.file = str(file) if file is not None else None
        self.key = key
        self.allowed = allowed
        self.message = message
        self.more = tuple(more)
        super().__init__(self.describe())

    @classmethod
    def together(cls, problems: Sequence[ConfigError]) -> ConfigError:
        """One error listing every problem of ``problems`` (and of their ``more``), in order."""
        flat = [q for p in problems for q in (p, *p.more)]
        first = flat[0]
        return cls(
            first.message,
            file=first.file,
            key=first.key,
            allowed=first.allowed,
            more=[ConfigError(q.message, file=q.file, key=q.key, allowed=q.allowed) for q in flat[1:]],
        )

    def describe(self) -> str:
        where = ": ".join(p for p in (self.file, self.key) if p)
        text = f"{where}: {self.message}" if where else self.message
        if self.allowed:
            text += f" (allowed: {self.allowed})"
        return "".join([text, *(f"\n  also: {other.describe()}" for other in self.more)])


class KeyedValueError(EmewsError, ValueError):
    """Raised inside a schema validator: the message, what is allowed and, for checks across
    fields, the dotted key to blame (``None``: the key the validator ran on)."""

    def __init__(self, key: str | None, message: str, allowed: str | None = None) -> None:
        super().__init__(message)
        self.key, self.message, self.allowed = key, message, allowed


class OptionError(EmewsError, ValueError):
    """A plug-in (an optimizer, a trial scheduler) refuses one of its options: ``option`` names it,
    ``message`` says what is wrong, ``allowed`` what it takes. ``emews check`` and ``emews launch``
    blame ``SECTION.options.OPTION`` in the file as typed (or ``--set``); in Python it reads
    ``OPTION: message; allowed: ...``."""

    def __init__(self, option: str, message: str, allowed: str | None = None) -> None:
        super().__init__(f"{option}: {message}" + (f"; allowed: {allowed}" if allowed else ""))
        self.option, self.message, self.allowed = option, message, allowed


def did_you_mean(name: object, choices: Iterable[str]) -> str:
    """``"; did you mean 'lower'?"`` when ``name`` is close to one of ``choices`` (difflib), else ``""``:
    the tail of a message about an unknown name."""
    close = closest(name, choices)
    return f"; did you mean {close!r}?" if close is not None else ""


def closest(name: object, choices: Iterable[str]) -> str | None:
    """The one of ``choices`` that ``name`` is probably a misspelling of (difflib), or ``None``."""
    names = [str(c) for c in choices]
    close = difflib.get_close_matches(str(name), names, n=1, cutoff=0.6)
    if not close and len(str(name)) >= 2:  # a prefix of one name only: ``min`` for ``minimize``
        close = [c for c in names if c.startswith(str(name))]
    return close[0] if len(close) == 1 else None


#: what a failed write means, by errno, and what to do about it
_WRITE_CAUSES = {
    errno.ENOSPC: "the disk is full (No space left on device): free space there",
    errno.EDQUOT: "the disk quota is used up (Disk quota exceeded): free space or raise the quota",
    errno.EFBIG: "the file size limit is reached (File too large: ulimit -f)",
    errno.EROFS: "the file system is read-only (Read-only file system)",
    errno.EACCES: "no permission to write there (Permission denied)",
    errno.EPERM: "no permission to write there (Operation not permitted)",
}


def write_failure(error: OSError) -> str:
    """The cause of a failed write in words a user acts on (a full disk, a quota, ``ulimit -f``, a
    read-only or unwritable folder), else the system's own message."""
    known = _WRITE_CAUSES.get(error.errno) if error.errno is not None else None
    return known or error.strerror or str(error)


class TaskOutOfSpace(EmewsError):
    """Task ``task_id`` failed because the disk or quota it wrote to was full (``cause``: the line
    saying so): the disk's failure, not the objective's; the run stops and ``emews resume`` runs the
    task again (``emews.runtime.full_disk``)."""

    def __init__(self, task_id: int, cause: str) -> None:
        self.task_id, self.cause = task_id, cause
        super().__init__(f"task {task_id} failed for want of disk space: {cause}")


def storage_problem(error: BaseException) -> str | None:
    """One line for an error writing the experiment's files (a full disk or quota, a file-size
    limit, an I/O error; also as the results store's SQLite reports them); ``None`` for another error."""
    if isinstance(error, TaskOutOfSpace):
        return str(error)
    if isinstance(error, OSError) and error.strerror:
        cause = write_failure(error)
        return f"{cause}: {error.filename}" if error.filename else cause
    if str(getattr(error, "sqlite_errorname", "")).startswith(("SQLITE_FULL", "SQLITE_IOERR")):  # sqlite3.Error
        return f"the results store: {error}"
    return None
