"""Population-based training (Jaderberg et al., 2017): exploit and explore at fixed intervals.

Every ``perturbation_interval`` steps of a trial, its *peers* (the trials whose latest report is
within one interval of its step, itself included) are ranked by their latest loss. A trial in the
bottom ``quantile_fraction`` of its peers (rounded up, at most half of them, as Ray Tune's PBT:
one of three peers at 0.25) *exploits*: it clones the newest durable checkpoint of a trial drawn
from the top ``quantile_fraction`` that has not ended, and *explores* that trial's parameters:
each mutable parameter is resampled with ``resample_probability``, else moved by
``perturb_step`` of its range up or down (in the space's unit scale, so a log range moves in
log scale, an ordered choice to a neighbour). The optimizer rank records the lineage; the
trial goes on with the new parameters from the clone's step (its ``ctx.restore()`` returns
the cloned checkpoint).

A trial that exploited keeps its own last loss in the ranking until it reports again (as Ray
Tune), so it stays the bottom one and the next trial to report is not pushed below it by a copy
of the donor's loss; and until it reports again it is never a donor: it has no checkpoint of its
own since the clone (its newest restorable one is its donor's, possibly the exploiting trial's
own). The optimizer rank clones the donor's own newest durable checkpoint that the donor trained
past (one of an earlier report than its latest, which may be its last); where the donor has
none it drops the exploit and says so (:meth:`exploit_dropped`): the trial goes on as it was.

Only peers are compared and cloned, so with more trials than workers a new trial is never ranked
against (nor clones) trials that trained far longer, and a trial whose task ended is never a
donor: no clone lands on a finished trial's final checkpoint with nothing left to train.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from emews.core.errors import OptionError
from emews.core.results import StoredReport
from emews.training.messages import CONTINUE, Action, Decision
from emews.training.schedulers.trial_scheduler import Mode, TrialScheduler


class PBT(TrialScheduler):
    """Population-based training.

    Options (workflow ``trial_scheduler.options``):

    perturbation_interval  steps between a trial's exploit checks (4)
    quantile_fraction      the share of its peers that makes the top and the bottom, in (0, 0.5] (0.25)
    resample_probability   the chance that an explored parameter is drawn anew rather than moved (0.25)
    perturb_step           how far a parameter moves, as a fraction of its range in unit scale (0.2)
    mutations              the parameters explored (default: every parameter the space searches)
    metric                 the reported metric that ranks trials (default: the objective's metric)
    mode                   min | max (default: the objective's direction)

    Its draws come from the workflow's seed and the number of reports seen, so that a rebuilt
    PBT (``emews resume``) draws what the uninterrupted run would have drawn.
    """

    exploits = True

    def __init__(
        self,
        perturbation_interval: int = 4,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturb_step: float = 0.2,
        mutations: list[str] | None = None,
        metric: str | None = None,
        mode: Mode | None = None,
    ) -> None:
        super().__init__(metric, mode)
        if perturbation_interval < 1:
            raise OptionError("perturbation_interval", f"must be at least 1, got {perturbation_interval}")
        if not 0 < quantile_fraction <= 0.5:
            raise OptionError("quantile_fraction", f"must be in (0, 0.5], got {quantile_fraction}")
        if not 0 <= resample_probability <= 1:
            raise OptionError("resample_probability", f"must be in [0, 1], got {resample_probability}")
        self.interval = perturbation_interval
        self.fraction = quantile_fraction
        self.resample_probability = resample_probability
        self.perturb_step = perturb_step
        self.mutations = mutations
        self.reports = 0  # reports seen (each draw's seed)
        self.latest: dict[int, tuple[int, float]] = {}  # trial -> (step, loss) of its last report
        self.last_perturbed: dict[int, int] = {}  # trial -> step of its last exploit check
        self.params: dict[int, dict[str, Any]] = {}  # trial -> the parameters it runs with
        self.done: set[int] = set()  # trials whose task ended (never donors)
        self.cloned: set[int] = set()  # trials that exploited and have not reported since (never donors)
        # the last exploit's trial and its state before it (what :meth:`exploit_dropped` restores)
        self._before: tuple[int, dict[str, Any], tuple[int, float], int] | None = None

    def bind(self, **kwargs: Any) -> PBT:
        super().bind(**kwargs)
        if self.space is not None and self.mutations:
            unknown = sorted(set(self.mutations) - set(self.space.free))
            if unknown:
                raise OptionError(
                    "mutations",
                    f"name parameters the space does not search: {', '.join(unknown)}",
                    ", ".join(self.space.free) or "none",
                )
        return self

    def on_report(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> Decision:
        if not self._take(trial, step, metrics, params):
            return CONTINUE
        peers = [t for t, (at, _) in self.latest.items() if abs(at - step) <= self.interval]
        ranked = sorted(peers, key=lambda t: (self.latest[t][1], t))  # best first
        count = self.quantile_size(len(ranked))
        if count == 0 or trial not in ranked[-count:]:
            return CONTINUE
        donors = [t for t in ranked[:count] if t not in self.done and t not in self.cloned]
        if not donors:
            return CONTINUE
        rng = random.Random(f"pbt:{self.seed}:{self.reports}")
        donor = rng.choice(donors)
        return self._exploit(trial, donor, self.explore(self.params[donor], rng))

    def _take(self, trial: int, step: int, metrics: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
        """Note a report; whether ``trial`` is due for an exploit check now."""
        self.reports += 1
        self._before = None
        self.cloned.discard(trial)  # it trained from its clone: what it writes now is its own
        loss = self.loss(metrics)
        self.params.setdefault(trial, dict(params))
        if loss is None:
            return False
        self.latest[trial] = (step, loss)
        if step - self.last_perturbed.get(trial, 0) < self.interval:
            return False
        self.last_perturbed[trial] = step
        return True

    def _exploit(self, trial: int, donor: int, explored: dict[str, Any]) -> Decision:
        """``trial`` goes on from ``donor``'s step with ``explored`` parameters; until it reports again
        it is ranked with its own last loss (as Ray Tune) and is no donor."""
        self._before = (trial, self.params[trial], self.latest[trial], self.last_perturbed[trial])
        self.params[trial] = explored
        donor_step = self.latest[donor][0]
        self.latest[trial] = (donor_step, self.latest[trial][1])
        self.last_perturbed[trial] = donor_step
        self.cloned.add(trial)
        return Decision(Action.EXPLOIT, params=explored, clone_from=donor)

    def exploit_dropped(self, trial: int) -> None:
        """The exploit just answered to ``trial`` was not made: it goes on as it was, with the state a
        rebuild (which replays no exploit for that report) has."""
        if self._before is None or self._before[0] != trial:
            return
        _, self.params[trial], self.latest[trial], self.last_perturbed[trial] = self._before
        self.cloned.discard(trial)
        self._before = None

    def replay(self, report: StoredReport, params: Mapping[str, Any], exploit: Decision | None) -> None:
        """Rebuilding: the report as the run took it, and the exploit it answered with as it was made
        (the donors and draws of that moment are not drawn again: trials that ended later were donors then)."""
        due = self._take(report.trial, report.step, report.metrics, params)
        if due and exploit is not None and exploit.clone_from in self.latest and exploit.params is not None:
            self._exploit(report.trial, exploit.clone_from, dict(exploit.params))

    def quantile_size(self, peers: int) -> int:
        """How many of ``peers`` trials make the top (and the bottom) quantile."""
        return min(math.ceil(peers * self.fraction), peers // 2)

    def ended(self, trial: int) -> None:
        self.done.add(trial)

    def explore(self, params: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
        """A copy of ``params`` with each mutable parameter resampled or moved one step (draws from ``rng``)."""
        new = dict(params)
        if self.space is None:
            return new
        names = self.mutations or list(self.space.free)
        for name in names:
            dim = self.space[name]
            if rng.random() < self.resample_probability:
                new[name] = dim.sample(rng)
            else:
                shift = self.perturb_step if rng.random() < 0.5 else -self.perturb_step
                new[name] = dim.from_unit(min(1.0, max(0.0, dim.to_unit(params[name]) + shift)))
        return new
