"""Gang scheduling of multi-rank tasks (issue 11): placement, one reservation, EASY backfill.

    python -m pytest -q tests/runtime/test_gang.py

Hand-computed cases first, then hypothesis properties over simulated runs (a simulated clock:
the scheduler is pure, it never reads time).
"""

from __future__ import annotations

import copy
import heapq
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emews.runtime.gang import GangScheduler, IdleRanks, NodeLayout, Placement, Reservation, RunTimeEstimate, _Ends


def nodes_of(workers: int, per_node: int = 4, first: int = 1) -> dict[int, int]:
    """Worker ranks ``first..first+workers-1``, ``per_node`` to a node."""
    return {r: (r - first) // per_node for r in range(first, first + workers)}


# --- placement ------------------------------------------------------------------------------


@settings(deadline=None, max_examples=300)
@given(
    per_node=st.sampled_from([1, 2, 4, 6, 8]),
    nodes=st.integers(1, 6),
    steps=st.lists(st.tuples(st.booleans(), st.integers(1, 8), st.integers(0, 10**6)), max_size=40),
)
def test_idle_ranks_kept_per_node_place_as_the_layout_does(per_node: int, nodes: int, steps: list) -> None:
    """The scheduler's incremental idle ranks (placing at any width without reading every rank)
    choose exactly the ranks NodeLayout.place chooses from the same idle set, after any
    sequence of placements and releases."""
    layout = NodeLayout(nodes_of(per_node * nodes, per_node))
    idle = IdleRanks(layout, layout.ranks)
    busy: list[tuple[int, ...]] = []
    for place, size, pick in steps:
        if place or not busy:
            expected = layout.place(size, set(idle.ranks))
            assert idle.place(size) == expected
            if expected is not None:
                idle.remove(expected)
                busy.append(expected)
        else:
            idle.add(busy.pop(pick % len(busy)))
        assert len(idle) == len(idle.ranks)


def test_small_tasks_fill_the_busiest_node_so_whole_nodes_stay_whole() -> None:
    layout = NodeLayout(nodes_of(8))
    assert layout.place(1, {2, 3, 4, 5, 6, 7, 8}) == (2,)  # node 0 has 3 idle, node 1 has 4
    assert layout.place(4, {2, 3, 4, 5, 6, 7, 8}) == (5, 6, 7, 8)


def test_pair_takes_a_node_aligned_block() -> None:
    layout = NodeLayout(nodes_of(4))
    # rank 1 busy: blocks of 2 start at offsets 0 and 2; only (3, 4) is idle, not the straddling (2, 3)
    assert layout.place(2, {2, 3, 4}) == (3, 4)
    # a single rank goes where its pair-mate is busy, keeping an idle pair whole
    assert layout.place(1, {1, 3, 4}) == (1,)


def test_multi_node_task_takes_whole_nodes_then_the_best_fitting_rest() -> None:
    layout = NodeLayout(nodes_of(12))
    idle = {3, 4} | {5, 6, 7, 8} | {10, 11, 12}
    # 6 ranks: node 1 whole, then 2 from the node with the fewest idle that fit (node 0)
    assert layout.place(6, idle) == (3, 4, 5, 6, 7, 8)
    assert layout.place(10, idle) is None


def test_placement_with_uneven_nodes_and_arbitrary_rank_numbers() -> None:
    layout = NodeLayout({7: "b", 1: "a", 2: "a", 9: "b", 8: "b"})
    assert layout.nodes == [(1, 2), (7, 8, 9)]
    assert layout.place(2, {1, 2, 7, 8, 9}) == (1, 2)
    assert layout.place(3, {1, 2, 7, 8, 9}) == (7, 8, 9)


# --- sizes, order, release ------------------------------------------------------------------


def test_size_larger_than_the_job_is_an_error_naming_size_and_workers() -> None:
    gang = GangScheduler(nodes_of(6))
    with pytest.raises(ValueError, match=r"task size 7 .* 6 worker ranks"):
        gang.submit("big", 7)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="positive"):
            gang.submit("bad", bad)
    gang.submit("a", 6)
    with pytest.raises(ValueError, match="already"):
        gang.submit("a", 1)


def test_priority_order_then_submission_order() -> None:
    gang = GangScheduler(nodes_of(1))
    gang.submit("low", 1, priority=0)
    gang.submit("high", 1, priority=5)
    gang.submit("low2", 1, priority=0)
    assert gang.queued == ["high", "low", "low2"]
    assert [p.key for p in gang.schedule(0.0)] == ["high"]


