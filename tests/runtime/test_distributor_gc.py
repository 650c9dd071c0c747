"""The distributor's garbage-collector policy at width (``emews/runtime/distributor_gc.py``).

    python -m pytest -q tests/runtime/test_distributor_gc.py
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from emews.runtime.distributor_gc import WideCollector


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_below_the_width_nothing_changes() -> None:
    callbacks = list(gc.callbacks)
    collector = WideCollector(999, width=1000)
    gc.collect()
    assert not collector.engaged and gc.get_freeze_count() == 0 and gc.callbacks == callbacks
    collector.close()


def test_at_width_a_full_collection_freezes_and_close_hands_everything_back() -> None:
    callbacks = list(gc.callbacks)
    collector = WideCollector(1000, width=1000)
    assert collector.engaged
    kept = [Cycle() for _ in range(100)]
    gc.collect()
    assert collector.freezes == 1 and gc.get_freeze_count() >= 100
    collector.close()
    assert gc.get_freeze_count() == 0 and not collector.engaged and gc.callbacks == callbacks
    del kept


def test_young_cycles_are_still_collected_and_frozen_ones_after_close() -> None:
    collector = WideCollector(5000, width=1000)
    old = Cycle()
    gc.collect()  # a full collection: ``old`` frozen
    del old
    young = Cycle()
    del young
    assert gc.collect(1) >= 1  # the young cycle, by a collection of the younger generations
    assert gc.collect(1) == 0 and gc.collect() == 0  # the frozen one is out of reach...
    collector.close()
    assert gc.collect() >= 1  # ...until the run ends


def test_two_runs_at_once_hand_back_at_the_last_close() -> None:
    first, second = WideCollector(2000, width=1000), WideCollector(2000, width=1000)
    assert first.engaged and second.engaged
    gc.collect()
    first.close()
    assert gc.get_freeze_count() > 0
    second.close()
    assert gc.get_freeze_count() == 0


def test_an_application_that_froze_objects_itself_is_left_alone() -> None:
    """Its frozen objects stay frozen (``gc.get_objects`` does not list the permanent generation;
    the count of frozen objects is no check: one frozen object freed by another thread lowers it)."""
    kept = Cycle()
    gc.freeze()
    callbacks = list(gc.callbacks)
    collector = WideCollector(100_000, width=1000)
    assert not collector.engaged and gc.callbacks == callbacks
    gc.collect()
    collector.close()
    assert collector.freezes == collector.full == 0
    assert gc.get_freeze_count() > 0 and not any(o is kept for o in gc.get_objects())


def test_one_full_collection_in_a_while_is_let_through() -> None:
    """So that a long run does not keep every cycle that died in the old generation: once
    ``FULL_EVERY`` seconds have passed, a full collection walks everything frozen so far."""
    from emews.runtime import distributor_gc

    now = [0.0]
    collector = WideCollector(5000, width=1000, clock=lambda: now[0])
    old = Cycle()
    gc.collect()  # frozen
    del old
    assert gc.collect() == 0 and collector.full == 0
    now[0] = distributor_gc.FULL_EVERY
    assert gc.collect() >= 1  # let through: the frozen cycle is found
    assert collector.full == 1 and gc.get_freeze_count() == 0
    gc.collect()  # and the next one freezes again
    assert gc.get_freeze_count() > 0 and collector.full == 1
    collector.close()
