"""Fail fast: a run whose first evaluations all fail with one cause stops, instead of spending its budget.

A broken set-up (a model's argv its parser rejects, a missing file, an import error) fails every
evaluation the same way; a sound one whose points sometimes fail does not fail its first ``limit``
evaluations all alike. The distributor shows each batch of stored results to :class:`FailFast`,
in the order they were stored; the first success, or a second cause, disarms it for the run.
"""

from __future__ import annotations

from collections.abc import Sequence

from emews.core.errors import EmewsError
from emews.core.failure_cause import cause, cause_key
from emews.core.results import Result


class FailedFast(EmewsError):
    """The first ``count`` evaluations of the run all failed with ``cause``; ``first_task`` failed first."""

    def __init__(self, count: int, cause: str, first_task: int) -> None:
        self.count, self.cause, self.first_task = count, cause, first_task
        super().__init__(f"the first {count} evaluations all failed: {cause}")


class FailFast:
    """Raises :class:`FailedFast` once the first ``limit`` results all failed with one cause
    (:func:`~emews.core.failure_cause.cause_key`); ``limit`` 0: never."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.armed = limit > 0
        self._failed = 0
        self._first: tuple[int, str, str] | None = None  # the first failure: task id, cause, its key

    def see(self, results: Sequence[Result]) -> None:
        """The next stored results; raises :class:`FailedFast` when they complete ``limit`` alike failures."""
        for result in results:
            if not self.armed:
                return
            if result.ok:
                self.armed = False
                return
            line = cause(result.error)
            if self._first is None:
                self._first = (result.id, line, cause_key(line))
            elif cause_key(line) != self._first[2]:
                self.armed = False
                return
            self._failed += 1
            if self._failed >= self.limit:
                self.armed = False
                raise FailedFast(self._failed, self._first[1], self._first[0])
