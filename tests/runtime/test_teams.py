"""Multi-rank tasks (``task.ranks``) on the thread backend: sizes, team ranks, one result per task,
run-time size errors, and how a team's members' outcomes become the task's."""

from __future__ import annotations

from collections import defaultdict, deque

from testutil import TESTS
from emews import Optimizer
from emews.job.wiring import RunSpec, run_in_threads
from emews.objective.function import ObjectiveRef
from emews.optimizers.random import RandomSearch
from emews.core.results import Outcome, Status, Task
from emews.runtime.dispatch import Ended, Fatal, Refused, Requeue, Send, Started, Unfinished
from emews.runtime.slots import SlotDispatch
from emews.runtime.teams import STRANDED_GRACE, TeamDispatch, TeamStranded
from emews.runtime.transport import Tag
from emews.core.space import Float, Int, Space
from emews.core.task_size import FixedSize, FunctionSize, OptimizerSize, ParameterSize

TEAM = ObjectiveRef(str(TESTS / "objectives" / "team.py"))


def members_by_task(events) -> dict[int, list[tuple[int, int, int]]]:
    found = defaultdict(list)
    for kind, (task, team_rank, team_size, rank) in events.events:
        if kind == "member":
            found[task].append((team_rank, team_size, rank))
    return found


def test_mixed_sizes_run_on_that_many_ranks_and_record_team_rank_0s_value(events) -> None:
    space = Space({"x": Float(0.0, 1.0), "k": Int(1, 4)})
    spec = RunSpec(space, lambda: RandomSearch(seed=3), TEAM, budget=30, isolation="inline",
                   show_progress=False, task_size=ParameterSize("k"))
    summary = run_in_threads(spec, workers=5)
    assert summary.error is None and summary.completed == 30 and summary.failed == 0
    teams = members_by_task(events)
    assert len(teams) == 30
    sizes = set()
    for members in teams.values():
        size = members[0][1]
        sizes.add(size)
        assert sorted(m[0] for m in members) == list(range(size))  # team ranks 0..k-1, once each
        assert len({m[2] for m in members}) == size                 # on k distinct worker ranks
    assert sizes == {1, 2, 3, 4}
    assert summary.best is not None and summary.best.objective >= 0  # never a non-leader's value


class Points(Optimizer):
    """Puts the points it is given as one batch."""

    def __init__(self, points: list[dict]) -> None:
        self.points = points
        self.results = []

    def run(self, evaluator) -> None:
        self.results = evaluator.map(self.points)


