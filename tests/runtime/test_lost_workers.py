"""The slot dispatch's rules for workers that stop answering: a worker that never says it is ready
gets no task and is run without once its setup's bound and grace pass; one silent past the task
timeout is run without, its first task (the one it began) and those it held unstarted named apart;
the last worker ends the job instead; while the run closes, none ends it."""

from __future__ import annotations

from collections import deque

from test_prefetch import Clock, outcome, sends, task

from emews.runtime.dispatch import Fatal, Lost
from emews.runtime.slots import SlotDispatch, WorkerNotReady, WorkerStalled


def placed(dispatch: SlotDispatch, queue: deque) -> list[tuple[int, list[int]]]:
    return [(s.rank, [t.id for t in s.payload]) for s in sends(dispatch.place(queue, start=True))]


def test_tasks_go_only_to_workers_that_said_they_are_ready_and_an_unready_one_is_run_without() -> None:
    clock = Clock()
    dispatch = SlotDispatch([1, 2], prefetch=1, clock=clock, ready_within=10.0)
    queue = deque(task(i) for i in range(3))
    assert dispatch.capacity == 2 and placed(dispatch, queue) == []  # nobody is ready yet
    dispatch.ready(2)
    assert placed(dispatch, queue) == [(2, [0])]
    clock.now += 9.0
    assert dispatch.stalled() == []
    clock.now += 2.0
    (lost,) = dispatch.stalled()
    assert isinstance(lost, Lost) and lost.rank == 1 and (lost.began, list(lost.unstarted)) == (None, [])
    assert isinstance(lost.why, WorkerNotReady) and "worker rank 1 did not say it was ready" in str(lost.why)
    assert "the run goes on without it" in str(lost.why)
    dispatch.ready(1)  # too late: it gets nothing
    dispatch.ended(2, [outcome(0, 1.0)])
    assert placed(dispatch, queue) == [(2, [1])] and dispatch.capacity == 1


def test_no_worker_ready_in_time_ends_the_job() -> None:
    clock = Clock()
    dispatch = SlotDispatch([1, 2], prefetch=1, clock=clock, ready_within=10.0)
    clock.now += 11.0
    (fatal,) = dispatch.stalled()
    assert isinstance(fatal, Fatal) and "no worker is ready" in str(fatal.error)


def test_a_stalled_worker_is_run_without_naming_the_task_it_began_and_the_last_one_ends_the_job() -> None:
    clock = Clock()
    dispatch = SlotDispatch([1, 2], prefetch=8, clock=clock, stall_after=10.0, task_timeout=3.0)
    queue = deque(task(i) for i in range(2))
    assert placed(dispatch, queue) == [(1, [0]), (2, [1])]
    dispatch.ended(1, [outcome(0, 1e-5)])  # short: rank 1 takes several ahead
    queue.extend(task(i) for i in range(2, 6))
    assert placed(dispatch, queue) == [(1, [2, 3, 4, 5])]
    dispatch.ended(1, [outcome(2, 1e-5)])
    clock.now += 5.0
    dispatch.ended(2, [outcome(1, 5.0)])
    clock.now += 6.0
    (lost,) = dispatch.stalled()  # rank 1: 11 s without a word, holding 3, 4, 5
    assert isinstance(lost, Lost) and lost.rank == 1 and (lost.began, list(lost.unstarted)) == (3, [4, 5])
    assert isinstance(lost.why, WorkerStalled) and "holding 3 tasks" in str(lost.why)
    queue.extend(task(i) for i in (3, 4, 5))  # the distributor queues them again
    assert placed(dispatch, queue) == [(2, [3])]
    clock.now += 11.0
    (fatal,) = dispatch.stalled()  # rank 2 is the last one
    assert isinstance(fatal, Fatal) and "no other worker is left" in str(fatal.error)
    assert "emews resume" not in str(fatal.error) and "run again on resume" in str(fatal.error)


def test_while_the_run_closes_a_silent_worker_is_not_waited_for_and_ends_nothing() -> None:
    clock = Clock()
    dispatch = SlotDispatch([1], prefetch=1, clock=clock, stall_after=10.0, task_timeout=3.0, ready_within=5.0)
    dispatch.ready(1)
    queue = deque([task(0)])
    assert placed(dispatch, queue) == [(1, [0])]
    clock.now += 11.0
    (lost,) = dispatch.stalled(closing=True)
    assert isinstance(lost, Lost) and lost.began == 0 and "so the job ends without it" in str(lost.why)


def test_a_lost_workers_task_counts_its_attempt_when_it_runs_again_not_before(tmp_path) -> None:
    """The run goes on without rank 1, which began task 0: task 0 is queued again, first. Stopped
    before it ran again, ``emews resume`` runs it again (was: its attempt was stored at once, and resume
    said 'the run stopped 2 times while this task ran; not run again', a failure for a task that ran
    once); run again, its attempt is stored then."""
    from emews.core.queues import QueuePair
    from emews.core.results import Task
    from emews.job.wiring import resume_state
    from emews.runtime.dispatch import Started
    from emews.runtime.distributor import Distributor
    from emews.runtime.progress import Progress
    from emews.store.results_store import ResultsStore

    def lost_with_task_0(store: ResultsStore) -> tuple[Distributor, QueuePair, Task]:
        """A distributor on ``store`` whose rank 1 began task 0 and was then run without."""
        queues = QueuePair()
        distributor = Distributor(None, queues, [1, 2], sign=1.0, progress=Progress(None, 2), store=store)  # type: ignore[arg-type]
        first = Task(0, {"x": 0}, seed=0, submitted=0.0)
        distributor._apply([Started([first])])
        distributor._apply([Lost(1, WorkerStalled(1, 1, 9.0, 3.0), 0, ())])
        return distributor, queues, first

    with ResultsStore(tmp_path / "results.db") as store:
        _, queues, first = lost_with_task_0(store)
        assert list(queues.tasks) == [first] and first.attempt == 1
        assert [(t.id, attempt) for t, attempt in store.unfinished()] == [(0, 0)]   # stopped now: not counted
        assert [t.id for t in resume_state(store).requeue] == [0]                 # resume runs it again
    with ResultsStore(tmp_path / "again.db") as store:
        distributor, queues, _ = lost_with_task_0(store)
        distributor._apply([Started([queues.tasks.popleft()])])                    # it runs again
        assert [(t.id, attempt) for t, attempt in store.unfinished()] == [(0, 1)]