def test_group_ranks_are_released_together_and_reused_by_the_waiting_task() -> None:
    gang = GangScheduler(nodes_of(4), lookahead=1)  # plain EASY: the quad does not go first
    gang.submit("pair", 2)
    gang.submit("pair2", 2)
    gang.submit("quad", 4)
    started = gang.schedule(0.0)
    assert {p.key: p.ranks for p in started} == {"pair": (1, 2), "pair2": (3, 4)}
    assert gang.idle == frozenset()
    assert gang.release("pair", 1.0) == (1, 2)
    assert gang.idle == {1, 2}
    assert gang.schedule(1.0) == []  # quad waits for the other pair, not for half a group
    gang.release("pair2", 2.0)
    assert gang.schedule(2.0) == [Placement("quad", (1, 2, 3, 4))]
    with pytest.raises(KeyError, match="pair"):
        gang.release("pair", 3.0)


# --- reservation and backfill (8 workers, 2 nodes of 4) -------------------------------------


def blocked_head() -> GangScheduler:
    """Six 1-rank tasks run (ending at 2, 3, 4, 5, 6, 7), a 4-rank head waits: 2 ranks idle."""
    gang = GangScheduler(nodes_of(8))
    for i, end in enumerate([2.0, 3.0, 4.0, 5.0, 6.0, 7.0]):
        gang.submit(f"run{i}", 1, estimate=end)
    assert len(gang.schedule(0.0)) == 6
    gang.submit("head", 4)
    assert gang.schedule(0.0) == []
    return gang


def test_head_that_does_not_fit_gets_the_one_reservation() -> None:
    gang = blocked_head()
    # 2 idle + the tasks ending at 2 and 3 = 4 ranks at t=3; none spare
    res = gang.reservation
    assert (res.key, res.size, res.shadow, res.extra) == ("head", 4, 3.0, 0)


def test_backfill_that_would_delay_the_head_is_refused() -> None:
    gang = blocked_head()
    gang.submit("long", 1, estimate=3.5)  # would end at 3.5 > 3.0 and no rank is spare at 3.0
    assert gang.schedule(0.0) == []
    assert gang.queued == ["head", "long"]
    assert len(gang.idle) == 2


def test_backfill_that_ends_before_the_shadow_time_is_taken() -> None:
    gang = blocked_head()
    gang.submit("long", 1, estimate=3.5)
    gang.submit("short", 2, estimate=3.0)  # passes the refused "long": ends exactly at the shadow
    started = gang.schedule(0.0)
    assert [p.key for p in started] == ["short"]
    assert gang.reservation.shadow == 3.0


def test_backfill_on_ranks_spare_at_the_shadow_time_is_taken_until_they_run_out() -> None:
    gang = GangScheduler(nodes_of(8))
    gang.submit("a", 3, estimate=10.0)
    gang.submit("b", 3, estimate=20.0)
    assert len(gang.schedule(0.0)) == 2
    gang.submit("head", 4)  # 2 idle; at t=10 "a" frees 3: 5 idle, 1 spare after the head
    gang.submit("x", 1, estimate=50.0)
    gang.submit("y", 1, estimate=50.0)
    assert [p.key for p in gang.schedule(0.0)] == ["x"]  # "y" would take the head's last rank
    assert (gang.reservation.shadow, gang.reservation.extra) == (10.0, 1)
    gang.release("a", 10.0)
    assert [p.key for p in gang.schedule(10.0)] == ["head"]
    assert gang.queued == ["y"]


def test_without_backfill_nothing_passes_a_blocked_head() -> None:
    gang = GangScheduler(nodes_of(8), backfill=False)
    for i in range(6):
        gang.submit(f"run{i}", 1)
    gang.schedule(0.0)
    gang.submit("head", 4)
    gang.submit("small", 1, estimate=0.001)
    assert gang.schedule(0.0) == []


def test_a_task_past_its_estimate_is_expected_to_run_its_estimate_again() -> None:
    gang = GangScheduler(nodes_of(2))
    gang.submit("a", 1, estimate=1.0)
    gang.schedule(0.0)
    gang.submit("head", 2)
    gang.schedule(5.0)
    assert gang.reservation.shadow == 6.0


