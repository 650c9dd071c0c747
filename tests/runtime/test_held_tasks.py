"""HeldTasks: the ids each worker holds, in order, an int for one task and a deque for more."""

from __future__ import annotations

import random
from collections import deque

from emews.runtime.held_tasks import HeldTasks


def test_one_task_is_held_as_its_id_and_more_in_order() -> None:
    held = HeldTasks()
    held.add(3, [10])
    assert held.of(3) == [10] and held._ids[3] == 10  # no deque for a worker holding one task
    held.add(3, [11, 12])
    assert held.of(3) == [10, 11, 12] and isinstance(held._ids[3], deque)
    held.forget(3, [10])  # ended: the first
    held.forget(3, [12])  # given back: the last
    assert held.of(3) == [11]
    held.forget(3, [11])
    assert held.of(3) == [] and 3 not in held._ids and len(held) == 0


def test_a_worker_holding_none_has_no_entry_and_unknown_ids_are_passed_over() -> None:
    held = HeldTasks()
    held.add(1, [])
    assert len(held) == 0 and held.pop(1) == []
    held.forget(1, [5])  # holds nothing: nothing happens
    held.add(1, [5])
    held.forget(1, [6, 7])
    assert held.of(1) == [5]
    held.add(2, [8, 9])
    assert sorted(held) == [1, 2]
    assert held.pop(2) == [8, 9] and held.pop(1) == [5] and len(held) == 0


class _Reference:
    """What SlotDispatch kept before: a deque per worker, created empty."""

    def __init__(self) -> None:
        self.ids: dict[int, deque[int]] = {}

    def add(self, rank: int, task_ids: list[int]) -> None:
        self.ids.setdefault(rank, deque()).extend(task_ids)

    def forget(self, rank: int, task_ids: list[int]) -> None:
        holding = self.ids.get(rank)
        if holding is None:
            return
        for task_id in task_ids:
            if holding and holding[0] == task_id:
                holding.popleft()
            elif task_id in holding:
                holding.remove(task_id)

    def pop(self, rank: int) -> list[int]:
        return list(self.ids.pop(rank, ()))


def test_random_steps_hold_what_a_deque_per_worker_holds() -> None:
    rng = random.Random(7)
    held, reference = HeldTasks(), _Reference()
    next_id = 0
    for _ in range(20_000):
        rank = rng.randrange(8)
        step = rng.random()
        if step < 0.4:
            count = rng.choice([1, 1, 1, 2, 5])
            ids = list(range(next_id, next_id + count))
            next_id += count
            held.add(rank, ids)
            reference.add(rank, ids)
        elif step < 0.8:  # ended: the first ones (sometimes one it does not hold)
            now = reference.ids.get(rank) or deque([-1])
            ids = list(now)[: rng.choice([1, 1, 2])] + ([next_id + 99] if rng.random() < 0.05 else [])
            held.forget(rank, ids)
            reference.forget(rank, ids)
        elif step < 0.95:  # given back: some of the last ones
            now = list(reference.ids.get(rank) or [])
            ids = now[rng.randrange(len(now) + 1):]
            held.forget(rank, ids)
            reference.forget(rank, ids)
        else:
            assert held.pop(rank) == reference.pop(rank)
        for r in range(8):
            assert held.of(r) == list(reference.ids.get(r, ()))
            assert held.count(r) == len(reference.ids.get(r, ()))
        assert all(isinstance(v, int) or len(v) > 0 for v in held._ids.values())


def test_a_slot_dispatch_of_busy_workers_holds_one_int_per_worker_and_nothing_per_idle_one() -> None:
    from test_prefetch import outcome, task

    from emews.runtime.slots import SlotDispatch

    dispatch = SlotDispatch(list(range(1, 1001)), prefetch=1, ready_within=60.0)
    for rank in range(1, 1001):
        dispatch.ready(rank)
    assert dispatch._unready == {} and len(dispatch._holding) == 0
    queue = deque(task(i) for i in range(1000))
    dispatch.place(queue, start=True)
    assert len(dispatch._holding) == 1000
    assert all(isinstance(ids, int) for ids in dispatch._holding._ids.values())
    rank = next(iter(dispatch._holding))
    dispatch.ended(rank, [outcome(dispatch._holding.of(rank)[0], 50.0)])
    assert rank not in dispatch._holding and len(dispatch._holding) == 999
