"""Trial schedulers as plain objects: decisions checked against cases computed by hand."""

from __future__ import annotations


import pytest
from hypothesis import given, strategies as st

from emews.training.schedulers.asha import ASHA
from emews.training.schedulers.trial_scheduler import quantile
from emews.training.schedulers.hyperband import Hyperband
from emews.training.schedulers.median import MedianStopping
from emews.training.schedulers.pbt import PBT
from emews.core.space import Categorical, Float, Int, Space
from emews.training.messages import CONTINUE, Action
from emews.core.results import StoredReport


def bound(scheduler, space=None, direction="minimize", seed=0):
    return scheduler.bind(metric="loss", direction=direction, space=space, seed=seed)


def curve(rate: float, step: int) -> dict:
    return {"loss": rate + 1.0 / step}


def run_sequentially(scheduler, rates, epochs=9) -> list[int]:
    """Each trial trains to the end (or its stop) before the next starts; the last step of each."""
    last = []
    for trial, rate in enumerate(rates):
        for step in range(1, epochs + 1):
            if scheduler.on_report(trial, step, curve(rate, step), {"rate": rate}).stop:
                break
        last.append(step)
    return last


def test_quantile_is_linear_interpolation() -> None:
    assert quantile([], 0.5) is None
    assert quantile([3.0], 0.3) == 3.0
    assert quantile([1.5, 1.1], 1 / 3) == 1.1 + 0.4 / 3
    assert quantile([4.0, 1.0, 2.0, 3.0], 0.5) == 2.5


def test_asha_rungs() -> None:
    assert ASHA(max_t=9, grace_period=1, reduction_factor=3).rungs == [1, 3]
    assert ASHA(max_t=100, grace_period=2, reduction_factor=2).rungs == [2, 4, 8, 16, 32, 64]


def test_asha_stopping_hand_computed() -> None:
    """rungs 1 and 3 (max_t 9, rf 3); loss = rate + 1/step.
    rate .5: first everywhere, runs to 9.  rate .1: 1.1 <= cutoff(1.5) and .433 <= .833: 9.
    rate .9: 1.9 > q1/3([1.1, 1.5]) = 1.233: stops at 1.
    rate .3: 1.3 <= q1/3([1.1, 1.5, 1.9]) = 1.367; at 3, .633 > q1/3([.433, .833]) = .567: stops at 3.
    rate .05: 1.05 <= q1/3([1.1, 1.3, 1.5, 1.9]) = 1.3; .383 <= q1/3([.433, .633, .833]) = .567: 9."""
    asha = bound(ASHA(max_t=9, grace_period=1, reduction_factor=3))
    assert run_sequentially(asha, [0.5, 0.1, 0.9, 0.3, 0.05]) == [9, 9, 1, 3, 9]
    assert asha.recorded[1] == {0: 1.5, 1: 1.1, 2: 1.9, 3: 1.3, 4: 1.05}
    assert set(asha.recorded[3]) == {0, 1, 3, 4}


def test_asha_maximize_mirrors_minimize() -> None:
    asha = bound(ASHA(max_t=9), direction="maximize")
    last = []
    for trial, rate in enumerate([0.5, 0.1, 0.9, 0.3, 0.05]):
        for step in range(1, 10):
            if asha.on_report(trial, step, {"loss": -(rate + 1 / step)}, {}).stop:
                break
        last.append(step)
    assert last == [9, 9, 1, 3, 9]


def test_asha_promotion_hand_computed() -> None:
    """Promotion rule at rung 1 (rf 2): continue only when among the best n // 2 of the n recorded.
    t0 1.5: n=1, top-0 -> pause.  t1 1.1: n=2, top-1 [t1] -> continue.  t2 1.9: n=3, top-1 [t1] -> pause.
    t3 1.05: n=4, top-2 [t3, t1] -> continue.  t4 1.2: n=5, top-2 [t3, t1] -> pause.
    t5 1.3: n=6, top-3 [t3, t1, t4] -> pause, and paused t4 is now promotable."""
    asha = bound(ASHA(max_t=4, grace_period=1, reduction_factor=2, variant="promotion"))
    actions = [asha.on_report(t, 1, {"loss": loss}, {}).action
               for t, loss in enumerate([1.5, 1.1, 1.9, 1.05, 1.2, 1.3])]
    P, C = Action.PAUSE, Action.CONTINUE
    assert actions == [P, C, P, C, P, P]
    assert asha.paused == {0: 1, 2: 1, 4: 1, 5: 1}
    assert asha.promotable() == [4]
    asha.promote(4)
    for t, loss in enumerate([1.6, 1.7, 1.8, 2.0, 2.1, 2.2, 2.3], start=6):  # n=13: top-6 reaches t6 (1.6)
        asha.on_report(t, 1, {"loss": loss}, {})
    # top-6 of 13 is t3 t1 t4 t5 t0 t6: paused t0, t5 and t6 (paused when it came, n=7) qualify, t2 not
    assert asha.promotable() == [0, 5, 6]