def test_spare_ranks_count_only_tasks_that_end_by_the_shadow_time_on_their_cautious_estimate() -> None:
    estimate = RunTimeEstimate(alpha=0.5)
    estimate.record(3, 2.0)
    estimate.record(3, 4.0)  # size 3: mean 3, standard deviation 1, cautious 4
    gang = GangScheduler(nodes_of(8), estimate=estimate)
    gang.submit("a", 3)
    gang.submit("b", 3, estimate=20.0)
    gang.schedule(0.0)
    gang.submit("head", 4)
    gang.submit("x", 1, estimate=50.0)
    assert gang.schedule(0.0) == []  # "a" is expected at 3 but may take 4: no rank is surely spare
    assert (gang.reservation.shadow, gang.reservation.extra) == (3.0, 0)
    gang.submit("y", 1)  # size 1 unseen: mean 3 would end by the shadow, the cautious 4 would not
    assert gang.schedule(0.0) == []


def test_run_time_estimate_is_a_moving_mean_per_size() -> None:
    estimate = RunTimeEstimate(alpha=0.5, initial=7.0)
    assert estimate(4) == 7.0
    estimate.record(1, 2.0)
    estimate.record(1, 4.0)
    assert estimate(1) == 3.0  # 2 + 0.5 * (4 - 2)
    assert estimate.cautious(1) == 4.0  # variance 0.5 * (0 + 2 * 1) = 1
    assert estimate(2) == 3.0  # unseen size: the mean over all sizes
    estimate.record(2, 10.0)
    assert estimate(2) == 10.0
    assert estimate(1) == 3.0


def test_release_records_run_time_for_later_estimates() -> None:
    gang = GangScheduler(nodes_of(2), estimate=RunTimeEstimate(alpha=1.0))
    gang.submit("a", 1)
    gang.schedule(0.0)
    gang.release("a", 4.0)
    gang.submit("b", 1)
    gang.schedule(4.0)
    gang.submit("head", 2)
    gang.schedule(4.0)
    assert gang.reservation.shadow == 8.0


# --- early reservation for wide tasks (8 workers, 2 nodes of 4) -----------------------------


def small_ahead_of_wide(**options: float) -> GangScheduler:
    """Six 1-rank tasks run (ending at 2, 3, 4, 5, 6, 7); "small" (1 rank, 10 s), then "wide" (4)."""
    gang = GangScheduler(nodes_of(8), **options)
    for i, end in enumerate([2.0, 3.0, 4.0, 5.0, 6.0, 7.0]):
        gang.submit(f"run{i}", 1, estimate=end)
    assert len(gang.schedule(0.0)) == 6
    gang.submit("small", 1, estimate=10.0)
    gang.submit("wide", 4)
    return gang


def test_plain_easy_starts_the_small_head_and_the_wide_task_waits_longer() -> None:
    gang = small_ahead_of_wide(lookahead=1)
    assert [p.key for p in gang.schedule(0.0)] == ["small"]
    assert (gang.reservation.key, gang.reservation.shadow) == ("wide", 4.0)  # 1 idle + ends at 2, 3, 4


def test_ranks_drain_for_a_wide_task_before_it_is_first_in_line() -> None:
    gang = small_ahead_of_wide()
    # "wide" holds the reservation: 2 idle + ends at 2 and 3; "small" (10 s) would delay it
    assert gang.schedule(0.0) == []
    assert (gang.reservation.key, gang.reservation.shadow, gang.reservation.extra) == ("wide", 3.0, 0)
    assert gang.queued == ["small", "wide"]
    gang.release("run0", 2.0)
    assert gang.schedule(2.0) == []  # 3 idle, held; "small" has waited 2 s of its patience 3.5
    gang.release("run1", 3.0)
    assert gang.schedule(3.0) == [Placement("wide", (1, 2, 7, 8))]  # at 3.0, not 4.0 as with plain EASY
    assert gang.reservation.key == "small"  # passed once: not due yet, but no wider task is queued


def test_a_head_waiting_its_patience_takes_the_reservation_back() -> None:
    gang = small_ahead_of_wide(patience=0.1)  # 0.1 x its 10 s estimate: due after 1 s first in line
    assert gang.schedule(0.0) == []
    assert gang.schedule(0.5) == []
    assert [p.key for p in gang.schedule(1.0)] == ["small"]  # no release needed, only the clock
    assert (gang.reservation.key, gang.reservation.shadow) == ("wide", 4.0)