def test_a_task_whose_worker_stops_answering_again_ends_as_a_timeout_instead_of_running_a_third_time() -> None:
    """A task that had run before (a lost worker's, or one a stop caught) and whose worker stops
    answering again may be what stops its workers (an objective blocked in C code): it ends as a
    timeout, saying so, instead of taking one worker after another."""
    from emews.core.queues import QueuePair
    from emews.core.results import Task
    from emews.runtime.dispatch import Started
    from emews.runtime.distributor import Distributor
    from emews.runtime.progress import Progress

    queues = QueuePair()
    distributor = Distributor(None, queues, [1, 2], sign=1.0, progress=Progress(None, 2))  # type: ignore[arg-type]
    again = Task(0, {"x": 0}, seed=0, submitted=0.0)
    again.attempt = 1
    distributor._apply([Started([again]), Lost(2, WorkerStalled(2, 1, 9.0, 3.0), 0, ())])
    assert not queues.tasks and not distributor._in_flight
    (result,) = distributor._group.results
    assert result.id == 0 and result.status.value == "timeout" and "stopped answering" in (result.error or "")


def test_each_worker_the_run_goes_on_without_is_recorded_with_when_why_and_its_tasks() -> None:
    """summary.json did not list the ranks lost during a run: the distributor now records each (rank,
    when, why in short and whole, the task it began and whether that runs again, those it held)."""
    import time

    from emews.core.queues import QueuePair
    from emews.core.results import Task
    from emews.runtime.dispatch import Started
    from emews.runtime.distributor import Distributor
    from emews.core.lost_ranks import LostRank
    from emews.runtime.progress import Progress

    queues = QueuePair()
    distributor = Distributor(None, queues, [1, 2, 3], sign=1.0, progress=Progress(None, 3))  # type: ignore[arg-type]
    tasks = [Task(i, {"x": i}, seed=i, submitted=0.0) for i in range(4)]
    tasks[3].attempt = 1  # it had run before: it ends as a timeout
    before = time.time()
    distributor._apply([Started(tasks), Lost(1, WorkerStalled(1, 3, 9.0, 3.0), 0, (1, 2))])
    distributor._apply([Lost(2, WorkerStalled(2, 1, 9.0, 3.0), 3, ()), Lost(3, WorkerNotReady(3, 6.0), None, ())])
    first, second, third = distributor.lost_ranks
    assert before <= first.at <= time.time()
    assert (first.rank, first.task, first.rerun, tuple(first.unstarted)) == (1, 0, True, (1, 2))
    assert first.reason == "has not answered for 9 s, holding 3 tasks, past the task timeout of 3 s"
    assert "the run goes on without it" in first.why
    assert (second.rank, second.task, second.rerun) == (2, 3, False)
    assert (third.rank, third.task, third.unstarted) == (3, None, ())
    assert third.reason.startswith("did not say it was ready within 6 s")
    assert LostRank.from_json(first.to_json()) == LostRank(1, first.at, first.reason, first.why, 0, True, (1, 2))
    line = first.line()
    assert line.startswith("rank 1 lost at ") and line.endswith(
        ": has not answered for 9 s, holding 3 tasks, past the task timeout of 3 s; its task 0 was queued again "
        "for another worker; 2 tasks it held unstarted queued again")
    assert second.line().endswith("; its task 3 ended as a timeout (it had run before)")


def test_the_stop_waits_for_each_worker_until_it_stopped_or_was_run_without_and_did_not_answer_again() -> None:
    """The count the stop's loop waits on (a count over the few lost workers, not a union with every
    stopped one on each pass): the same as the union it replaces, whatever stopped, was lost or came back."""
    import random

    from emews.core.queues import QueuePair
    from emews.runtime.distributor import Distributor
    from emews.runtime.progress import Progress

    distributor = Distributor(None, QueuePair(), list(range(1, 9)), sign=1.0, progress=Progress(None, 8))  # type: ignore[arg-type]
    distributor.stopped_workers.update({1, 2})
    distributor.lost_workers.update({2, 3, 4})
    distributor._revived.add(4)  # answered again: its stop is waited for
    assert distributor.settled == 3
    rng = random.Random(3)
    for _ in range(500):
        distributor.stopped_workers = {r for r in range(1, 9) if rng.random() < 0.5}
        distributor.lost_workers = {r for r in range(1, 9) if rng.random() < 0.3}
        distributor._revived = {r for r in distributor.lost_workers if rng.random() < 0.5}
        union = distributor.stopped_workers | (distributor.lost_workers - distributor._revived)
        assert distributor.settled == len(union)
