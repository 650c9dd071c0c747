"""Whether ``emews resume`` (or ``emews serve``, ``emews attach``) of an experiment would run nothing: its budget is
spent, nothing is unfinished, and its files say so consistently (then it says so in one line)."""

from __future__ import annotations

import csv
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from emews.config.experiment import CSV_FILE, WORKFLOW_FILE, read_summary
from emews.config.workflow import load_workflow
from emews.core.errors import EmewsError

if TYPE_CHECKING:
    from emews.store.base import Store


def stored_and_unfinished(store: Store) -> tuple[int, int] | None:
    """How many results ``store`` holds and how many dispatched tasks have none (``None``: unknown)."""
    try:
        return store.count_results(), store.count_unfinished()
    except Exception:  # any engine's error: unknown, so the job runs and reports it as before
        return None


@dataclass(frozen=True)
class NothingLeft:
    """Why resuming (or serving) an experiment would run nothing: ``why``, the budget ``setting``
    that would let it go on (``--set`` of ``emews resume``) and the exit status the last run recorded."""

    why: str
    setting: str
    status: int

    def line(self, what: str, exp_dir: Path) -> str:
        """What ``emews serve`` or ``emews attach`` says: nothing to ``what``, why, and the ``emews
        resume`` that would let the experiment go on."""
        hint = shlex.join(["emews", "resume", str(exp_dir), "--set", self.setting])
        return f"emews: nothing to {what}: {self.why}; raise it with {hint} to go on"


def nothing_left(exp_dir: Path, stored: tuple[int, int] | None) -> NothingLeft | None:
    """Whether resuming (or serving) would run nothing: the store holds ``budget.evaluations``
    results or more, or the runs spent ``budget.time``, and no unfinished task (nothing to run
    again, no paused or waiting trial; in a pooled experiment none queued or leased either),
    ``summary.json`` is that of the run that stored them (as many results) and ended on its own,
    and ``results.csv`` has a row for each. ``None`` (run the job, as before) when anything is
    uncertain: no store or summary, no evaluation budget, a stopped run, a CSV of an earlier moment."""
    if stored is None:
        return None
    results, unfinished = stored
    try:
        budget = load_workflow(str(exp_dir / WORKFLOW_FILE), check_imports=False).model.budget
    except (EmewsError, OSError, ValueError):
        return None
    summary = read_summary(exp_dir)
    status = summary.get("exit_status")
    if (
        unfinished
        or not isinstance(status, int)
        or summary.get("completed") != results  # a later run stored more and wrote no summary (kill -9)
        or summary.get("interrupted") is not None
        or _csv_rows(exp_dir / CSV_FILE) != results  # the CSV of an earlier moment (a full disk at its writing)
    ):
        return None
    evaluations, seconds, elapsed = budget.evaluations, budget.seconds, summary.get("elapsed")
    if evaluations is not None and results >= evaluations:
        held = (
            f"{results} evaluations, over its budget"
            if results > evaluations
            else f"the {results} evaluations of its budget"
        )
        return NothingLeft(f"{exp_dir} has {held} (budget.evaluations: {evaluations})", "budget.evaluations=N", status)
    if seconds is not None and isinstance(elapsed, (int, float)) and elapsed >= seconds:
        return NothingLeft(
            f"{exp_dir} spent its time budget ({elapsed:.0f} s run, budget.time: {budget.time})",
            "budget.time=...",
            status,
        )
    return None


def _csv_rows(path: Path) -> int | None:
    """The rows of ``results.csv`` below its header (``None``: no file, or one this cannot read)."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            return sum(1 for _ in csv.reader(fh)) - 1
    except (OSError, ValueError, csv.Error):
        return None