def test_a_head_passed_by_as_many_wider_tasks_as_allowed_takes_the_reservation_back() -> None:
    gang = small_ahead_of_wide(passes=1)
    gang.submit("wide2", 4)
    gang.schedule(0.0)
    gang.release("run0", 2.0)
    gang.release("run1", 3.0)
    assert [p.key for p in gang.schedule(3.0)] == ["wide"]  # "small" passed once: due now
    assert gang.reservation.key == "small"
    gang.release("run2", 4.0)
    assert [p.key for p in gang.schedule(4.0)] == ["small"]  # not "wide2", the widest in line


def test_a_wider_task_of_lower_priority_does_not_take_the_head_reservation() -> None:
    gang = GangScheduler(nodes_of(8))
    for i in range(8):
        gang.submit(f"run{i}", 1, estimate=float(i + 1))
    gang.schedule(0.0)
    gang.submit("urgent", 1, priority=1, estimate=10.0)
    gang.submit("wide", 4)
    gang.release("run0", 1.0)
    assert [p.key for p in gang.schedule(1.0)] == ["urgent"]


def test_early_reservation_options_are_checked() -> None:
    for bad in ({"lookahead": 0}, {"patience": -1.0}, {"passes": -1}):
        with pytest.raises(ValueError, match="lookahead"):
            GangScheduler(nodes_of(2), **bad)


# --- properties over simulated runs ---------------------------------------------------------


@dataclass
class Run:
    """What a simulated run saw."""

    starts: dict[str, float] = field(default_factory=dict)
    ends: list[str] = field(default_factory=list)
    first_shadow: dict[str, float] = field(default_factory=dict)


def simulate(gang: GangScheduler, tasks: list[tuple[float, int, float]], *, exact: bool, lookahead: int = 8) -> Run:
    """Tasks ``(arrival, size, duration)``; checks the invariants at every step of the clock."""
    arrivals = sorted((a, i) for i, (a, _, _) in enumerate(tasks))
    ending: list[tuple[float, str]] = []
    run = Run()
    now = 0.0
    for _ in range(10 * len(tasks) + 10):
        if not arrivals and not ending and not gang.queued:
            return run
        now = min([t for t, _ in ending[:1]] + [a for a, _ in arrivals[:1]])
        while ending and ending[0][0] == now:
            key = heapq.heappop(ending)[1]
            assert len(gang.release(key, now)) == tasks[int(key)][1]
            run.ends.append(key)
        while arrivals and arrivals[0][0] == now:
            i = arrivals.pop(0)[1]
            gang.submit(str(i), tasks[i][1], estimate=tasks[i][2] if exact else None)
        busy_before = {r for ranks in gang.running.values() for r in ranks}
        for placement in gang.schedule(now):
            size, duration = tasks[int(placement.key)][1:]
            assert len(set(placement.ranks)) == size
            assert set(placement.ranks) <= set(gang.layout.ranks)
            assert not busy_before & set(placement.ranks), "a rank in two running tasks"
            busy_before |= set(placement.ranks)
            run.starts[placement.key] = now
            heapq.heappush(ending, (now + duration, placement.key))
        res = gang.reservation
        if gang.queued:
            head = gang.queued[0]
            assert res is not None and res.key in gang.queued[:lookahead], "a waiting task holds the reservation"
            assert tasks[int(res.key)][1] >= tasks[int(head)][1], "only a wider task takes it from the head"
            run.first_shadow.setdefault(res.key, res.shadow)
        assert gang.idle == set(gang.layout.ranks) - busy_before
    raise AssertionError("the simulated run did not finish")


job_shapes = st.tuples(st.integers(1, 16), st.integers(1, 4))  # workers, ranks per node


@st.composite
def workloads(draw: st.DrawFn) -> tuple[dict[int, int], list[tuple[float, int, float]]]:
    workers, per_node = draw(job_shapes)
    task = st.tuples(st.floats(0, 20, allow_nan=False), st.integers(1, workers), st.floats(0.01, 10))
    return nodes_of(workers, per_node), draw(st.lists(task, min_size=1, max_size=40))


@settings(deadline=None, max_examples=150)
@given(workloads(), st.booleans())
def test_every_task_starts_once_and_ends_once_and_no_rank_is_shared(work, exact: bool) -> None:
    nodes, tasks = work
    run = simulate(GangScheduler(nodes), tasks, exact=exact)
    assert sorted(run.starts) == sorted(str(i) for i in range(len(tasks)))
    assert sorted(run.ends) == sorted(run.starts)  # the budget exact: each once, none lost


