"""The run's budget in compute: training steps reported, summed over trials, and wall time.

``budget: {steps: N}`` counts, for each trial, the highest step it reported (a trial continued from a
checkpoint, after a retry, a promotion or ``emews resume``, counts its steps once), summed over the
experiment's trials. ``budget: {time: HH:MM:SS}`` is the experiment's, not one job's: this run's wall
time since it started, plus, for earlier runs, the time during which their evaluations ran (the
store's start and finish times, and the report times of trials without a result; a queue wait
between runs is not counted, and a run killed with ``kill -9`` counts up to what it stored).

Once either is reached the distributor dispatches nothing new, running trials are told to stop at
their next report (``TrialService``), trials waiting for a promotion end with their results, and,
once nothing runs, the optimizer's next wait raises :class:`BudgetReached`: the run ends normally.
Tasks that report nothing run to their end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from emews.core.evaluator import BudgetExhausted

if TYPE_CHECKING:  # the worker ranks that import the engine never load the store
    from emews.store import Store


class BudgetReached(BudgetExhausted):
    """The compute budget is spent and nothing runs any more (raised in the optimizer's wait)."""


class ComputeBudget:
    """Steps and seconds spent against ``steps`` and ``seconds`` (``None``: no such limit).

    Used on one thread: the distributor's (reports are counted as they are stored), or with pools
    the pool bridge's receiving thread (``budget.time`` only)."""

    def __init__(
        self, steps: int | None = None, seconds: float | None = None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.steps = steps
        self.seconds = seconds
        self.steps_spent = 0
        self.earlier_seconds = 0.0
        self._top: dict[int, int] = {}  # trial -> the highest step it reported
        self._clock = clock
        self._start = clock()
        self._reached: str | None = None
        self._steps_then = 0  # the steps reported when the step budget was reached

    @property
    def limited(self) -> bool:
        """Whether there is a step or a time budget at all."""
        return self.steps is not None or self.seconds is not None

    @property
    def seconds_spent(self) -> float:
        return self.earlier_seconds + self._clock() - self._start

    def resume(self, store: Store) -> None:
        """Count what earlier runs of the experiment spent, from its store."""
        self._top = store.top_steps()
        self.steps_spent = sum(self._top.values())
        self.earlier_seconds = _busy_seconds(store.busy_spans())

    def count(self, trial: int, step: int) -> None:
        """``trial`` reported ``step``."""
        top = self._top.get(trial, 0)
        if step > top:
            self.steps_spent += step - top
            self._top[trial] = step

    def reached(self) -> str | None:
        """The line that says which budget is spent, ``None`` while neither is; once reached, it stays
        reached, and a step budget's line counts the steps reported so far: the trials still running
        when it was reached report once more as they stop."""
        if self._reached is None:
            if self.steps is not None and self.steps_spent >= self.steps:
                self._reached, self._steps_then = "steps", self.steps_spent
            elif self.seconds is not None and self.seconds_spent >= self.seconds:
                self._reached = f"time budget reached: {self.seconds_spent:.0f} s of {self.seconds:.0f} s"
        if self._reached != "steps":
            return self._reached
        line = f"step budget reached: {self.steps_spent} steps reported of {self.steps}"
        late = self.steps_spent - self._steps_then
        if late:
            line += f" ({late} of them by trials still running when it was reached, before they stopped)"
        return line


def _busy_seconds(spans: list[tuple[float, float]]) -> float:
    """How long at least one evaluation ran: the union of ``spans`` (the results' [started, finished]
    and the report times of trials that have no result)."""
    total, end = 0.0, None
    for start, finish in sorted(spans):
        if end is None or start > end:
            total += finish - start
            end = finish
        elif finish > end:
            total += finish - end
            end = finish
    return total
