"""The full course of an experiment's trial scheduler, as its record names it, for the readers of
its store (``emews results``, ``status``, ``report``): an ASHA of before f3134cc (2026-11-26)
answered ``stop`` to a trial that reached ``max_t``, which trained its full course: ``completed``,
not ``stopped early`` (:attr:`emews.store.Store.full_course`)."""

from __future__ import annotations

from pathlib import Path

from emews.config.experiment import read_workflow
from emews.core.errors import ConfigError
from emews.training.schedulers import TrialScheduler
from emews.training.schedulers.asha import ASHA
from emews.training.schedulers.hyperband import Hyperband

#: the trial schedulers, by their workflow names, that answered ``stop`` at ``max_t`` before f3134cc:
#: emews' own ASHA and Hyperband (its brackets are ASHAs); made from their recorded options alone
#: (no plug-in lookup, no pydantic: ``emews status`` is polled)
ANSWERED_STOP_AT_MAX_T: dict[str, type[TrialScheduler]] = {"asha": ASHA, "hyperband": Hyperband}


def recorded_full_course(exp_dir: Path) -> int | None:
    """The :attr:`~emews.training.schedulers.TrialScheduler.full_course` of the trial scheduler
    ``EXP/workflow.yaml`` records (under ``trial_scheduler:``, or ``scheduler:`` before the rename),
    when it is one of :data:`ANSWERED_STOP_AT_MAX_T`; ``None`` otherwise, or when its recorded
    options do not make one (the readers then read the stored answers as they are)."""
    try:
        workflow = read_workflow(exp_dir)
    except ConfigError:
        return None
    section = workflow.get("trial_scheduler", workflow.get("scheduler"))
    if not isinstance(section, dict):
        return None
    cls, options = ANSWERED_STOP_AT_MAX_T.get(str(section.get("name"))), section.get("options") or {}
    if cls is None or not isinstance(options, dict):
        return None
    try:
        return cls(**options).full_course
    except (TypeError, ValueError):  # an option this version does not take, or refuses (OptionError)
        return None
