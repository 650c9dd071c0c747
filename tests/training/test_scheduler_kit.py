"""The trial-scheduler kit catches broken schedulers: each breach below is named by the check that
owns it, and ``check_scheduler`` lists them all (the built-ins pass: test_scheduler_conformance)."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from emews.core.results import StoredReport
from emews.testing import ConformanceError, check_scheduler
from emews.training.messages import CONTINUE, Action, Decision
from emews.training.schedulers import TrialScheduler
from emews.training.schedulers import conformance as kit
from emews.training.schedulers.asha import ASHA
from emews.training.schedulers.pbt import PBT

STOP = Decision(Action.STOP)


def promotion() -> ASHA:
    return ASHA(max_t=9, grace_period=1, reduction_factor=3, variant="promotion")


class ForgetsItPromoted(ASHA):
    """Promotes a trial but keeps it waiting."""

    def promote(self, trial: int) -> int | None:
        return None


class HidesWaiting(ASHA):
    """Pauses trials but says none waits."""

    def waiting(self) -> list[int]:
        return []


class PromotesStrangers(ASHA):
    """Names a trial that never paused as promotable."""

    def promotable(self) -> list[int]:
        return [*super().promotable(), 999]


class PicksOutsider(ASHA):
    """Names a trial it was not given as the least promising."""

    def least_promising(self, trials: Any) -> int:
        return -1


class ExploitsOutside(PBT):
    """Exploits with a learning rate the space does not hold."""

    def explore(self, params: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
        return {**params, "lr": 10.0}


class ClonesItself(PBT):
    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        decision = super().on_report(trial, step, metrics, params)
        return Decision(Action.EXPLOIT, decision.params, trial) if decision.action is Action.EXPLOIT else decision


class ClonesFreshClones(PBT):
    """Clones the trial that exploited last before it reported again: that trial has no checkpoint
    of its own since its clone (its newest durable one is its donor's, or the exploiting trial's)."""

    fresh: int | None = None

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        if trial == self.fresh:
            self.fresh = None
        decision = super().on_report(trial, step, metrics, params)
        if decision.action is Action.EXPLOIT:
            if self.fresh is not None:
                decision = Decision(Action.EXPLOIT, decision.params, self.fresh)
            self.fresh = trial
        return decision


class Raises(TrialScheduler):
    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        if step == 3:
            raise KeyError("epochs")
        return CONTINUE


class ReturnsText(TrialScheduler):
    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
        return "continue"


class Unseeded(TrialScheduler):
    """Stops trials at random with the global generator."""

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        return STOP if random.random() < 0.2 else CONTINUE


class IgnoresMode(TrialScheduler):
    """Stops a trial whose metric is above 2, whichever way is better."""

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        value = metrics.get(self.metric or kit.METRIC)
        return STOP if isinstance(value, float) and value > 2.0 else CONTINUE


class StopsWithoutMetric(TrialScheduler):
    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        return STOP if self.loss(metrics) is None else CONTINUE


class CountsEndings(TrialScheduler):
    """Stops every trial once three trials ended, but forgets endings when rebuilt (it counts them
    in ``on_report`` from a flag, so a replay never sees them)."""

    def __init__(self) -> None:
        super().__init__()
        self.endings = 0

    def ended(self, trial: int) -> None:
        self.endings += 1

    def rebuild(self, reports: Any, params: Any, promoted: Any = (), ended: Any = (), exploits: Any = None) -> None:
        for report in reports:
            self.replay(report, params.get(report.trial, {}), None)

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        return STOP if self.endings >= 3 else CONTINUE


class ForgetsRungsOnReplay(ASHA):
    """Rebuilds nothing: a resumed run starts with empty rungs."""

    def replay(self, report: StoredReport, params: Mapping[str, Any], exploit: Decision | None) -> None:
        pass


class DrawsExploitsAgain(PBT):
    """Replays by deciding again: trials that ended later are donors in the replay."""

    def replay(self, report: StoredReport, params: Mapping[str, Any], exploit: Decision | None) -> None:
        self.on_report(report.trial, report.step, report.metrics, params)


def first(problems: list[str]) -> str:
    assert problems, "the kit found nothing wrong"
    return problems[0]


def promoting(cls: type[ASHA]) -> Callable[[], ASHA]:
    return lambda: cls(max_t=9, grace_period=1, reduction_factor=3, variant="promotion")


@pytest.mark.parametrize("make, says", [
    (promoting(ForgetsItPromoted), "was promoted but waiting() still lists it"),
    (promoting(HidesWaiting), "but waiting() does not list it"),
    (promoting(PromotesStrangers), "promotable() names trial 999, which does not wait"),
    (promoting(PicksOutsider), "gave -1, not one of them"),
    (ExploitsOutside, "exploit with parameters outside the space: lr"),
    (ClonesItself, "not another trial that reported"),
    (lambda: ClonesFreshClones(perturbation_interval=2, quantile_fraction=0.5),
     "which has not reported since its own exploit"),
    (Raises, "the scheduler raised KeyError: 'epochs' (after on_report)"),
    (ReturnsText, "on_report returned 'continue', not a Decision"),
])
def test_promotion_breaches_and_invalid_decisions_are_caught(make: Callable[[], TrialScheduler], says: str) -> None:
    assert says in first(kit.valid_problems(kit.simulate(make)))


def test_a_run_that_never_ends_is_caught() -> None:
    """Every paused trial is always promotable again: the run would go on for ever."""

    class Forever(ASHA):
        def promotable(self) -> list[int]:
            return list(self.paused)

        def promote(self, trial: int) -> int | None:
            return None  # keeps it paused: it pauses again at once

        def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
            self.paused[trial] = 1
            return Decision(Action.PAUSE)

        def waiting(self) -> list[int]:
            return [] if not self.paused else list(self.paused)

    problems = kit.valid_problems(kit.simulate(Forever, trials=3, steps=4))
    assert any("did not end" in p for p in problems) or any("still lists it" in p for p in problems)


def test_nondeterminism_is_caught() -> None:
    assert "same seed" in first(kit.same_calls_problems(kit.simulate(Unseeded).calls, kit.simulate(Unseeded).calls, "same seed"))


def test_a_scheduler_blind_to_the_direction_is_caught() -> None:
    problems = kit.same_calls_problems(kit.mirrored(kit.simulate(IgnoresMode)), kit.simulate(IgnoresMode, direction="maximize").calls,
                                   "maximize, metric negated")
    assert "maximize, metric negated: call" in first(problems)


def test_stopping_on_a_report_without_metric_is_caught() -> None:
    problems = kit.missing_metric_problems(StopsWithoutMetric)
    assert len(problems) == 6 and "a report of {} got" in problems[0] and "not continue" in problems[0]


def test_state_lost_in_a_rebuild_is_caught() -> None:
    run = kit.simulate(promotion)
    assert kit.valid_problems(run) == [] and kit.rebuild_problems(run, promotion) == []
    assert "waiting() is [], the live run's [" in first(kit.rebuild_problems(run, lambda: ForgetsRungsOnReplay(
        max_t=9, grace_period=1, reduction_factor=3, variant="promotion")))


def test_a_resume_that_answers_otherwise_is_caught() -> None:
    run = kit.simulate(CountsEndings)
    assert kit.valid_problems(run) == [] and kit.rebuild_problems(run, CountsEndings) == []
    assert "answered Decision(action=<Action.CONTINUE" in first(kit.resume_problems(run, CountsEndings))


def test_exploits_drawn_again_on_replay_are_caught() -> None:
    """PBT's replay applies the recorded exploits; drawing them again (with trials that ended later
    among the donors) rebuilds another population (8 slots: many trials end while others train)."""
    def make() -> PBT:
        return DrawsExploitsAgain(perturbation_interval=3, quantile_fraction=0.5)

    run = kit.simulate(make, workers=8)
    assert kit.valid_problems(run) == []
    assert kit.resume_problems(run, make)


def test_check_scheduler_lists_every_failure_by_check() -> None:
    with pytest.raises(ConformanceError) as caught:
        check_scheduler(StopsWithoutMetric)
    assert "[no metric]" in str(caught.value)
    with pytest.raises(ConformanceError) as caught:
        check_scheduler(Unseeded)
    assert "[determinism]" in str(caught.value)
    assert check_scheduler(promotion).calls


def test_the_default_space_has_every_searched_type() -> None:
    kinds = {dim.kind for dim in kit.training_space().dimensions.values()}
    assert kinds == {"float", "int", "categorical", "ordered"}


def test_the_docs_example_passes_the_kit(tmp_path, monkeypatch) -> None:
    """docs/training.md's ``Threshold`` (written as its block says) passes, and it stops some trials."""
    import re
    import sys

    from testutil import REPO

    text = (REPO / "docs" / "training.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "class Threshold" in b]
    (tmp_path / "my_rules.py").write_text(block)
    monkeypatch.syspath_prepend(str(tmp_path))
    from my_rules import Threshold  # type: ignore[import-not-found]

    run = check_scheduler(lambda: Threshold(limit=1.5))
    assert any(c.answer.stop for c in run.calls if c.method == "on_report")
    sys.modules.pop("my_rules", None)
