"""The trial-scheduler contract, checked: a simulated training run that drives a scheduler the way
the optimizer rank does, and the checks :class:`emews.testing.SchedulerConformance` runs on it.

The run is pure and deterministic (no MPI, no thread, no clock). ``trials`` trials, each with a
point drawn from the space, train on ``workers`` slots; the trial that reports next is drawn
from the running ones (``seed``), so reports interleave as they do on a real machine. Each
report's metric is a learning curve (:func:`curve`), signed by the scheduler's ``mode``. Each
answer is acted on as the runtime acts on it:

``continue``           the trial trains on; at its last step its task ends (``ended``)
``stop``/``complete``  its task ends (``ended``)
``pause``              it leaves its slot and waits; :meth:`~TrialScheduler.promotable` trials
                       run again (first in the queue) from the step they paused at, after
                       :meth:`~TrialScheduler.promote` (whose resource, with ``resource``, is
                       their new step limit); when nothing else can run, the
                       :meth:`~TrialScheduler.least_promising` one is released
``exploit``            it goes on from the clone's step with the explored parameters (until it
                       reports again it has no checkpoint of its own: it is no donor)

Every call and its answer is recorded (:class:`Call`), with what the results store would hold
at that moment: the reports, each trial's first parameters, the promotions, the trials that
ended, the exploits. From those a fresh scheduler is rebuilt (:meth:`~TrialScheduler.rebuild`, as ``emews
resume`` does) at several cuts and must answer the rest of the run as the live one did.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emews.core.direction import Direction
from emews.core.results import StoredReport
from emews.core.space import Categorical, Float, Int, Ordered, Space
from emews.training.messages import Action, Decision
from emews.training.schedulers.trial_scheduler import TrialScheduler

SchedulerFactory = Callable[[], TrialScheduler]

#: the metric the simulated trials report
METRIC = "loss"


def training_space() -> Space:
    """The default space of the simulated trials: a log float, an int, a categorical, an ordered one."""
    return Space(
        {
            "lr": Float(1e-4, 1e-1, log=True),
            "units": Int(8, 64),
            "activation": Categorical(("relu", "tanh", "sigmoid")),
            "batch": Ordered((16, 32, 64, 128)),
        }
    )


@dataclass(frozen=True)
class Call:
    """One call the run made to the scheduler (``method`` with ``args``) and what it answered."""

    method: str
    args: tuple[Any, ...]
    answer: Any = None


@dataclass(frozen=True)
class Stored:
    """What the results store holds after the first ``calls`` calls: what a rebuild reads."""

    calls: int
    reports: int
    started: dict[int, dict[str, Any]]
    promoted: tuple[tuple[int, int], ...]
    ended: tuple[int, ...]
    exploits: dict[int, Decision]  # report seq -> the exploit that answered it
    waiting: list[int]  # what the live scheduler's ``waiting()`` said then, sorted
    promotable: list[int]  # and its ``promotable()``


@dataclass
class SimulatedRun:
    """Every call a simulated run made, what the store held along the way, and the breaches seen."""

    space: Space
    direction: str
    seed: int
    calls: list[Call] = field(default_factory=list)
    reports: list[StoredReport] = field(default_factory=list)
    stored: list[Stored] = field(default_factory=list)  # after each report's handling
    problems: list[str] = field(default_factory=list)


def bound(factory: SchedulerFactory, space: Space, direction: str, seed: int) -> TrialScheduler:
    """A new scheduler from ``factory``, bound as the workflow binds it (metric, direction, space, seed)."""
    return factory().bind(metric=METRIC, direction=direction, space=space, seed=seed)


def curve(space: Space, params: Mapping[str, Any], step: int, trial: int) -> float:
    """The loss a simulated trial reports at ``step``: ``2 * quality + 1 / step``, where the quality
    of a point, in [0, 1], is the mean of its unit coordinates (a tiny share of ``trial`` breaks ties)."""
    free = [name for name, dim in space.dimensions.items() if dim.free]
    quality = sum(space[name].to_unit(params[name]) for name in free) / len(free) if free else 0.5
    return 2.0 * quality + 1.0 / step + 1e-4 * trial


class _Driver:
    """The optimizer rank's side of a simulated run: dispatch, reports, decisions, promotions."""

    def __init__(self, scheduler: TrialScheduler, run: SimulatedRun, trials: int, workers: int, steps: int) -> None:
        self.scheduler, self.run = scheduler, run
        self.workers, self.steps = workers, steps
        self.rng = random.Random(run.seed)
        self.sign = Direction.of(scheduler.mode).sign
        self.params = {t: run.space.sample(self.rng) for t in range(trials)}
        self.queue: deque[int] = deque(range(trials))
        self.running: dict[int, int] = {}  # trial -> its last step
        self.held: dict[int, int] = {}  # trial -> the step it paused at
        self.at: dict[int, int] = {}  # trial -> its last reported step
        self.started: dict[int, dict[str, Any]] = {}
        self.promoted: list[tuple[int, int]] = []
        self.ended: list[int] = []
        self.exploits: dict[int, Decision] = {}
        self.cloned: dict[int, int] = {}  # trial that exploited and has not reported since -> its donor
        self.limit = trials * steps * 4

    def call(self, method: str, *args: Any) -> Any:
        answer = getattr(self.scheduler, method)(*args)
        self.run.calls.append(Call(method, args, _recorded(method, answer)))
        return answer

    def drive(self) -> None:
        while self.queue or self.running or self.held:
            while self.queue and len(self.running) < self.workers:
                trial = self.queue.popleft()
                self.running[trial] = self.at.get(trial, 0)  # a promoted trial goes on where it paused
            if not self.running:
                self.release()
            else:
                self.report(self.rng.choice(sorted(self.running)))
            if len(self.run.reports) > self.limit:
                self.run.problems.append(
                    f"the run did not end after {self.limit} reports (waiting: {sorted(self.held)})"
                )
                return

    def report(self, trial: int) -> None:
        step = self.running[trial] + 1
        params = self.params[trial]
        metrics = {METRIC: self.sign * curve(self.run.space, params, step, trial)}
        self.started.setdefault(trial, dict(params))
        self.at[trial] = step
        self.cloned.pop(trial, None)
        self.run.reports.append(StoredReport(len(self.run.reports), trial, step, metrics, 0.0))
        decision = self.call("on_report", trial, step, dict(metrics), dict(params))
        self.act(trial, step, decision)
        self.promote()
        self.run.stored.append(
            Stored(
                len(self.run.calls),
                len(self.run.reports),
                dict(self.started),
                tuple(self.promoted),
                tuple(self.ended),
                dict(self.exploits),
                sorted(self.scheduler.waiting()),
                list(self.scheduler.promotable()),
            )
        )

    def act(self, trial: int, step: int, decision: Any) -> None:
        problem = decision_problem(decision, trial, self.at, self.run.space, self.cloned)
        if problem:
            self.run.problems.append(f"trial {trial} at step {step}: {problem}")
            decision = Decision(Action.STOP)
        action = decision.action
        if action is Action.PAUSE:
            del self.running[trial]
            self.held[trial] = step
            if trial not in self.call("waiting"):
                self.run.problems.append(f"trial {trial} paused at step {step} but waiting() does not list it")
        elif action is Action.EXPLOIT:
            self.exploits[len(self.run.reports) - 1] = decision
            self.cloned[trial] = decision.clone_from
            self.params[trial] = dict(decision.params)
            self.running[trial] = self.at[decision.clone_from]
        elif action is Action.CONTINUE and step < self.step_limit(trial):
            self.running[trial] = step
        else:  # stopped, completed, or at its last step: the task ends with its result
            del self.running[trial]
            self.end(trial)

    def step_limit(self, trial: int) -> int:
        name = self.scheduler.resource
        given = self.params[trial].get(name) if name is not None else None
        return given if isinstance(given, int) and not isinstance(given, bool) else self.steps

    def end(self, trial: int) -> None:
        self.ended.append(trial)
        self.call("ended", trial)

    def promote(self) -> None:
        if not self.held:
            return
        promotable = self.call("promotable")
        waiting = set(self.call("waiting"))
        for trial in promotable:
            if trial not in waiting or trial not in self.held:
                self.run.problems.append(f"promotable() names trial {trial}, which does not wait")
                return
        for trial in reversed(promotable):
            step = self.held.pop(trial)
            resource = self.call("promote", trial)
            if resource is not None and (isinstance(resource, bool) or not isinstance(resource, int)):
                self.run.problems.append(f"promote({trial}) gave {resource!r}, not a number of steps or None")
            elif resource is not None and self.scheduler.resource is not None:
                self.params[trial] = {**self.params[trial], self.scheduler.resource: resource}
            self.promoted.append((trial, step))
            self.queue.appendleft(trial)
            if trial in self.call("waiting"):
                self.run.problems.append(f"trial {trial} was promoted but waiting() still lists it")

    def release(self) -> None:
        trials = sorted(self.held)
        chosen = self.call("least_promising", trials)
        if chosen not in self.held:
            self.run.problems.append(f"least_promising({trials}) gave {chosen!r}, not one of them")
            chosen = trials[0]
        del self.held[chosen]
        self.call("release", chosen)
        if chosen in self.call("waiting"):
            self.run.problems.append(f"trial {chosen} was released but waiting() still lists it")
        self.ended.append(chosen)  # its result so far is its result (the store has it)