def test_asha_promotion_with_resource_pauses_at_every_rung_and_promotes_to_the_next() -> None:
    """With ``resource`` a trial in the top is promotable at once (its task ends at each rung), a
    promotion gives the next rung's steps (max_t after the last rung), highest rung first; the
    least promising waiting trial is on the lowest rung with the worst loss there."""
    asha = bound(ASHA(max_t=8, grace_period=1, reduction_factor=2, variant="promotion", resource="epochs"))
    assert asha.on_report(0, 1, {"loss": 1.5}, {}).action is Action.PAUSE
    assert asha.promotable() == []
    assert asha.on_report(1, 1, {"loss": 1.1}, {}).action is Action.PAUSE   # top-1 of 2, yet its task ends
    assert asha.promotable() == [1] and asha.promote(1) == 2
    asha.on_report(1, 2, {"loss": 0.6}, {})
    asha.on_report(2, 1, {"loss": 1.9}, {})
    assert asha.least_promising([0, 1, 2]) == 2 and asha.least_promising([0, 1]) == 0
    asha.on_report(3, 1, {"loss": 1.3}, {})
    assert asha.promotable() == [3] and asha.promote(3) == 2
    asha.on_report(3, 2, {"loss": 0.8}, {})
    assert asha.promotable() == [1] and asha.promote(1) == 4
    asha.on_report(1, 4, {"loss": 0.35}, {})
    asha.on_report(4, 1, {"loss": 1.05}, {})
    assert asha.promote(4) == 2
    asha.on_report(4, 2, {"loss": 0.55}, {})
    assert asha.promote(4) == 4
    asha.on_report(4, 4, {"loss": 0.3}, {})
    assert asha.promotable() == [4] and asha.promote(4) == 8
    assert asha.on_report(4, 8, {"loss": 0.175}, {}).action is Action.COMPLETE
    assert asha.paused == {0: 1, 2: 1, 3: 2, 1: 4} and asha.promotable() == []


def test_asha_rebuilt_with_its_promotions_has_the_same_waiting_trials() -> None:
    live = bound(ASHA(max_t=8, grace_period=1, reduction_factor=2, variant="promotion", resource="epochs"))
    stored, promoted = [], []
    for trial, step, loss, promote in [(0, 1, 1.5, False), (1, 1, 1.1, True), (1, 2, 0.6, False),
                                       (2, 1, 1.9, False), (3, 1, 1.3, True), (3, 2, 0.8, False)]:
        live.on_report(trial, step, {"loss": loss}, {})
        stored.append(StoredReport(len(stored), trial, step, {"loss": loss}, 0.0))
        if promote:
            promoted.append((trial, live.paused[trial]))
            live.promote(trial)
    rebuilt = bound(ASHA(max_t=8, grace_period=1, reduction_factor=2, variant="promotion", resource="epochs"))
    rebuilt.rebuild(stored, {}, promoted)
    assert rebuilt.paused == live.paused == {0: 1, 1: 2, 2: 1, 3: 2}
    assert rebuilt.promotable() == live.promotable() == [1]


def test_median_stopping_hand_computed() -> None:
    """At step 2 trial 3 (best 2.0) meets the other trials' means up to step 2: 1.5, 2.5, 3.5 ->
    median 2.5: continues. Trial 4 (best 3.0 > 2.5... and t3's mean 2.25 joins: median of
    1.5, 2.5, 3.5, 2.25 is 2.375): stops."""
    median = bound(MedianStopping(grace_period=2, min_samples=3))
    for trial, (a, b) in enumerate([(2.0, 1.0), (3.0, 2.0), (4.0, 3.0)]):
        median.on_report(trial, 1, {"loss": a}, {})
        median.on_report(trial, 2, {"loss": b}, {})
    assert median.on_report(3, 1, {"loss": 2.5}, {}).action is Action.CONTINUE  # grace period
    assert median.on_report(3, 2, {"loss": 2.0}, {}).action is Action.CONTINUE
    assert median.on_report(4, 2, {"loss": 3.0}, {}).action is Action.STOP