class Sized(Optimizer):
    """Puts points with sizes of its own (``evaluator.put(points, ranks=...)``)."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.results = []

    def run(self, evaluator) -> None:
        ids = evaluator.put([{"x": i / 10} for i in range(len(self.sizes))], ranks=self.sizes)
        self.results = sorted(evaluator.get(len(ids)), key=lambda r: r.id)


def test_the_optimizer_sets_sizes_per_point_and_a_size_too_large_fails_only_its_task(events) -> None:
    optimizer = Sized([2, 1, 9, 3, 0])
    spec = RunSpec(Space({"x": Float(0.0, 1.0)}), lambda: optimizer, TEAM, budget=5, isolation="inline",
                   show_progress=False, task_size=OptimizerSize())
    summary = run_in_threads(spec, workers=3)
    assert summary.error is None
    statuses = [r.status for r in optimizer.results]
    assert statuses == [Status.OK, Status.OK, Status.FAILED, Status.OK, Status.FAILED]
    assert "task size 9 ranks" in optimizer.results[2].error and "1 to 3" in optimizer.results[2].error
    assert "task size 0 ranks" in optimizer.results[4].error
    teams = members_by_task(events)
    assert [len(teams[r.id]) for r in optimizer.results if r.ok] == [2, 1, 3]


def test_sizes_from_a_function_of_the_point(events) -> None:
    spec = RunSpec(Space({"x": Float(0.0, 1.0)}), lambda: RandomSearch(seed=5), TEAM, budget=20,
                   isolation="inline", show_progress=False,
                   task_size=FunctionSize(f"{TESTS / 'objectives' / 'team_size.py'}:ranks"))
    summary = run_in_threads(spec, workers=3)
    assert summary.completed == 20
    teams = members_by_task(events)
    for task_id, members in teams.items():
        assert len(members) == members[0][1]
    assert summary.failed == 20 - len(teams) > 0  # x < 0.1: 99 ranks, failed with its cause


def test_a_size_function_that_gives_no_whole_number_fails_only_that_task(events) -> None:
    optimizer = Points([{"x": 0.5, "k": k} for k in (1, 5, 2, 6, 7)])
    spec = RunSpec(Space({"x": Float(0.0, 1.0), "k": Int(1, 7)}), lambda: optimizer, TEAM, budget=5,
                   isolation="inline", show_progress=False,
                   task_size=FunctionSize(f"{TESTS / 'objectives' / 'team_size.py'}:odd_types"))
    summary = run_in_threads(spec, workers=3)
    assert summary.error is None and summary.completed == 5
    by_k = {r.params["k"]: r for r in optimizer.results}
    assert "gave '2', not a whole number of ranks" in by_k[5].error and by_k[5].status is Status.FAILED
    assert "gave True, not a whole number of ranks" in by_k[6].error and by_k[6].status is Status.FAILED
    assert [by_k[k].status for k in (1, 2, 7)] == [Status.OK] * 3
    teams = members_by_task(events)
    assert [len(teams[by_k[k].id]) for k in (1, 2, 7)] == [1, 2, 2]  # 2.0 is 2 ranks


def test_sizes_given_to_a_single_rank_run_are_refused() -> None:
    spec = RunSpec(Space({"x": Float(0.0, 1.0)}), lambda: Sized([2]), TEAM, budget=1, isolation="inline",
                   show_progress=False, task_size=FixedSize(1))
    summary = run_in_threads(spec, workers=2)
    assert "task.ranks" in str(summary.error)


def _sent(events: list, tag: Tag = Tag.TASK) -> dict[int, list]:
    """What the events send, by rank (the task batches by default)."""
    sent: dict[int, list] = defaultdict(list)
    for event in events:
        if isinstance(event, Send) and event.tag is tag:
            sent[event.rank].append(event.payload)
    return sent


def _ended(events: list) -> Outcome | None:
    """The task outcome among the events (``None``: the task has not ended)."""
    (outcome,) = [o for e in events if isinstance(e, Ended) for o in e.outcomes] or [None]
    return outcome


def _dispatch(sizes: list[int], workers: int = 4) -> tuple[TeamDispatch, dict[int, list]]:
    dispatch = TeamDispatch({r: "node0" if r <= 2 else "node1" for r in range(1, workers + 1)}, clock=lambda: 0.0)
    queue = deque(Task(i, {"x": 0}, 0, 0.0, ranks=k) for i, k in enumerate(sizes))
    events = dispatch.place(queue, start=True)
    assert not queue and not [e for e in events if isinstance(e, Refused)]
    assert [t.id for e in events if isinstance(e, Started) for t in e.tasks] == list(range(len(sizes)))
    return dispatch, _sent(events)


def test_a_crashed_member_is_the_teams_cause_and_the_others_are_cancelled_once() -> None:
    dispatch, sent = _dispatch([4])
    assert sorted(sent) == [1, 2, 3, 4] and sent[1][0][0].ranks == (1, 2, 3, 4)
    first = dispatch.ended(3, [Outcome(0, Status.FAILED, error="gloo: connection reset", rank=3, host="b")])
    assert _sent(first, Tag.CANCEL) == {1: [0], 2: [0], 4: [0]} and _ended(first) is None
    crash = dispatch.ended(2, [Outcome(0, Status.CRASHED, error="died of SIGSEGV", rank=2, host="a")])
    assert crash == []                                                # cancelled once, not ended yet
    dispatch.ended(1, [Outcome(0, Status.FAILED, error="cancelled", rank=1, host="a")])
    done = _ended(dispatch.ended(4, [Outcome(0, Status.FAILED, error="cancelled", rank=4, host="b")]))
    assert done.status is Status.CRASHED
    assert "team rank 1 of 4 (rank 2 on node0)" in done.error and "SIGSEGV" in done.error
    assert dispatch.busy() == 0 and dispatch.has_room
    assert dispatch.ended(4, [Outcome(0, Status.OK, 1.0)]) == []      # late or repeated: ignored


def test_an_inline_team_still_running_after_its_timeout_and_grace_is_stranded_with_its_stuck_member_named() -> None:
    now = [0.0]
    dispatch = TeamDispatch({r: "node0" for r in (1, 2, 3, 4)}, clock=lambda: now[0], inline_timeout=5.0)
    started = dispatch.place(deque([Task(0, {"x": 0}, 0, 0.0, ranks=2), Task(1, {"x": 0}, 0, 0.0, ranks=2)]),
                             start=True)
    assert sorted(_sent(started)) == [1, 2, 3, 4]
    dispatch.ended(2, [Outcome(0, Status.FAILED, error="Traceback ...\nRuntimeError: member 1 failed", rank=2)])
    dispatch.ended(3, [Outcome(1, Status.OK, 1.0, rank=3)])
    dispatch.ended(4, [Outcome(1, Status.OK, 2.0, rank=4)])
    now[0] = 5.0 + STRANDED_GRACE - 0.1
    assert dispatch.place(deque(), start=True) == []                 # within the grace: it may still end
    now[0] = 5.0 + STRANDED_GRACE
    queued = deque([Task(2, {"x": 0}, 0, 0.0, ranks=1)])
    ended, fatal = dispatch.place(queued, start=True)
    assert list(queued) and isinstance(fatal, Fatal)                  # the job ends: nothing more is taken
    error = fatal.error
    assert isinstance(error, TeamStranded)
    assert str(error).startswith(f"task 0: team rank 0 of 2 (rank 1 on node0) did not end {STRANDED_GRACE:g} s "
                                 "after the task timeout of 5 s"), error
    (outcome,) = ended.outcomes
    assert outcome.task_id == 0 and outcome.status is Status.TIMEOUT
    assert outcome.error.startswith("team rank 0 of 2 (rank 1 on node0) timeout: did not end")
    assert outcome.error.endswith("; team rank 1 failed: RuntimeError: member 1 failed"), outcome.error
    assert dispatch.busy() == 0 and dispatch.stranded() == []          # recorded once
    process = TeamDispatch({1: "a", 2: "a"}, clock=lambda: now[0])  # no inline timeout: never stranded
    assert _sent(process.place(deque([Task(2, {"x": 0}, 0, 0.0, ranks=2)]), start=True))
    now[0] = 1e9
    assert process.stranded() == []


def test_a_team_that_succeeds_reports_its_leaders_value_over_its_whole_span() -> None:
    dispatch, sent = _dispatch([2, 2])
    assert {r: p[0][0].task.id for r, p in sent.items()} == {1: 0, 2: 0, 3: 1, 4: 1}  # one node each
    assert dispatch.ended(2, [Outcome(0, Status.OK, -5.0, started=1.0, finished=9.0)]) == []
    done = _ended(dispatch.ended(1, [Outcome(0, Status.OK, 3.0, {"acc": 1}, started=2.0, finished=8.0, rank=1)]))
    assert (done.value, done.metrics, done.rank) == (3.0, {"acc": 1}, 1)
    assert (done.started, done.finished) == (1.0, 9.0)


def test_the_teams_run_times_make_the_mean_the_distributor_paces_by() -> None:
    """A task's run time, its first member's start to its last member's end, joins the moving mean
    once the task ended (as SlotDispatch's): the distributor sleeps instead of polling, and commits
    larger groups, while long team tasks run (issue 27: 100,000 workers of mixed sizes polled)."""
    dispatch, _ = _dispatch([2, 2])
    assert dispatch.mean_run is None
    dispatch.ended(1, [Outcome(0, Status.OK, 1.0, started=1.0, finished=50.0)])
    assert dispatch.mean_run is None                                  # one member: not ended yet
    dispatch.ended(2, [Outcome(0, Status.OK, 1.0, started=0.0, finished=60.0)])
    assert dispatch.mean_run == 60.0
    dispatch.ended(3, [Outcome(1, Status.OK, 1.0, started=0.0, finished=20.0)])
    dispatch.ended(4, [Outcome(1, Status.OK, 1.0, started=0.0, finished=20.0)])
    assert abs(dispatch.mean_run - (0.9 * 60.0 + 0.1 * 20.0)) < 1e-9


def test_a_worker_that_stops_on_its_own_requeues_its_teams_task_and_fails_what_no_longer_fits() -> None:
    dispatch, sent = _dispatch([2])                                   # (queued together, the 4-rank task
    assert dispatch.place(deque([Task(1, {"x": 0}, 0, 0.0, ranks=4)]), start=True) == []  # would start first)
    assert dispatch.waiting == 1                                      # the 4-rank task waits
    events = dispatch.stopped(2, (), closing=False)
    assert _sent(events, Tag.CANCEL) == {1: [0]}                      # its team mate is told to stop
    (refused,) = [e for e in events if isinstance(e, Refused)]
    assert refused.task.ranks == 4 and "only 3 worker ranks" in refused.outcome.error
    assert dispatch.waiting == 0 and _ended(events) is None
    done = dispatch.ended(1, [Outcome(0, Status.FAILED, error="cancelled", rank=1)])
    assert done == [Requeue(0)]                                       # run it again, not a result
    assert dispatch.place(deque(), start=True) == []                  # nothing queued to start
    placed = _sent(dispatch.place(deque([Task(5, {"x": 0}, 0, 0.0, ranks=3)]), start=True))
    assert sorted(placed) == [1, 3, 4]                                # never the stopped rank


def test_a_worker_that_stops_while_the_run_closes_leaves_what_it_held_unfinished() -> None:
    dispatch, _ = _dispatch([2])
    assert dispatch.stopped(1, (0,), closing=True) == [Unfinished((0,))]


def test_a_size_the_job_cannot_hold_is_refused_when_taken_and_never_started() -> None:
    dispatch = TeamDispatch({1: "a", 2: "a"}, clock=lambda: 0.0)
    queue = deque([Task(0, {"x": 0}, 0, 0.0, ranks=3), Task(1, {"x": 0}, 0, 0.0, ranks=2)])
    refused, started, *sends = dispatch.place(queue, start=False) + dispatch.place(deque(), start=True)
    assert isinstance(refused, Refused) and refused.task.id == 0 and "allows 1 to 2" in refused.outcome.error
    assert isinstance(started, Started) and [t.id for t in started.tasks] == [1] and len(sends) == 2


def test_slots_hand_batches_to_the_last_worker_that_reported_and_requeue_a_stopped_workers_tasks() -> None:
    slots = SlotDispatch([1, 2], prefetch=4)
    queue = deque(Task(i, {"x": 0}, 0, 0.0) for i in range(3))
    assert slots.place(queue, start=False) == [] and len(queue) == 3  # nothing starts: nothing is taken
    events = slots.place(queue, start=True)
    assert [(e.rank, [t.id for t in e.payload]) for e in events if isinstance(e, Send)] == [(1, [0]), (2, [1])]
    assert [t.id for t in queue] == [2] and not slots.has_room and slots.busy(2) == 2
    assert slots.ended(2, [Outcome(1, Status.OK, 0.0)]) == [Ended([Outcome(1, Status.OK, 0.0)])]
    assert [(e.rank, e.tag) for e in slots.place(queue, start=True) if isinstance(e, Send)] == [(2, Tag.TASK)]
    assert slots.stopped(1, (0,), closing=False) == [Unfinished((0,))]
    assert slots.capacity == 1 and slots.busy(5) == 2


def test_resume_runs_an_interrupted_task_again_on_the_ranks_its_optimizer_gave_it(tmp_path) -> None:
    """The store keeps each task's size: an optimizer's own sizes survive a stop (the workflow's
    ``task.ranks`` otherwise decides again, so ``--set task.ranks=...`` applies on resume)."""
    from emews.core.evaluator import Evaluator
    from emews.job.wiring import resume_state
    from emews.core.queues import QueuePair
    from emews.store.results_store import ResultsStore

    store = ResultsStore(tmp_path / "results.db")
    store.commit(tasks=[Task(0, {"x": 0.1}, 7, 1.0, ranks=3), Task(1, {"x": 0.2}, 8, 1.0, ranks=2)])
    earlier = resume_state(store)
    assert [(t.id, t.ranks) for t in earlier.requeue] == [(0, 3), (1, 2)]
    space = Space({"x": Float(0.0, 1.0)})
    by_optimizer = Evaluator(QueuePair(), space, workers=4, budget=5, requeue=earlier.requeue,
                             task_size=OptimizerSize())
    assert [t.ranks for t in by_optimizer.requeued] == [3, 2]
    again = [Task(t.id, t.params, t.seed, t.submitted, t.attempt, ranks=size) for t, size in zip(earlier.requeue, (3, 2))]
    by_workflow = Evaluator(QueuePair(), space, workers=4, budget=5, requeue=again, task_size=FixedSize(4))
    assert [t.ranks for t in by_workflow.requeued] == [4, 4]


def test_a_store_from_before_task_sizes_resumes_its_tasks_on_one_rank(tmp_path) -> None:
    import sqlite3

    from emews.store import results_store as store_module
    from emews.store.results_store import ResultsStore

    path = tmp_path / "results.db"
    old_schema = store_module._SCHEMA.replace(",\n    ranks INTEGER NOT NULL DEFAULT 1", "")
    assert old_schema != store_module._SCHEMA
    with sqlite3.connect(path) as db:   # the tables as releases before task sizes wrote them
        db.executescript(old_schema)
        db.execute("INSERT INTO tasks VALUES (0, '{\"x\":0.5}', 1, 1.0, 0)")
    assert [(t.id, t.ranks) for t, _ in ResultsStore(path, readonly=True).unfinished()] == [(0, 1)]
    store = ResultsStore(path)   # opened to write: the column is added
    store.commit(tasks=[Task(1, {"x": 0.25}, 2, 2.0, ranks=2)])
    assert [(t.id, t.ranks) for t, _ in store.unfinished()] == [(0, 1), (1, 2)]


def test_team_world_keeps_the_cores_of_ranks_a_launcher_bound() -> None:
    """What ctx.launch gives a launched rank to run on: its member's cores where the launcher bound
    the member to fewer than its host's ranks have (srun --cpu-bind, PALS --cpu-bind), nothing where
    every rank of a host may run on all of them (a launcher that binds nothing)."""
    from emews.runtime.team_comm import bound_cores, cpu_mask

    assert cpu_mask([0, 1, 5]) == 0b100011
    gathered = [("a", cpu_mask(range(4))), ("a", cpu_mask(range(4))), ("b", cpu_mask([2])), ("b", cpu_mask([0, 1])),
                ("b", cpu_mask([2]))]
    cores = bound_cores(gathered)
    assert cores == {2: (2,), 3: (0, 1), 4: (2,)}
    assert cores[2] is cores[4]  # one tuple per distinct set of cores, however many ranks have it