def decision_problem(
    decision: Any, trial: int, reported: Mapping[int, int], space: Space, cloned: Mapping[int, int] | None = None
) -> str | None:
    """What is wrong with ``decision`` for ``trial`` (``None``: nothing); ``cloned``: the trials that
    exploited and have not reported since, with their donors."""
    if not isinstance(decision, Decision) or not isinstance(decision.action, Action):
        return f"on_report returned {decision!r}, not a Decision"
    if decision.action is not Action.EXPLOIT:
        return None
    donor = decision.clone_from
    if not isinstance(donor, int) or donor == trial or donor not in reported:
        return f"exploit clones {donor!r}, not another trial that reported"
    if cloned and donor in cloned:
        return (
            f"exploit clones trial {donor}, which has not reported since its own exploit (of trial "
            f"{cloned[donor]}): it has no checkpoint of its own to clone"
        )
    if not isinstance(decision.params, Mapping):
        return f"exploit without parameters ({decision.params!r})"
    try:
        space.validate(dict(decision.params))
    except (ValueError, TypeError) as exc:
        return f"exploit with parameters outside the space: {exc}"
    missing = sorted(set(space.dimensions) - set(decision.params))
    return f"exploit with parameters that leave out {', '.join(missing)}" if missing else None


def simulate(
    factory: SchedulerFactory,
    *,
    trials: int = 16,
    workers: int = 4,
    steps: int = 12,
    space: Space | None = None,
    direction: str = "minimize",
    seed: int = 0,
) -> SimulatedRun:
    """Drive a new scheduler from ``factory`` through one simulated run; a method that raises ends
    the run with a problem naming it."""
    run = SimulatedRun(space or training_space(), direction, seed)
    try:
        _Driver(bound(factory, run.space, direction, seed), run, trials, workers, steps).drive()
    except Exception as exc:  # noqa: BLE001 - the kit reports it as a breach, not a crash
        last = run.calls[-1].method if run.calls else "bind"
        run.problems.append(f"the scheduler raised {type(exc).__name__}: {exc} (after {last})")
    return run