def test_median_needs_min_samples() -> None:
    median = bound(MedianStopping(grace_period=1, min_samples=3))
    median.on_report(0, 1, {"loss": 1.0}, {})
    median.on_report(1, 1, {"loss": 1.0}, {})
    assert not median.on_report(2, 1, {"loss": 9.0}, {}).stop  # two others only


@pytest.mark.parametrize("grace_period", [0, -1])
def test_median_refuses_a_grace_period_below_one(grace_period: int) -> None:
    """``grace_period: -1`` passed ``emews check`` (ASHA and Hyperband refuse it): a step below 1 is
    no step a trial reports at."""
    with pytest.raises(ValueError, match="grace_period: must be at least 1"):
        MedianStopping(grace_period=grace_period)


def test_hyperband_deals_trials_to_brackets_with_growing_grace() -> None:
    hb = bound(Hyperband(max_t=9, grace_period=1, reduction_factor=3))
    assert [b.rungs for b in hb.brackets] == [[1, 3], [3], []]
    for trial in range(6):
        hb.on_report(trial, 1, {"loss": 1.0}, {})
    assert hb.bracket_of == {0: 0, 1: 1, 2: 2, 3: 0, 4: 1, 5: 2}
    assert all(b.metric == "loss" and b.mode == "min" for b in hb.brackets)


def test_pbt_bottom_quantile_exploits_a_top_trial() -> None:
    space = Space({"lr": Float(1e-4, 1e-1, log=True), "units": Int(8, 64), "act": Categorical(("relu", "tanh"))})
    pbt = bound(PBT(perturbation_interval=2, quantile_fraction=0.25, resample_probability=0.0), space, seed=3)
    params = {t: {"lr": 0.01 * (t + 1), "units": 36, "act": "relu"} for t in range(4)}  # inside: no move is clipped
    for t in range(4):  # losses 0, 1, 2, 3 at step 1: nobody is due yet
        assert not pbt.on_report(t, 1, {"loss": float(t)}, params[t]).stop
    assert not pbt.on_report(0, 2, {"loss": 0.0}, params[0]).stop          # the best trial continues
    decision = pbt.on_report(3, 2, {"loss": 3.0}, params[3])               # the worst exploits the best
    assert decision.action is Action.EXPLOIT and decision.clone_from == 0
    assert space.contains(decision.params)
    for name in ("lr", "units"):  # each moved one perturb_step in unit scale from the donor's value
        moved = abs(space[name].to_unit(decision.params[name]) - space[name].to_unit(params[0][name]))
        assert abs(moved - 0.2) < 0.05, (name, moved)
    assert pbt.params[3] == decision.params
    assert pbt.latest[3] == (2, 3.0)   # the donor's step, its own loss until it reports again (as Ray Tune)


def test_asha_completes_trials_that_reach_max_t_and_stops_the_others_early() -> None:
    """The hand case above: rates .5 .1 .05 reach max_t 9 (complete), .9 and .3 are stopped early."""
    asha = bound(ASHA(max_t=9, grace_period=1, reduction_factor=3))
    last = {}
    for trial, rate in enumerate([0.5, 0.1, 0.9, 0.3, 0.05]):
        for step in range(1, 10):
            decision = asha.on_report(trial, step, curve(rate, step), {"rate": rate})
            if decision.stop:
                last[trial] = (step, decision.action)
                break
    assert last == {0: (9, Action.COMPLETE), 1: (9, Action.COMPLETE), 2: (1, Action.STOP), 3: (3, Action.STOP),
                    4: (9, Action.COMPLETE)}


def test_pbt_never_clones_a_trial_at_a_step_far_from_the_recipients() -> None:
    """More trials than workers: trials 0-3 trained to step 12 and ended; trial 4, new, is the
    worst at its step 3, but no trial is within one interval (3) of it: it continues (before, it
    cloned a finished trial's step-12 checkpoint and trained zero more steps). Trial 5, at step 3
    too and better, is its peer: trial 4 then clones it."""
    space = Space({"rate": Float(0.0, 1.0)})
    pbt = bound(PBT(perturbation_interval=3, quantile_fraction=0.25, resample_probability=0.0), space, seed=1)
    for trial in range(4):
        for step in range(1, 13):
            pbt.on_report(trial, step, curve(trial / 10, step), {"rate": trial / 10})
        pbt.ended(trial)
    assert pbt.on_report(4, 3, curve(0.9, 3), {"rate": 0.9}) == CONTINUE
    assert pbt.on_report(5, 3, curve(0.2, 3), {"rate": 0.2}) == CONTINUE
    decision = pbt.on_report(4, 6, curve(0.9, 6), {"rate": 0.9})
    assert decision.action is Action.EXPLOIT and decision.clone_from == 5