@settings(deadline=None, max_examples=150)
@given(workloads())
def test_head_starts_by_its_first_shadow_time_when_estimates_are_exact(work) -> None:
    """Plain EASY: backfill never delays the reserved head: it starts no later than enough ranks free up."""
    nodes, tasks = work
    run = simulate(GangScheduler(nodes, lookahead=1), tasks, exact=True, lookahead=1)
    for key, shadow in run.first_shadow.items():
        assert run.starts[key] <= shadow


@settings(deadline=None, max_examples=150)
@given(workloads(), st.integers(1, 8), st.integers(0, 3), st.floats(0, 2))
def test_early_reservation_starts_every_task_whatever_the_options(
    work, lookahead: int, passes: int, patience: float
) -> None:
    """No starvation; the holder is always among the first ``lookahead`` and at least as wide as the head."""
    nodes, tasks = work
    gang = GangScheduler(nodes, lookahead=lookahead, passes=passes, patience=patience)
    run = simulate(gang, tasks, exact=False, lookahead=lookahead)
    assert sorted(run.starts) == sorted(str(i) for i in range(len(tasks)))
    assert sorted(run.ends) == sorted(run.starts)


@settings(deadline=None, max_examples=100)
@given(workloads())
def test_without_backfill_tasks_start_in_priority_order(work) -> None:
    nodes, tasks = work
    run = simulate(GangScheduler(nodes, backfill=False), tasks, exact=False)
    order = sorted(range(len(tasks)), key=lambda i: (tasks[i][0], i))  # arrival order, equal priority
    starts = [run.starts[str(i)] for i in order]
    assert starts == sorted(starts)


@settings(deadline=None, max_examples=300)
@given(job_shapes, st.data())
def test_placement_uses_idle_ranks_on_as_few_nodes_as_possible(shape, data) -> None:
    workers, per_node = shape
    layout = NodeLayout(nodes_of(workers, per_node))
    idle = data.draw(st.sets(st.sampled_from(layout.ranks)))
    size = data.draw(st.integers(1, workers))
    ranks = layout.place(size, idle)
    if len(idle) < size:
        assert ranks is None
        return
    assert len(ranks) == size and set(ranks) <= idle
    counts = sorted((len(idle.intersection(node)) for node in layout.nodes), reverse=True)
    fewest = next(m for m in range(1, len(counts) + 1) if sum(counts[:m]) >= size)
    assert sum(1 for node in layout.nodes if set(node) & set(ranks)) == fewest


# --- the incremental structures against brute force (issue 27: flat at 100,000 workers) -----


def _end(start: float, duration: float, now: float) -> float:
    """The reference: a task's end at ``now``, given its duration again from ``now`` once overrun."""
    end = start + duration
    return end if end > now else now + duration


def by_end(ends: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """Ranks per end, ends ascending (the order among tasks of one end does not matter)."""
    assert [e for e, _ in ends] == sorted(e for e, _ in ends)
    merged: list[tuple[float, int]] = []
    for end, size in ends:
        if merged and merged[-1][0] == end:
            merged[-1] = (end, merged[-1][1] + size)
        else:
            merged.append((end, size))
    return merged


@settings(deadline=None, max_examples=200)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.floats(0, 20), st.floats(0, 5), st.integers(1, 4), st.integers(0, 10**6)),
        max_size=60,
    )
)
def test_running_ends_read_in_order_as_a_sort_of_every_task_would(steps: list) -> None:
    """``_Ends`` (heaps kept as tasks start and end) gives the ends a sort of all running tasks
    gives, and the ranks ending by a time, after any starts, ends and clock moves (back too)."""
    ends, running, now = _Ends(), {}, 0.0
    for op, time, duration, size, pick in steps:
        if op == 0 or not running:
            key = len(running) + pick
            if key not in running:
                running[key] = (now, duration, size)
                ends.add(key, now, duration, size)
        elif op == 1:
            key = sorted(running)[pick % len(running)]
            del running[key]
            ends.discard(key)
        else:
            now = time  # forward or back
        expected = by_end(sorted((_end(s, d, now), z) for s, d, z in running.values()))
        assert by_end(list(ends.ascending(now))) == expected
        first = next(iter(ends.ascending(now)), None)  # a walk left early puts back what it read
        assert (first and first[0]) == (expected[0][0] if expected else None)
        total = sum(z for e, z in expected if e <= time)
        assert ends.size_ending_by(now, time) == total
        assert min(total, size) <= ends.size_ending_by(now, time, enough=size) <= total


