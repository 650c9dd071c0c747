"""EQ-SQL's Python API (the ``eqsql`` package an ME imports) over the emews evaluator.

An EQ-SQL model exploration algorithm (ME) starts its database (``db_tools.start_db``), opens a
task queue (``local_queue.init_task_queue``), starts a Swift/T worker pool
(``worker_pool.start_local_pool``), submits JSON payloads (``submit_tasks``) and takes their
results as they complete (``as_completed``, ``pop_completed``, ``Future.result``). Under the
``eqsql`` optimizer (:mod:`emews.optimizers.eqsql`) these names are this module's: the store is
emews' and the workers are the job's, so starting and stopping the database and the pool do
nothing, and the task queue is :class:`TaskQueue`, whose tasks are the evaluator's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterable
from enum import IntEnum
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from emews.core.errors import EmewsError
from emews.core.imports import modules_installed
from emews.core.results import Result

from .eqpy_api import result_text

EQ_ABORT = "EQ_ABORT"
EQ_TIMEOUT = "EQ_TIMEOUT"
EQ_STOP = "EQ_STOP"
#: the key of every point: the task's payload, as the worker pool passed it to the model
PAYLOAD = "payload"


class ResultStatus(IntEnum):
    """Whether a queue operation succeeded (EQ-SQL's ``ResultStatus``)."""

    SUCCESS = 0
    FAILURE = 1


class TaskStatus(IntEnum):
    """A task's state (EQ-SQL's ``TaskStatus``)."""

    QUEUED = 0
    RUNNING = 1
    COMPLETE = 2
    CANCELED = 3
    REQUEUED = 4


class TimeoutError(EmewsError):  # noqa: A001 - EQ-SQL's name (eqsql.task_queues.core.TimeoutError)
    """``as_completed`` / ``pop_completed`` waited past their timeout."""


class StopConditionException(EmewsError):
    """EQ-SQL's; kept for MEs that name it."""


class Future:
    """One submitted task (EQ-SQL's ``Future``); ``eq_task_id`` stays its id when it is reprioritized."""

    def __init__(self, queue: TaskQueue, eq_task_id: int, tag: str | None = None) -> None:
        self.eq_sql, self.eq_task_id, self.tag = queue, eq_task_id, tag

    def result(self, delay: float = 0.5, timeout: float | None = 2.0) -> tuple[ResultStatus, str]:
        return self.eq_sql.query_result(self.eq_task_id, delay, timeout)

    @property
    def status(self) -> TaskStatus:
        return self.eq_sql.status_of(self.eq_task_id)

    @property
    def worker_pool(self) -> str | None:
        result = self.eq_sql.results.get(self.eq_task_id)
        return None if result is None else f"{result.host} rank {result.rank}"

    def cancel(self) -> bool:
        status, ids = self.eq_sql.cancel_tasks([self])
        return status == ResultStatus.SUCCESS and self.eq_task_id in ids

    def done(self) -> bool:
        return self.status in (TaskStatus.COMPLETE, TaskStatus.CANCELED)

    @property
    def priority(self) -> int:
        return self.eq_sql.priorities[self.eq_task_id]

    @priority.setter
    def priority(self, new_priority: int) -> None:
        self.eq_sql.update_priorities([self], new_priority)


class TaskQueue:
    """EQ-SQL's task queue over the evaluator: a payload is the point ``{"payload": PAYLOAD}``; a
    result is the objective's text (``repr`` of the number, ``nan`` for a failed evaluation).

    ``update_priorities`` takes back the tasks not started and puts them again with their new
    priority (a task started already keeps running)."""

    def __init__(self, evaluator: Any, check_type: Callable[[int], None]) -> None:
        self.evaluator = evaluator
        self.check_type = check_type
        self.task: dict[int, int] = {}  # eq_task_id -> its current emews task id
        self.eq_id: dict[int, int] = {}  # emews task id -> eq_task_id
        self.payloads: dict[int, str] = {}
        self.priorities: dict[int, int] = {}
        self.results: dict[int, Result] = {}  # by eq_task_id
        self.cancelled: set[int] = set()
        self._next = 1

    # submitting
    def submit_task(
        self, exp_id: str, eq_type: int, payload: str, priority: int = 0, tag: str | None = None
    ) -> tuple[ResultStatus, Future]:
        status, futures = self.submit_tasks(exp_id, eq_type, [payload], priority, tag)
        return status, futures[0]

    def submit_tasks(
        self, exp_id: str, eq_type: int, payload: list[str], priority: int = 0, tag: str | None = None
    ) -> tuple[ResultStatus, list[Future]]:
        self.check_type(eq_type)
        eq_ids = list(range(self._next, self._next + len(payload)))
        self._next += len(payload)
        for eq_id, text in zip(eq_ids, payload, strict=True):
            self.payloads[eq_id], self.priorities[eq_id] = str(text), priority
        self._put(eq_ids, priority)
        return ResultStatus.SUCCESS, [Future(self, eq_id, tag) for eq_id in eq_ids]

    def _put(self, eq_ids: list[int], priority: int) -> None:
        ids = self.evaluator.put([{PAYLOAD: self.payloads[i]} for i in eq_ids], priority=priority)
        for eq_id, task_id in zip(eq_ids, ids, strict=True):
            self.task[eq_id], self.eq_id[task_id] = task_id, eq_id

    # results
    def _collect(self, timeout: float | None) -> None:
        """Take the results that are ready, waiting up to ``timeout`` for one."""
        for result in self.evaluator.get(1, timeout=timeout):
            eq_id = self.eq_id.get(result.id)
            if eq_id is not None:
                self.results[eq_id] = result

    def query_result(
        self, eq_task_id: int, delay: float = 0.5, timeout: float | None = 2.0
    ) -> tuple[ResultStatus, str]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while eq_task_id not in self.results:
            left = None if deadline is None else deadline - time.monotonic()
            if eq_task_id in self.cancelled or (left is not None and left <= 0) or not self.evaluator.pending:
                return ResultStatus.FAILURE, EQ_TIMEOUT
            self._collect(left)
        return ResultStatus.SUCCESS, result_text(self.results[eq_task_id])

    def as_completed(
        self,
        futures: list[Future],
        pop: bool = False,
        timeout: float | None = None,
        n: int | None = None,
        batch_size: int = 1,
        sleep: float = 0,
    ) -> Generator[Future, None, None]:
        deadline = None if timeout is None else time.monotonic() + timeout
        waiting = [f for f in futures if f.eq_task_id not in self.cancelled]
        yielded = 0
        while waiting and (n is None or yielded < n):
            done = [f for f in waiting if f.eq_task_id in self.results]
            for future in done[: None if n is None else n - yielded]:
                waiting.remove(future)
                if pop:
                    futures.remove(future)
                yielded += 1
                yield future
            if not waiting or (n is not None and yielded >= n) or done:
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or not self.evaluator.pending:
                raise TimeoutError(f"as_completed: {len(waiting)} futures not completed within {timeout} s")
            self._collect(left)

    def pop_completed(self, futures: list[Future], timeout: float | None = None, sleep: float = 0) -> Future:
        return next(self.as_completed(futures, pop=True, timeout=timeout, n=1, sleep=sleep))

    # the queue
    def status_of(self, eq_task_id: int) -> TaskStatus:
        if eq_task_id in self.cancelled:
            return TaskStatus.CANCELED
        return TaskStatus.COMPLETE if eq_task_id in self.results else TaskStatus.QUEUED

    def get_status(self, futures: Iterable[Future]) -> list[tuple[Future, TaskStatus]]:
        return [(f, self.status_of(f.eq_task_id)) for f in futures]

    def cancel_tasks(self, futures: list[Future]) -> tuple[ResultStatus, list[int]]:
        by_task = {self.task[f.eq_task_id]: f.eq_task_id for f in futures if f.eq_task_id in self.task}
        taken = [by_task[t] for t in self.evaluator.cancel(list(by_task))]
        self.cancelled.update(taken)
        return ResultStatus.SUCCESS, taken

    def get_priorities(self, futures: Iterable[Future]) -> list[tuple[Future, int]]:
        return [(f, self.priorities[f.eq_task_id]) for f in futures]

    def update_priorities(self, futures: list[Future], new_priority: int | list[int]) -> tuple[ResultStatus, list[int]]:
        given = new_priority if isinstance(new_priority, list) else [new_priority] * len(futures)
        _, taken = self.cancel_tasks(futures)
        self.cancelled.difference_update(taken)
        wanted = dict(zip((f.eq_task_id for f in futures), given, strict=True))
        for eq_id in taken:  # highest first: within one priority, the order put is the order run
            self.priorities[eq_id] = wanted[eq_id]
        for priority in sorted({wanted[i] for i in taken}, reverse=True):
            self._put([i for i in taken if wanted[i] == priority], priority)
        return ResultStatus.SUCCESS, taken

    def get_worker_pools(self, futures: list[Future]) -> list[tuple[Future, str | None]]:
        return [(f, f.worker_pool) for f in futures]

    def are_queues_empty(self, eq_type: int | None = None) -> bool:
        return not self.evaluator.pending

    def clear_queues(self) -> None:
        """Take back every task not started (the ME is done with them)."""
        self.cancel_tasks([Future(self, eq_id) for eq_id in self.task if eq_id not in self.results])

    def close(self) -> None:
        """Nothing to close: the store is emews'."""


class _Pool:
    """A started worker pool: the job's workers, which emews stops itself."""

    def cancel(self) -> None:
        """The workers stop with the run."""


def _modules(queue: Callable[[], TaskQueue]) -> dict[str, ModuleType]:
    """The ``eqsql`` package's modules an ME imports, over ``queue``."""

    def module(name: str, **names: Any) -> ModuleType:
        made = ModuleType(name, f"emews' stand-in for EQ-SQL's {name} (emews.optimizers.eqsql_api)")
        made.__dict__.update(names)
        return made

    def nothing(*args: Any, **kwargs: Any) -> None:
        """The database is emews' store: nothing to start or stop."""

    core = module(
        "eqsql.task_queues.core",
        ResultStatus=ResultStatus,
        TaskStatus=TaskStatus,
        Future=Future,
        TaskQueue=TaskQueue,
        TimeoutError=TimeoutError,
        StopConditionException=StopConditionException,
        EQ_ABORT=EQ_ABORT,
        EQ_TIMEOUT=EQ_TIMEOUT,
        EQ_STOP=EQ_STOP,
    )
    local_queue = module("eqsql.task_queues.local_queue", init_task_queue=lambda *a, **k: queue())
    task_queues = module("eqsql.task_queues", core=core, local_queue=local_queue, __path__=[])
    db_tools = module("eqsql.db_tools", start_db=nothing, stop_db=nothing)
    worker_pool = module(
        "eqsql.worker_pool",
        start_local_pool=lambda *a, **k: _Pool(),
        cfg_file_to_dict=lambda *a, **k: {},
    )
    cfg = module("eqsql.cfg", parse_yaml_cfg=lambda path: yaml.safe_load(Path(path).read_text()))
    eqsql = module("eqsql", task_queues=task_queues, db_tools=db_tools, worker_pool=worker_pool, cfg=cfg, __path__=[])
    return {m.__name__: m for m in (eqsql, task_queues, core, local_queue, db_tools, worker_pool, cfg)}


def installed(queue: Callable[[], TaskQueue]) -> contextlib.AbstractContextManager[None]:
    """These modules as ``eqsql`` in ``sys.modules`` (what the ME's imports find); the earlier state after."""
    return modules_installed(_modules(queue))