def test_pbt_never_clones_a_trial_that_ended() -> None:
    """Four trials at step 3; the best (0) ended there (its final checkpoint). The worst (3) is due
    and clones the best trial still running (1), never trial 0. (Trials 2, 1, 0 report in that
    order, each at the top of the peers so far: none of them exploits.)"""
    space = Space({"rate": Float(0.0, 1.0)})
    pbt = bound(PBT(perturbation_interval=3, quantile_fraction=0.5, resample_probability=0.0), space, seed=1)
    for trial in (2, 1, 0):
        assert pbt.on_report(trial, 3, curve(trial / 10, 3), {"rate": trial / 10}) == CONTINUE
    pbt.ended(0)
    decision = pbt.on_report(3, 3, curve(0.9, 3), {"rate": 0.9})
    assert decision.action is Action.EXPLOIT and decision.clone_from == 1


@pytest.mark.parametrize(("peers", "fraction", "size"), [
    (1, 0.25, 0), (2, 0.25, 1), (3, 0.25, 1), (4, 0.25, 1), (5, 0.25, 2), (8, 0.25, 2), (9, 0.25, 3),
    (2, 0.5, 1), (3, 0.5, 1), (4, 0.5, 2), (5, 0.5, 2), (3, 0.1, 1), (10, 0.1, 1)])
def test_pbt_quantile_size_is_ray_tunes(peers: int, fraction: float, size: int) -> None:
    """ceil(peers * fraction), at most half the peers (Ray Tune's ``PopulationBasedTraining._quantiles``):
    three peers at 0.25 make one top and one bottom trial."""
    assert PBT(quantile_fraction=fraction).quantile_size(peers) == size


def pbt_of_three(seed: int = 3) -> PBT:
    """Interval 2, the bottom quarter, no resampling: three trials report step 1 (losses 1.0, 0.5,
    0.8), nobody is due yet."""
    pbt = bound(PBT(perturbation_interval=2, quantile_fraction=0.25, resample_probability=0.0),
                Space({"rate": Float(0.0, 1.0)}), seed=seed)
    for trial, loss in enumerate((1.0, 0.5, 0.8)):
        assert pbt.on_report(trial, 1, {"loss": loss}, {"rate": trial / 4}) == CONTINUE
    return pbt


def test_pbt_exploits_one_bottom_trial_of_three_peers_per_round() -> None:
    """Three peers, quantile 0.25: one bottom trial. At step 2 trial 0 is the worst (3.0) and clones
    trial 1 (the best); trials 1 (2.0) and 2 (2.5) then report their step 2. Trial 0 keeps its own
    loss until it reports again (as Ray Tune), so it stays the bottom trial and 1 and 2 go on.
    Before, trial 0 took trial 1's step-1 loss (0.5) and ranked first: trial 1 became the bottom and
    cloned trial 0 (whose weights were trial 1's own older ones), then trial 2 cloned one of them:
    all three exploited at step 2 from trial 1's step-1 checkpoint (the reviewer's run at step 9)."""
    pbt = pbt_of_three()
    decision = pbt.on_report(0, 2, {"loss": 3.0}, {"rate": 0.0})
    assert decision.action is Action.EXPLOIT and decision.clone_from == 1
    later = [pbt.on_report(1, 2, {"loss": 2.0}, {"rate": 0.25}), pbt.on_report(2, 2, {"loss": 2.5}, {"rate": 0.5})]
    assert [(d.action, d.clone_from) for d in later] == [(Action.CONTINUE, None)] * 2
    assert pbt.latest[0] == (1, 3.0)