def brute_reservation(gang: GangScheduler, key: str, size: int, now: float, *, capped: bool = True) -> Reservation:
    """The reservation as a sort of every running task computes it (the code before issue 27's
    pass), its spare ranks counted among the ranks idle now (the only ones a backfill can take;
    ``capped=False``: every rank spare at the shadow time, as before)."""
    running = list(gang._running.values())
    free, shadow = len(gang.idle), now
    for end, ranks in sorted((_end(r.start, r.estimate, now), r.size) for r in running):
        if free >= size:
            break
        free, shadow = free + ranks, end
    surely = len(gang.idle) + sum(r.size for r in running if _end(r.start, r.cautious, now) <= shadow)
    spare = max(0, surely - size)
    return Reservation(key, size, shadow, min(len(gang.idle), spare) if capped else spare)


@settings(deadline=None, max_examples=100)
@given(workloads(), st.booleans())
def test_reservation_is_the_one_a_sort_of_every_running_task_gives(work, exact: bool) -> None:
    nodes, tasks = work
    gang = GangScheduler(nodes)
    reserve = gang._reserve

    def checked(task, now: float) -> Reservation:  # compared where it is made: before the backfill
        made = reserve(task, now)
        assert made == brute_reservation(gang, task.key, task.size, now)
        return made

    gang._reserve = checked  # type: ignore[method-assign]
    simulate(gang, tasks, exact=exact)


def test_long_runs_on_a_wider_job_place_and_reserve_as_brute_force_does() -> None:
    """Thousands of starts and ends on 256 ranks (the indices compact their heaps on the way)."""
    rng = random.Random(27)
    layout = NodeLayout(nodes_of(256, 4))
    idle, busy = IdleRanks(layout, layout.ranks), []
    ends, running, now = _Ends(), {}, 0.0
    for step in range(4000):
        if rng.random() < 0.55 or not busy:
            size = rng.choice([1, 1, 2, 4, 6])
            expected = layout.place(size, set(idle.ranks))
            assert idle.place(size) == expected
            if expected is not None:
                idle.remove(expected)
                busy.append(expected)
                running[step] = (now, rng.lognormvariate(2.5, 0.5), size)  # long: ends pile up
                ends.add(step, *running[step])
        else:
            idle.add(busy.pop(rng.randrange(len(busy))))
            key = rng.choice(sorted(running))
            del running[key]
            ends.discard(key)
        now += rng.expovariate(50.0)
        if step % 50 == 0:
            expected_ends = sorted((_end(s, d, now), z) for s, d, z in running.values())
            assert by_end(list(ends.ascending(now))) == by_end(expected_ends)
            horizon = now + 10.0
            assert ends.size_ending_by(now, horizon) == sum(z for e, z in expected_ends if e <= horizon)
            enough = rng.randint(1, 8)
            counted = ends.size_ending_by(now, horizon, enough=enough)
            total = sum(z for e, z in expected_ends if e <= horizon)
            assert min(total, enough) <= counted <= total  # stops once it has enough


def brute_fill(gang: GangScheduler, holder_key: str, reservation: Reservation, now: float) -> list[Placement]:
    """The backfill reading every queued task, on a copy of ``gang`` (the code before issue 27's pass)."""
    gang = copy.deepcopy(gang)
    started, spare = [], reservation.extra
    for task in list(gang._queue):
        if task.key == holder_key or task.size > len(gang._idle):
            continue
        if now + gang._cautious(task) <= reservation.shadow:
            started.append(gang._start(task, now))
        elif task.size <= spare:
            spare -= task.size
            started.append(gang._start(task, now))
    return started


@settings(deadline=None, max_examples=100)
@given(workloads(), st.booleans())
def test_backfill_starts_what_reading_every_queued_task_starts(work, exact: bool) -> None:
    """The backfill's early stop and in-place read change no decision, nor does counting the
    spare ranks only among the ranks idle now."""
    nodes, tasks = work
    gang = GangScheduler(nodes)
    fill = gang._fill

    def checked(holder, reservation: Reservation, now: float) -> list[Placement]:
        uncapped = brute_reservation(gang, holder.key, holder.size, now, capped=False)
        assert uncapped.shadow == reservation.shadow
        expected = brute_fill(gang, holder.key, uncapped, now)
        made = fill(holder, reservation, now)
        assert made == expected
        return made

    gang._fill = checked  # type: ignore[method-assign]
    simulate(gang, tasks, exact=exact)
