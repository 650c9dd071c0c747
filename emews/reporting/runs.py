"""When and where an experiment's evaluations ran: the worker ranks they held, and the runs of
the experiment: the stretches in which some task was in flight, where a stretch of
nothing in flight longer than :data:`RUN_GAP` seconds (and ten times the median task) separates two
runs (the time between a stop and ``emews resume``). Plain Python over each evaluation's times:
the report's timeline (:mod:`emews.reporting.timeline`) and ``emews status`` share it."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

#: seconds of nothing in flight that separate two runs of one experiment (at least)
RUN_GAP = 60.0


def ready_at(submitted: float | None, started: float, attempt: int) -> float:
    """When an evaluation that started at ``started`` was in flight from: its submission, or for a
    task run again after a resume (``attempt`` > 0) or one whose submission is unknown, its start."""
    ready = submitted if submitted is not None and attempt == 0 else started
    return min(ready, started)


def runs(ran: Sequence[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """The (start, end) of each run, in time order, of the evaluations that ran: each one's (ready
    (:func:`ready_at`), started, finished), in id order."""
    if not ran:
        return []
    gap = max(RUN_GAP, 10.0 * statistics.median(finished - started for _, started, finished in ran))
    ordered = sorted(ran, key=lambda row: row[0])  # stable: id order among equals
    spans: list[tuple[float, float]] = []
    start, reach = ordered[0][0], ordered[0][2]  # reach: the latest end among the tasks in flight so far
    for ready, _, finished in ordered[1:]:
        if ready - reach > gap:
            spans.append((start, reach))
            start = ready
        reach = max(reach, finished)
    spans.append((start, reach))
    return spans


def held_ranks(ranks: Iterable[int | None], teams: Iterable[Sequence[int] | None]) -> set[int]:
    """Every worker rank that ran a task: each result's rank (``ranks``; ``None``: not recorded) and
    its team's (``teams``: the world ranks a multi-rank task held, or ``None``)."""
    held = {int(rank) for rank in ranks if rank is not None}
    held.update(rank for team in teams if team for rank in team)
    return held
