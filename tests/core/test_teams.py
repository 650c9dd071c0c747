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
from emews.runtime.teams import STRANDED_GRACE, TeamDispatch, TeamStranded
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


def _dispatch(sizes: list[int], workers: int = 4) -> tuple[TeamDispatch, dict[int, list[int]]]:
    dispatch = TeamDispatch({r: "node0" if r <= 2 else "node1" for r in range(1, workers + 1)}, clock=lambda: 0.0)
    queue = deque(Task(i, {"x": 0}, 0, 0.0, ranks=k) for i, k in enumerate(sizes))
    assert dispatch.take(queue) == []
    sent: dict[int, list[int]] = defaultdict(list)
    for task in dispatch.dispatch(lambda payload, rank: sent[rank].append(payload)):
        pass
    return dispatch, sent


def test_a_crashed_member_is_the_teams_cause_and_the_others_are_cancelled_once() -> None:
    dispatch, sent = _dispatch([4])
    assert sorted(sent) == [1, 2, 3, 4] and sent[1][0][0].ranks == (1, 2, 3, 4)
    first = dispatch.member_done(3, Outcome(0, Status.FAILED, error="gloo: connection reset", rank=3, host="b"))
    assert first.cancel == (1, 2, 4) and first.outcome is None
    crash = dispatch.member_done(2, Outcome(0, Status.CRASHED, error="died of SIGSEGV", rank=2, host="a"))
    assert crash.cancel == () and crash.outcome is None
    dispatch.member_done(1, Outcome(0, Status.FAILED, error="cancelled", rank=1, host="a"))
    done = dispatch.member_done(4, Outcome(0, Status.FAILED, error="cancelled", rank=4, host="b"))
    assert done.outcome.status is Status.CRASHED
    assert "team rank 1 of 4 (rank 2 on node0)" in done.outcome.error and "SIGSEGV" in done.outcome.error
    assert dispatch.busy == 0
    assert dispatch.member_done(4, Outcome(0, Status.OK, 1.0)) is None  # late or repeated: ignored


def test_an_inline_team_still_running_after_its_timeout_and_grace_is_stranded_with_its_stuck_member_named() -> None:
    now = [0.0]
    dispatch = TeamDispatch({r: "node0" for r in (1, 2, 3, 4)}, clock=lambda: now[0], inline_timeout=5.0)
    assert dispatch.take(deque([Task(0, {"x": 0}, 0, 0.0, ranks=2), Task(1, {"x": 0}, 0, 0.0, ranks=2)])) == []
    dispatch.dispatch(lambda payload, rank: None)
    dispatch.member_done(2, Outcome(0, Status.FAILED, error="Traceback ...\nRuntimeError: member 1 failed", rank=2))
    dispatch.member_done(3, Outcome(1, Status.OK, 1.0, rank=3))
    dispatch.member_done(4, Outcome(1, Status.OK, 2.0, rank=4))
    now[0] = 5.0 + STRANDED_GRACE - 0.1
    assert dispatch.stranded() == ([], None)                         # within the grace: it may still end
    now[0] = 5.0 + STRANDED_GRACE
    (event,), error = dispatch.stranded()
    assert isinstance(error, TeamStranded)
    assert str(error).startswith(f"task 0: team rank 0 of 2 (rank 1 on node0) did not end {STRANDED_GRACE:g} s "
                                 "after the task timeout of 5 s"), error
    assert event.task_id == 0 and event.cancel == () and event.outcome.status is Status.TIMEOUT
    assert event.outcome.error.startswith("team rank 0 of 2 (rank 1 on node0) timeout: did not end")
    assert event.outcome.error.endswith("; team rank 1 failed: RuntimeError: member 1 failed"), event.outcome.error
    assert dispatch.busy == 0 and dispatch.stranded() == ([], None)  # recorded once
    process = TeamDispatch({1: "a", 2: "a"}, clock=lambda: now[0])  # no inline timeout: never stranded
    assert process.take(deque([Task(2, {"x": 0}, 0, 0.0, ranks=2)])) == [] and process.dispatch(lambda p, r: None)
    now[0] = 1e9
    assert process.stranded() == ([], None)


def test_a_team_that_succeeds_reports_its_leaders_value_over_its_whole_span() -> None:
    dispatch, sent = _dispatch([2, 2])
    assert {r: p[0][0].task.id for r, p in sent.items()} == {1: 0, 2: 0, 3: 1, 4: 1}  # one node each
    dispatch.member_done(2, Outcome(0, Status.OK, -5.0, started=1.0, finished=9.0))
    done = dispatch.member_done(1, Outcome(0, Status.OK, 3.0, {"acc": 1}, started=2.0, finished=8.0, rank=1))
    assert (done.outcome.value, done.outcome.metrics, done.outcome.rank) == (3.0, {"acc": 1}, 1)
    assert (done.outcome.started, done.outcome.finished) == (1.0, 9.0)


def test_a_worker_that_stops_on_its_own_requeues_its_teams_task_and_fails_what_no_longer_fits() -> None:
    dispatch, sent = _dispatch([2])                                   # (queued together, the 4-rank task
    assert dispatch.take(deque([Task(1, {"x": 0}, 0, 0.0, ranks=4)])) == []  # would start first)
    assert dispatch.dispatch(lambda payload, rank: None) == []
    assert dispatch.waiting == 1                                      # the 4-rank task waits
    events, too_large = dispatch.stopped(2)
    assert [o.task_id for o in too_large] == [1] and "only 3 worker ranks" in too_large[0].error
    (event,) = events
    assert event.cancel == (1,) and event.outcome is None             # its team mate is told to stop
    done = dispatch.member_done(1, Outcome(0, Status.FAILED, error="cancelled", rank=1))
    assert done.requeue and done.outcome is not None                  # run it again, not a result
    assert dispatch.task(1).ranks == 4
    assert dispatch.dispatch(lambda payload, rank: None) == []       # nothing queued to start
    queue = deque([Task(5, {"x": 0}, 0, 0.0, ranks=3)])
    assert dispatch.take(queue) == []
    placed: dict[int, list] = defaultdict(list)
    dispatch.dispatch(lambda payload, rank: placed[rank].append(payload))
    assert sorted(placed) == [1, 3, 4]                                # never the stopped rank


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
