"""The trial-scheduler kit over every built-in trial scheduler, in each of its modes: decisions
valid, state rebuilt by replaying reports, resume, determinism, direction, reports without a metric."""

from __future__ import annotations

from emews.core.space import Constant, Space
from emews.testing import SchedulerConformance
from emews.training.schedulers.asha import ASHA
from emews.training.schedulers.conformance import training_space
from emews.training.schedulers.hyperband import Hyperband
from emews.training.schedulers.median import MedianStopping
from emews.training.schedulers.pbt import PBT


class TestASHAStopping(SchedulerConformance):
    def make_scheduler(self) -> ASHA:
        return ASHA(max_t=9, grace_period=1, reduction_factor=3)


class TestASHAPromotion(SchedulerConformance):
    def make_scheduler(self) -> ASHA:
        return ASHA(max_t=9, grace_period=1, reduction_factor=3, variant="promotion")


class TestASHAPromotionWithResource(SchedulerConformance):
    """Each task trains to its ``epochs`` (1 at first), every rung ends it, a promotion raises it."""

    space = Space({**training_space().dimensions, "epochs": Constant(1)})

    def make_scheduler(self) -> ASHA:
        return ASHA(max_t=8, grace_period=1, reduction_factor=2, variant="promotion", resource="epochs")


class TestHyperband(SchedulerConformance):
    trials = 24

    def make_scheduler(self) -> Hyperband:
        return Hyperband(max_t=9, grace_period=1, reduction_factor=3)


class TestHyperbandPromotion(SchedulerConformance):
    trials = 24

    def make_scheduler(self) -> Hyperband:
        return Hyperband(max_t=9, grace_period=1, reduction_factor=3, variant="promotion")


class TestMedianStopping(SchedulerConformance):
    def make_scheduler(self) -> MedianStopping:
        return MedianStopping(grace_period=2, min_samples=3)


class TestPBT(SchedulerConformance):
    def make_scheduler(self) -> PBT:
        return PBT(perturbation_interval=3, quantile_fraction=0.25)


class TestPBTBottomHalf(SchedulerConformance):
    """Half the trials exploit at each check: trials that ended earlier than others were donors."""

    def make_scheduler(self) -> PBT:
        return PBT(perturbation_interval=2, quantile_fraction=0.5)


class TestPBTResampling(SchedulerConformance):
    """Half the explored values drawn anew, one parameter mutated, more trials than slots by far."""

    trials = 24
    workers = 4

    def make_scheduler(self) -> PBT:
        return PBT(perturbation_interval=3, quantile_fraction=0.5, resample_probability=0.5, mutations=["lr"])


def test_the_kit_sees_each_scheduler_decide() -> None:
    """The simulated runs are not idle: each mode stops, pauses, promotes or exploits some trials."""
    seen = {}
    for case in (TestASHAStopping, TestASHAPromotion, TestASHAPromotionWithResource, TestHyperband,
                 TestHyperbandPromotion, TestMedianStopping, TestPBT, TestPBTBottomHalf, TestPBTResampling):
        run = case().simulated()
        seen[case.__name__] = {c.answer.action.value for c in run.calls if c.method == "on_report"} \
            | {c.method for c in run.calls if c.method in ("promote", "release")}
    assert {"stop", "complete"} <= seen["TestASHAStopping"]
    assert {"pause", "promote", "release"} <= seen["TestASHAPromotion"]
    assert {"pause", "promote", "complete"} <= seen["TestASHAPromotionWithResource"]
    assert "stop" in seen["TestHyperband"] and {"pause", "promote"} <= seen["TestHyperbandPromotion"]
    assert "stop" in seen["TestMedianStopping"]
    assert "exploit" in seen["TestPBT"] and "exploit" in seen["TestPBTResampling"]
