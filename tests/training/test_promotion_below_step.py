"""ASHA's promotion variant with an objective that reports every second step: a trial pauses at rung 1
by its report of step 2, and its promotion is stored with that step. ``emews resume`` must take the
promotion back in (before: the rebuild compared the step with the rung, 2 with 1, kept the promoted
trial waiting and promoted it again, or, once others outranked it, held it until the end)."""

from __future__ import annotations

from pathlib import Path

from emews.core.results import Outcome, Status, Task
from emews.runtime.trial_reports import TrialService
from emews.store.results_store import ResultsStore
from emews.training.messages import Report
from emews.training.schedulers.asha import ASHA

def asha() -> ASHA:
    return ASHA(max_t=9, grace_period=1, reduction_factor=3, variant="promotion").bind(  # type: ignore[return-value]
        metric="loss", direction="minimize")


def test_a_rebuilt_asha_takes_in_a_promotion_stored_with_the_step_the_trial_paused_at(tmp_path: Path) -> None:
    """The trial service with a real store: t0 is promoted from rung 1 (its report of step 2), then two
    better trials reach rung 1. The rebuilt scheduler has the live one's waiting trials: t0 runs on,
    not held again (before: held, and no longer promotable)."""
    rates = [0.5, 0.9, 0.1, 0.95, 0.96, 0.97, 0.05, 0.06]
    tasks = {t: Task(t, {"rate": r}, t, 0.0) for t, r in enumerate(rates)}
    with ResultsStore(tmp_path / "results.db") as store:
        live = TrialService(store, asha(), metric="loss")

        def report(t: int) -> str:
            loss = tasks[t].params["rate"] + 0.5
            action = live.handle(Report(t, 0, 2, {"loss": loss}, 0.0), tasks[t]).decision.action.value  # type: ignore[union-attr]
            if action == "pause":
                live.intercept(tasks[t], Outcome(t, Status.OK, loss, {"loss": loss}))
            return action

        assert [report(t) for t in range(6)] == ["pause", "pause", "continue", "pause", "pause", "pause"]
        assert live.promotable() == [0]
        live.promote(tasks[0])
        assert store.promotions() == [(0, 2)]
        assert [report(t) for t in (6, 7)] == ["continue", "continue"]   # t0 is no longer among the best
        rebuilt = TrialService(store, asha(), metric="loss")
        rebuilt.rebuild()
        assert rebuilt.scheduler.waiting() == live.scheduler.waiting() == [1, 3, 4, 5]  # type: ignore[union-attr]
        assert rebuilt.resumed_wait(tasks[0]) is None  # it runs again, from its checkpoint