# --------------------------------------------------------------------------- the checks


def valid_problems(run: SimulatedRun) -> list[str]:
    """Decisions valid, promotions and releases consistent with ``waiting()``, every trial ended."""
    return list(run.problems)


def same_calls_problems(first: Sequence[Call], second: Sequence[Call], why: str) -> list[str]:
    """Where the calls of two runs that should go alike (``why``) first differ."""
    for i, (a, b) in enumerate(zip(first, second, strict=False)):  # a length apart is said below
        if a != b:
            return [
                f"{why}: call {i} ({a.method}{_args(a)}) answered {a.answer!r}, then "
                f"{b.method}{_args(b)} answered {b.answer!r}"
            ]
    if len(first) != len(second):
        return [f"{why}: {len(first)} calls in one run, {len(second)} in the other"]
    return []


def mirrored(run: SimulatedRun) -> list[Call]:
    """``run``'s calls with every report's metric negated (what the other direction sees)."""
    return [
        Call(c.method, (*c.args[:2], {k: -v for k, v in c.args[2].items()}, *c.args[3:]), c.answer)
        if c.method == "on_report"
        else c
        for c in run.calls
    ]


def missing_metric_problems(factory: SchedulerFactory, space: Space | None = None, seed: int = 0) -> list[str]:
    """A report without a usable metric (missing, NaN, infinite, text, a bool) is no evidence: the
    trial continues, whatever the scheduler saw before (the trial service stops a NaN or infinite
    one before the scheduler sees it: :meth:`TrialScheduler.diverged`; a rebuild replays it)."""
    scheduler = bound(factory, space or training_space(), "minimize", seed)
    problems = []
    params = (space or training_space()).sample(random.Random(seed))
    for trial in range(4):
        scheduler.on_report(trial, 1, {METRIC: 1.0 + trial}, params)
    unusable: list[dict[str, Any]] = [
        {},
        {METRIC: math.nan},
        {METRIC: math.inf},
        {METRIC: "0.5"},
        {METRIC: True},
        {"other": 0.1},
    ]
    for step, metrics in enumerate(unusable, start=2):
        try:
            decision = scheduler.on_report(3, step, metrics, params)
        except Exception as exc:  # noqa: BLE001 - a breach to report
            problems.append(f"a report of {metrics!r} raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(decision, Decision) or decision.action is not Action.CONTINUE:
            problems.append(f"a report of {metrics!r} got {decision!r}, not continue")
    return problems


def rebuilt(run: SimulatedRun, factory: SchedulerFactory, held: Stored) -> TrialScheduler:
    """A new scheduler rebuilt from what the store ``held`` (as ``emews resume`` rebuilds one)."""
    scheduler = bound(factory, run.space, run.direction, run.seed)
    scheduler.rebuild(run.reports[: held.reports], held.started, held.promoted, held.ended, held.exploits)
    return scheduler


def cut_points(run: SimulatedRun, cuts: int) -> list[Stored]:
    """What the store held at ``cuts`` points spread over the run (never at its very end)."""
    if not run.stored:
        return []
    return [run.stored[len(run.stored) * (i + 1) // (cuts + 1)] for i in range(cuts)]


def rebuild_problems(run: SimulatedRun, factory: SchedulerFactory, cuts: int = 9) -> list[str]:
    """State rebuilt by replaying reports: at each cut a rebuilt scheduler waits for the same trials
    and would promote the same ones as the live one did then."""
    problems = []
    for held in cut_points(run, cuts):
        where = f"rebuilt from {held.reports} of {len(run.reports)} reports"
        try:
            scheduler = rebuilt(run, factory, held)
            waiting, promotable = sorted(scheduler.waiting()), list(scheduler.promotable())
        except Exception as exc:  # noqa: BLE001 - a breach to report
            problems.append(f"{where}: raised {type(exc).__name__}: {exc}")
            continue
        if waiting != held.waiting:
            problems.append(f"{where}: waiting() is {waiting}, the live run's {held.waiting}")
        if promotable != held.promotable:
            problems.append(f"{where}: promotable() is {promotable}, the live run's {held.promotable}")
    return problems


def resume_problems(run: SimulatedRun, factory: SchedulerFactory, cuts: int = 9) -> list[str]:
    """Resume: at each cut a rebuilt scheduler answers the rest of the run as the live one did."""
    problems = []
    for held in cut_points(run, cuts):
        where = f"rebuilt from {held.reports} of {len(run.reports)} reports"
        try:
            scheduler = rebuilt(run, factory, held)
            for i, call in enumerate(run.calls[held.calls :], start=held.calls):
                answer = _recorded(call.method, getattr(scheduler, call.method)(*call.args))
                if answer != call.answer:
                    problems.append(
                        f"{where}: call {i} ({call.method}{_args(call)}) answered {answer!r}, "
                        f"the live run {call.answer!r}"
                    )
                    break
        except Exception as exc:  # noqa: BLE001 - a breach to report
            problems.append(f"{where}: raised {type(exc).__name__}: {exc}")
    return problems


def _recorded(method: str, answer: Any) -> Any:
    """An answer as recorded: lists copied (a scheduler may hand out its own), ``waiting()`` sorted
    (a set: its order means nothing, unlike ``promotable()``'s)."""
    if method == "waiting":
        return sorted(answer)
    return list(answer) if isinstance(answer, (list, tuple)) else answer


def _args(call: Call) -> str:
    return "(" + ", ".join(repr(a) for a in call.args[:2]) + (", ...)" if len(call.args) > 2 else ")")
