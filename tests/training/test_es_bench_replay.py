"""``bench/early_stopping.py``'s replays of Optuna's pruner: one trial at a time, and several at once
through the event simulation the emews rows use (``replay_sha_parallel``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emews.core.imports import import_user_module

pytest.importorskip("optuna")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "early_stopping.py"
STEPS = 9


class SyntheticCurves:
    """The replay's curve interface: ``pool`` and ``at(trial, step) -> (loss, seconds)``. Trial
    ``i``'s loss falls from a start that alternates good and bad towards a floor, so a pruner has
    something to stop; each step takes 1 s, trial 1's a little less (it reports before trial 0)."""

    def __init__(self, count: int) -> None:
        self.pool = [{"i": i} for i in range(count)]

    def at(self, trial: int, step: int) -> tuple[float, float]:
        start = 1.0 + (trial % 3) + 0.1 * trial
        return start / step + 0.01 * trial, 0.9 if trial == 1 else 1.0


@pytest.fixture(scope="module")
def bench() -> Any:
    return import_user_module(str(BENCH), what="benchmark")


def _pruner() -> Any:
    import optuna

    return optuna.pruners.SuccessiveHalvingPruner()


def test_one_worker_replays_what_the_serial_study_does(bench: Any) -> None:
    curves = SyntheticCurves(30)
    serial = bench.replay_optuna(curves, 10 * STEPS, STEPS, _pruner(), "serial")
    parallel = bench.replay_sha_parallel(curves, 10 * STEPS, STEPS, 1, "parallel")
    assert parallel["lengths"] == serial["lengths"]
    assert parallel["arrivals"] == serial["arrivals"]
    assert any(length < STEPS for length in serial["lengths"])  # the pruner stopped some


def test_two_workers_judge_a_trial_only_against_rungs_recorded_before_it(bench: Any) -> None:
    """Optuna's ``min_resource="auto"`` is known once a trial completes, and a trial records its
    rungs only from then on. Serially trial 0 completes unrecorded, trial 1 records its rungs and
    trial 2 (worse) is stopped at the first; with two workers trials 0 and 1 both run before
    anything completes, so trial 2 finds no rung recorded and trains to the end."""
    curves = SyntheticCurves(30)
    serial = bench.replay_optuna(curves, 10 * STEPS, STEPS, _pruner(), "serial2")
    parallel = bench.replay_sha_parallel(curves, 10 * STEPS, STEPS, 2, "parallel2")
    assert serial["lengths"][:3] == [STEPS, STEPS, 1]
    assert parallel["lengths"][:3] == [STEPS, STEPS, STEPS]
    assert parallel["order"][:2] == [1, 0]  # trial 1's steps are shorter: it ends first
    assert 1 in parallel["lengths"]  # later trials are stopped at the first rung


def test_the_table_s_ratio_and_its_paired_bootstrap(bench: Any) -> None:
    """A row at half the reference's shares on every problem-seed is 0.5x in every resample (paired);
    a row equal to the reference is 1x; never (inf) counts as the largest share, and a resample
    where both medians are never is 1x."""
    reference = [0.2, 0.4, 0.6, 0.8, 1.0]
    assert bench.paired_bootstrap([s / 2 for s in reference], reference) == (0.5, 0.5, 0.5, 1.0)
    assert bench.paired_bootstrap(reference, reference) == (1.0, 1.0, 1.0, 0.0)
    never = [0.2, 0.4, 0.6, float("inf"), float("inf")]
    ratio, low, high, at_most = bench.paired_bootstrap([0.1, 0.9, 0.3, 0.5, 0.2], never)
    assert ratio == 0.3 / 0.6 and low <= ratio <= high and 0.0 < at_most < 1.0
    assert bench.paired_bootstrap([float("inf")] * 3, [float("inf")] * 3) == (1.0, 1.0, 1.0, 0.0)