def test_pbt_never_clones_a_trial_that_has_not_reported_since_its_own_clone() -> None:
    """Two peers, quantile 0.5. Trial 0 (5.0) clones trial 1 (1.0) at step 2; trial 1 then reports a
    worse loss (9.0) than trial 0's last one: trial 1 is the bottom, but the top, trial 0, has no
    checkpoint of its own since its clone (its newest durable one is trial 1's): trial 1 goes on.
    Before, trial 1 cloned trial 0, i.e. rolled back to its own step-1 checkpoint."""
    pbt = bound(PBT(perturbation_interval=2, quantile_fraction=0.5, resample_probability=0.0),
                Space({"rate": Float(0.0, 1.0)}), seed=1)
    pbt.on_report(0, 1, {"loss": 5.0}, {"rate": 0.9})
    pbt.on_report(1, 1, {"loss": 1.0}, {"rate": 0.1})
    decision = pbt.on_report(0, 2, {"loss": 5.0}, {"rate": 0.9})
    assert decision.action is Action.EXPLOIT and decision.clone_from == 1
    assert pbt.on_report(1, 2, {"loss": 9.0}, {"rate": 0.1}) == CONTINUE
    assert pbt.on_report(0, 2, {"loss": 1.2}, decision.params) == CONTINUE   # trained from the clone
    again = pbt.on_report(1, 4, {"loss": 9.0}, {"rate": 0.1})   # now trial 0 is a donor with its own weights
    assert again.action is Action.EXPLOIT and again.clone_from == 0


def test_pbt_a_dropped_exploit_leaves_the_state_a_rebuild_has() -> None:
    """The runtime drops an exploit it cannot make (the donor has no durable checkpoint of its own
    yet, or the budget or the walltime overrules it) and tells the scheduler: the trial goes on as
    it was, with the state a rebuild from the stored reports (no lineage row for it) has, and the
    same answers afterwards. Before, the live scheduler kept the explored parameters and the donor's
    step for a trial that never changed."""
    space = Space({"rate": Float(0.0, 1.0)})
    reports = [StoredReport(0, 0, 1, {"loss": 1.0}, 0.0), StoredReport(1, 1, 1, {"loss": 0.5}, 0.0),
               StoredReport(2, 2, 1, {"loss": 0.8}, 0.0), StoredReport(3, 0, 2, {"loss": 3.0}, 0.0)]
    params = {t: {"rate": t / 4} for t in range(3)}
    live = bound(PBT(perturbation_interval=2, resample_probability=0.0), space, seed=3)
    decisions = [live.on_report(r.trial, r.step, r.metrics, params[r.trial]) for r in reports]
    assert decisions[-1].action is Action.EXPLOIT
    live.exploit_dropped(0)
    rebuilt = bound(PBT(perturbation_interval=2, resample_probability=0.0), space, seed=3)
    rebuilt.rebuild(reports, params, exploits={})
    assert vars(live) == vars(rebuilt)
    assert live.params[0] == params[0] and live.latest[0] == (2, 3.0) and live.last_perturbed[0] == 2
    for trial, step, loss in ((1, 2, 2.0), (2, 2, 0.4), (0, 3, 3.5), (0, 4, 3.4)):
        assert live.on_report(trial, step, {"loss": loss}, params[trial]) == \
            rebuilt.on_report(trial, step, {"loss": loss}, params[trial])


@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0, 10)), min_size=1, max_size=60))
def test_rebuilding_from_reports_gives_the_same_state(reports) -> None:
    """Replaying stored reports (emews resume), with the exploits the run made, rebuilds rung tables,
    brackets and populations."""
    steps: dict[int, int] = {}
    stored = []
    for seq, (trial, loss) in enumerate(reports):
        steps[trial] = steps.get(trial, 0) + 1
        stored.append(StoredReport(seq, trial, steps[trial], {"loss": loss}, 0.0))
    space = Space({"rate": Float(0.0, 1.0)})
    params = {t: {"rate": t / 10} for t in range(6)}
    for make in (lambda: ASHA(max_t=9), lambda: Hyperband(max_t=9), lambda: MedianStopping(),
                 lambda: PBT(perturbation_interval=2)):
        live, rebuilt = bound(make(), space, seed=7), bound(make(), space, seed=7)
        live_decisions = [live.on_report(r.trial, r.step, r.metrics, params[r.trial]) for r in stored]
        exploits = {r.seq: d for r, d in zip(stored, live_decisions) if d.action is Action.EXPLOIT}
        rebuilt.rebuild(stored, params, exploits=exploits)
        state = {k: v for k, v in vars(live).items() if k not in ("rng", "brackets")}
        assert state == {k: v for k, v in vars(rebuilt).items() if k not in ("rng", "brackets")}
        if isinstance(live, Hyperband):
            assert [vars(b) for b in live.brackets] == [vars(b) for b in rebuilt.brackets]
        nxt = StoredReport(len(stored), 0, 99, {"loss": 1.0}, 0.0)
        assert live.on_report(0, 99, nxt.metrics, params[0]) == rebuilt.on_report(0, 99, nxt.metrics, params[0])
        assert len(live_decisions) == len(stored)
