"""ASHA's default stopping rule (``rule: rank``) on hand-made report sequences.

The rule: a trial arriving at a rung goes on if it ranks among the best ``ceil(n / reduction_factor)``
of the ``n`` trials recorded there, itself counted; the first trial at a rung (alone there) is
checked again at each of its reports until its next rung. Ray Tune's rule (``rule: quantile``, the default before) compared a trial once, on
arrival, with the 1/rf quantile of the trials recorded *earlier*: a trial alone at a rung passed it
for good, and so did a trial between the two best of three. Each case below decides differently
under the old rule.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from emews.training.messages import Action
from emews.training.schedulers.asha import ASHA
from emews.training.schedulers.hyperband import Hyperband

C, S = Action.CONTINUE, Action.STOP


def bound(scheduler):
    return scheduler.bind(metric="loss", direction="minimize")


def actions(scheduler, reports) -> list[Action]:
    """The action answered to each ``(trial, step, loss)`` report, in order."""
    return [scheduler.on_report(trial, step, {"loss": loss}, {}).action for trial, step, loss in reports]


def test_a_trial_at_chance_level_that_passed_the_first_rung_alone_stops_once_a_better_trial_reached_it() -> None:
    """Two workers: trial 0 (loss 2.30, chance level on 10 classes, for ever) reaches rung 1 first and
    alone, so it goes on; trial 1 reaches rung 1 better; trial 0's next report is a stop (the old
    rule let it train all 9 steps)."""
    asha = bound(ASHA(max_t=9, grace_period=1, reduction_factor=3))
    reports = [(0, 1, 2.30), (1, 1, 1.50), (0, 2, 2.30), (1, 2, 1.00), (1, 3, 0.70)]
    assert actions(asha, reports) == [C, C, S, C, C]
    assert asha.recorded == {1: {0: 2.30, 1: 1.50}, 3: {1: 0.70}}

    old = bound(ASHA(max_t=9, grace_period=1, reduction_factor=3, rule="quantile"))
    chance = [(0, step, 2.30) for step in range(2, 10)]
    assert set(actions(old, reports[:2] + chance)) == {C, Action.COMPLETE}  # Ray's rule: all 9 steps


def test_a_trial_is_judged_at_the_highest_rung_it_reached_and_again_at_each_report_in_order() -> None:
    """rf 3, rungs 1 and 3. Trial 0 passes rungs 1 and 3 alone; trials 3 and 4 are worse at rung 1
    (best 1 of 2, of 3); with 4 and 5 trials there the best 2 go on (1, 2), judged once. At rung 3
    trial 1 is best of 2, trial 2 second of 3 (stops); trial 0, alone at rung 3 when it passed and
    now behind trial 1, stops at its step-4 report, before rung 9."""
    asha = bound(ASHA(max_t=27, grace_period=1, reduction_factor=3))
    reports = [
        (0, 1, 2.0),
        (0, 2, 1.5),
        (0, 3, 0.9),
        (3, 1, 2.2),
        (4, 1, 2.3),
        (1, 1, 1.7),
        (2, 1, 1.75),
        (1, 2, 1.2),
        (2, 2, 1.25),
        (1, 3, 0.5),
        (2, 3, 0.6),
        (0, 4, 0.85),
        (1, 4, 0.45),
    ]
    assert actions(asha, reports) == [C, C, C, S, S, C, C, C, C, C, S, S, C]
    assert asha.recorded[3] == {0: 0.9, 1: 0.5, 2: 0.6}

    old = bound(ASHA(max_t=27, grace_period=1, reduction_factor=3, rule="quantile"))
    assert actions(old, reports) == [C, C, C, S, S, C, C, C, C, C, C, C, C]  # trials 0 and 2 went on


def test_the_trial_counts_itself_a_trial_between_the_two_best_of_three_stops() -> None:
    """One worker: 1.5 and 1.1 at rung 1, then 1.2: second of 3, outside the best ceil(3/3) = 1. Ray's
    rule compares it with the 1/3 quantile of the two earlier (1.233) and lets it go on."""
    reports = [(0, 1, 1.5), (1, 1, 1.1), (2, 1, 1.2)]
    assert actions(bound(ASHA(max_t=9)), reports) == [C, C, S]
    assert actions(bound(ASHA(max_t=9, rule="quantile")), reports) == [C, C, C]


def test_the_share_that_goes_on_grows_with_the_rung_best_ceil_n_over_rf() -> None:
    """Six trials at rung 1 in order of arrival: with rf 3 the best 1 of 1-3, 2 of 4-6 go on, so the
    2nd and 3rd stop and the 4th goes on. Trial 0, alone there when it passed, is third of 6 at its
    step 2 and stops; trial 4, judged on arrival with others, is not judged again."""
    asha = bound(ASHA(max_t=9, grace_period=1, reduction_factor=3))
    reports = [(0, 1, 1.0), (1, 1, 2.0), (2, 1, 3.0), (3, 1, 0.5), (4, 1, 1.5), (5, 1, 0.9)]
    assert actions(asha, reports) == [C, S, S, C, S, C]
    assert actions(asha, [(0, 2, 0.8)]) == [S]  # trials 3 and 5 are better at rung 1 now
    assert actions(asha, [(3, 2, 0.4), (5, 2, 0.7)]) == [C, C]


@given(
    st.lists(st.tuples(st.integers(0, 5), st.floats(0, 10)), min_size=1, max_size=60),
    st.sampled_from(["ranked", "improving"]),
)
def test_the_best_trial_of_its_rung_is_never_stopped_and_no_trial_waits(reports, free_pass) -> None:
    """Any order of reports: every answer is continue, stop or complete (nothing pauses), and a
    trial whose loss at its highest rung is the best recorded there goes on (with ``free_pass:
    improving``, unless it passed that rung alone and its loss is now worse than there)."""
    asha = bound(ASHA(max_t=9, grace_period=1, reduction_factor=3, free_pass=free_pass))
    steps: dict[int, int] = {}
    for trial, loss in reports:
        steps[trial] = steps.get(trial, 0) + 1
        action = asha.on_report(trial, steps[trial], {"loss": loss}, {}).action
        assert action in (C, S, Action.COMPLETE)
        rung = asha.recorded[max(m for m in asha.rungs if m <= steps[trial])] if steps[trial] < 9 else None
        if rung is not None and rung[trial] == min(rung.values()):
            rose = free_pass == "improving" and trial == next(iter(rung)) and loss > rung[trial]
            assert action is (S if rose else C)


def test_an_improving_free_pass_ends_when_the_loss_rises_above_the_rung_s() -> None:
    """Boosting that overfits: trial 0 passes rung 1 alone (0.30) and improves (0.25); a loss back
    at 0.30 goes on (ties go on), one above it (0.31) stops it under ``free_pass: improving``, while
    ``ranked`` (nobody there outranks it) lets it train on. A trial judged on arrival with peers is
    not judged again, however its loss moves, and the pass holder is still ranked at each report."""
    improving = bound(ASHA(max_t=27, free_pass="improving"))
    assert actions(improving, [(0, 1, 0.30), (0, 2, 0.25), (0, 2, 0.30), (0, 2, 0.31)]) == [C, C, C, S]
    ranked = bound(ASHA(max_t=27, free_pass="ranked"))
    assert actions(ranked, [(0, 1, 0.30), (0, 2, 0.31)]) == [C, C]

    asha = bound(ASHA(max_t=27, free_pass="improving"))
    reports = [(0, 1, 0.30), (1, 1, 0.10), (1, 2, 0.90), (0, 2, 0.28)]
    assert actions(asha, reports) == [C, C, C, S]  # trial 1 goes on; trial 0 is outranked


def test_hyperband_brackets_take_the_rule() -> None:
    assert {b.rule for b in Hyperband(max_t=9).brackets} == {"rank"}
    assert {b.rule for b in Hyperband(max_t=9, rule="quantile").brackets} == {"quantile"}
    assert {b.free_pass for b in Hyperband(max_t=9, free_pass="improving").brackets} == {"improving"}


def test_an_unknown_rule_is_one_clear_error() -> None:
    import pytest

    with pytest.raises(ValueError, match="rule: must be rank or quantile, got 'median'"):
        ASHA(rule="median")  # type: ignore[arg-type]


def test_an_unknown_free_pass_is_one_clear_error() -> None:
    import pytest

    with pytest.raises(ValueError, match="free_pass: must be ranked or improving, got 'forever'"):
        ASHA(free_pass="forever")  # type: ignore[arg-type]
