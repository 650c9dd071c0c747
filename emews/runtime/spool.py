"""The isolated child's output spool: ``runs/.spool/rankN/{stdout,stderr}.txt`` and ``task``
(``runs/.spool/pool-NNN-rankN/`` for an attached pool's ranks).

The child's stdout and stderr are files here; after each task what they hold is moved into the
task's run dir (:func:`keep_output`). ``task`` names the task running now (rewritten in place at
each task's start), so that what a task printed before a ``kill -9`` of the whole job (where the
crash reason is) is still found at the next run: the child that starts on the spool moves it into
that task's run dir as ``stdout.killed.txt`` / ``stderr.killed.txt`` (:func:`keep_killed_output`)
before it takes the spool over.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from emews.core.errors import EmewsError, write_failure
from emews.core.failure_cause import TAIL_LINES
from emews.objective.context import task_run_dir

OUTPUT_FILES = ("stdout.txt", "stderr.txt")
TASK_FILE = "task"
KILLED_SUFFIX = ".killed.txt"
_ID_WIDTH = 20  # the task file's fixed size: one id, space-padded, rewritten in place
_TAIL_BYTES = 64 << 10  # how much of a spool file :func:`output_tail` reads, from its end


class OutputNotKept(EmewsError, OSError):
    """What a task printed could not be moved into its run dir (a full disk, a quota); the spool is
    emptied anyway, so that it is not put in the next task's run dir."""


def spool_dir(runs_root: Path, rank: int, pool: str = "") -> Path:
    """Where the isolated child of worker rank ``rank`` spools its output; ``pool``: an attached
    pool's folder name (``pool-001``), whose ranks share their numbers with the optimizer's job."""
    return runs_root / ".spool" / (f"{pool}-rank{rank}" if pool else f"rank{rank}")


def spool_paths(spool: str | Path) -> list[Path]:
    return [Path(spool) / name for name in OUTPUT_FILES]


def output_tail(spool: str | Path, name: str = "stderr.txt", lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of what the spool's ``name`` holds now (the task that just ended
    wrote it; the last 64 KiB read at most); ``""``: nothing, or unreadable."""
    try:
        with (Path(spool) / name).open("rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - _TAIL_BYTES))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def runs_root_of(spool: str | Path) -> Path:
    """The ``runs`` folder a spool (:func:`spool_dir`) lies in."""
    return Path(spool).parent.parent


def mark_task(spool: str | Path, task_id: int, team_rank: int = 0) -> None:
    """Record that ``task_id`` runs now, as team rank ``team_rank`` of its task (in place: no file
    is created after the first task)."""
    path = Path(spool) / TASK_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)
        try:
            os.pwrite(fd, f"{f'{task_id} {team_rank}':<{_ID_WIDTH}}".encode(), 0)
        finally:
            os.close(fd)
    except OSError:  # no room for it (a full disk): then no task is named, rather than the one before
        path.unlink(missing_ok=True)


def marked_task(spool: str | Path) -> int | None:
    """The task :func:`mark_task` recorded last (None: none, or unreadable)."""
    marked = _marked(spool)
    return None if marked is None else marked[0]


def _marked(spool: str | Path) -> tuple[int, int] | None:
    """(task, team rank) :func:`mark_task` recorded last (a file of one id: team rank 0)."""
    try:
        task, *member = map(int, (Path(spool) / TASK_FILE).read_text().split())
    except (OSError, ValueError):
        return None
    return task, member[0] if member else 0


def _append(src: Path, dst: Path) -> None:
    """Append ``src`` to ``dst`` and empty it; when the write fails, an :class:`OutputNotKept`, ``src``
    emptied too and ``dst`` as it was (removed, and its folder, when this made them)."""
    size, made = _size(dst), not dst.parent.is_dir()
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        with src.open("rb") as read, dst.open("ab") as write:
            shutil.copyfileobj(read, write)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.truncate(src, 0)
        with contextlib.suppress(OSError):
            if size is not None:
                os.truncate(dst, size)
            else:
                dst.unlink()
                if made:
                    dst.parent.rmdir()
        raise OutputNotKept(f"{dst}: not written: {write_failure(exc)}") from None
    os.truncate(src, 0)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _written(path: Path) -> bool:
    return bool(_size(path))


def member_file(name: str, team_rank: int) -> str:
    """The run dir's file of ``name`` (``stdout.txt``) for team rank ``team_rank`` of a multi-rank
    task: rank 0 writes ``stdout.txt``, rank r ``stdout.rank-r.txt`` (as a command objective does)."""
    return name if not team_rank else name.replace(".txt", f".rank-{team_rank}.txt")


def keep_output(spool: str | Path | None, runs_root: Path | None, task_id: int, team_rank: int = 0) -> None:
    """Move what the spool files hold into the task's run dir (nothing written: no dir); a team's
    member r > 0 into files of its own (:func:`member_file`): members moving theirs at once into one
    file interleaved them in 64 KiB pieces, lines torn. A full disk: :class:`OutputNotKept`, after
    both files were tried (and the spool emptied)."""
    if spool is None or runs_root is None:
        return
    _append_all(
        (path, task_run_dir(runs_root, task_id) / member_file(path.name, team_rank)) for path in spool_paths(spool)
    )


def _append_all(moves: Iterable[tuple[Path, Path]]) -> list[Path]:
    """:func:`_append` each written source to its target; the targets written. Every move is tried;
    then the first :class:`OutputNotKept`, if one failed."""
    kept: list[Path] = []
    failed: OutputNotKept | None = None
    for src, dst in moves:
        if not _written(src):
            continue
        try:
            _append(src, dst)
            kept.append(dst)
        except OutputNotKept as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
    return kept


def keep_killed_output(spool: str | Path) -> list[Path]:
    """Move what an earlier child left in the spool (its task never ended: a ``kill -9``) into
    that task's run dir as ``stdout.killed.txt`` / ``stderr.killed.txt`` (appended to; a team's member r:
    ``stdout.killed.rank-r.txt``); without
    a task file, beside the spool. The files written (:class:`OutputNotKept`: as :func:`keep_output`)."""
    marked = _marked(spool)
    into = Path(spool) if marked is None else task_run_dir(runs_root_of(spool), marked[0])
    member = 0 if marked is None else marked[1]
    return _append_all(
        (path, into / member_file(path.name.removesuffix(".txt") + KILLED_SUFFIX, member))
        for path in spool_paths(spool)
    )
