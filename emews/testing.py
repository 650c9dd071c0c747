"""Conformance kits for optimizers and trial schedulers: tests for free for plug-in authors.

Subclass :class:`OptimizerConformance` in a test module and say how to build
your optimizer::

    from emews.testing import OptimizerConformance

    class TestMyOptimizer(OptimizerConformance):
        def make_optimizer(self, seed):
            return MyOptimizer(seed=seed)

pytest then runs, against the real runtime (``run_in_threads``, inline
objectives, no MPI):

``test_budget_respected``      never more evaluations than the budget, never a ``put``
                               beyond ``evaluator.remaining``, and the whole budget used
                               (set ``full_budget = False`` if your optimizer may end early)
``test_points_inside_space``   every proposed point is a valid point of a mixed space
                               (float, log float, int, log int, categorical, ordered, bool, constant)
``test_failed_results_handled`` with an objective that fails on ~30% of points (raises or
                               returns NaN) the run completes and the failures reach the optimizer
``test_deterministic_under_seed`` same seed, one worker: the same sequence of points
                               (set ``deterministic = False`` to skip)
``test_clean_stop``            ``run`` returns within ``timeout`` and leaves no thread behind
``test_degenerate_spaces``     runs on spaces with ``lower == upper``, one-value lists, and
                               constants only (as real CANDLE files have)
``test_resumes``               resumes: ingests history before proposing; a resumed finished
                               run proposes nothing. The first half of the smooth run's
                               results is given as ``evaluator.history``: the optimizer reads
                               it (an ``AskTellOptimizer`` gets all of it through ``ingest``)
                               before its first proposal, does not start by proposing the
                               earlier run's first points again (a seed used afresh: draw on
                               with ``resumed_seed(seed, evaluator.earlier_points)``) and
                               spends only the rest of the budget; given all of them, it
                               returns without proposing

Outside pytest, :func:`check_optimizer` runs every check and raises
:class:`ConformanceError` listing all that failed. The test objectives live
in this module (``emews.testing:smooth_objective`` and
``emews.testing:flaky_objective``) so that ``ObjectiveRef`` can import them.

Trial schedulers have their kit too: subclass :class:`SchedulerConformance` and say how to
build yours (unbound: the kit binds it to its metric, direction, space and seed)::

    from emews.testing import SchedulerConformance

    class TestMyRule(SchedulerConformance):
        def make_scheduler(self):
            return MyRule(grace_period=2)

pytest then drives it through simulated training runs
(:mod:`emews.training.schedulers.conformance`: trials on worker slots, reports interleaved,
each answer acted on as the optimizer rank acts on it):

``test_decisions_valid``       every answer is a ``Decision``; an exploit clones another trial that
                               reported (and has reported since its own last exploit), with a
                               point of the space; a paused trial is listed by
                               ``waiting()`` until promoted or released; ``promotable()`` names
                               waiting trials only; ``least_promising`` one of those given; the run ends
``test_state_rebuilt_by_replaying_reports``  at cuts through the run, a scheduler rebuilt from
                               what the store held (``rebuild``) waits for and promotes the same trials
``test_resumes``               ... and answers the rest of the run as the uninterrupted one did
``test_deterministic_under_seed``  the same seed, the same answers
``test_direction_mirrors``     ``maximize`` with the metric negated answers as ``minimize``
``test_report_without_metric_continues``  a report without a usable metric continues

:func:`check_scheduler` runs them all outside pytest.
"""

from __future__ import annotations

import json
import math
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from emews.core.errors import EmewsError
from emews.core.evaluator import BudgetExhausted, Evaluator
from emews.core.optimizer import AskTellOptimizer, Optimizer
from emews.core.results import Result
from emews.core.space import Categorical, Constant, Float, Int, Ordered, Space
from emews.job.wiring import RunSpec, RunSummary, run_in_threads
from emews.objective.function import ObjectiveRef
from emews.training.schedulers import TrialScheduler
from emews.training.schedulers.conformance import (
    SimulatedRun,
    mirrored,
    missing_metric_problems,
    rebuild_problems,
    resume_problems,
    same_calls_problems,
    simulate,
    valid_problems,
)

__all__ = [
    "ConformanceError",
    "OptimizerConformance",
    "Trace",
    "check_optimizer",
    "mixed_space",
    "run_traced",
    "smooth_objective",
    "flaky_objective",
    "SMOOTH",
    "FLAKY",
    "degenerate_space",
    "constants_space",
    "DEGENERATE_SPACES",
    "check_degenerate_spaces",
    "check_budget",
    "check_points_in_space",
    "check_failures_handled",
    "check_deterministic",
    "check_clean_stop",
    "check_resumes",
    "SchedulerConformance",
    "check_scheduler",
]

OptimizerFactory = Callable[[int], Optimizer]


class ConformanceError(EmewsError, AssertionError):
    """An optimizer broke the optimizer contract; the message says how."""


# --------------------------------------------------------------------------- space and objectives


def mixed_space() -> Space:
    """A space with every dimension type (what the kit explores by default)."""
    return Space(
        {
            "x": Float(-5.0, 5.0, sigma=1.0),
            "lr": Float(1e-4, 1.0, log=True),
            "units": Int(1, 64),
            "width": Int(1, 1024, log=True),
            "activation": Categorical(("relu", "tanh", "sigmoid")),
            "batch": Ordered((16, 32, 64, 128)),
            "shuffle": Categorical((True, False)),
            "optimizer": Constant("adam"),
        }
    )


def degenerate_space() -> Space:
    """What real CANDLE files hold beside ordinary ranges: ``lower == upper`` (adrp's ``epochs``
    200..200), one-value lists and constants, next to one searchable parameter."""
    return Space(
        {
            "x": Float(-5.0, 5.0),
            "epochs": Int(200, 200),
            "rate": Float(0.1, 0.1),
            "activation": Categorical(("relu",)),
            "batch": Ordered((32,)),
            "model": Constant("nt3"),
        }
    )


def constants_space() -> Space:
    """A space with nothing to search: every evaluation gets the same point."""
    return Space({"epochs": Constant(20), "model": Constant("nt3")})


#: the degenerate spaces every optimizer must run on (name -> space)
DEGENERATE_SPACES: dict[str, Callable[[], Space]] = {
    "lower == upper and one-value lists": degenerate_space,
    "constants only": constants_space,
}


def smooth_objective(params: Mapping[str, Any]) -> float:
    """A cheap deterministic loss over any point (numbers pulled towards 0, names by length)."""
    total = 0.0
    for value in params.values():
        if isinstance(value, bool) or value is None:
            total += 0.1 * bool(value)
        elif isinstance(value, (int, float)):
            total += math.sqrt(abs(float(value)))
        else:
            total += 0.01 * len(str(value))
    return total


def flaky_objective(params: Mapping[str, Any]) -> float:
    """Like :func:`smooth_objective`, but ~20% of points raise and ~10% return NaN (by a hash of the point)."""
    bucket = zlib.crc32(json.dumps(dict(params), sort_keys=True, default=repr).encode()) % 10
    if bucket < 2:
        raise RuntimeError(f"flaky objective fails on this point (bucket {bucket})")
    if bucket == 2:
        return math.nan
    return smooth_objective(params)


SMOOTH = ObjectiveRef("emews.testing", "smooth_objective")
FLAKY = ObjectiveRef("emews.testing", "flaky_objective")


# --------------------------------------------------------------------------- one traced run


@dataclass
class Trace:
    """What one run under the kit showed."""

    budget: int
    workers: int
    seed: int
    space: Space
    points: list[dict[str, Any]] = field(default_factory=list)  # submitted, in order
    results: list[Result] = field(default_factory=list)  # handed to the optimizer
    over_budget: list[str] = field(default_factory=list)  # puts beyond ``remaining``
    invalid: list[str] = field(default_factory=list)  # points outside the space
    summary: RunSummary | None = None
    elapsed: float = 0.0
    hung: bool = False
    threads_left: list[str] = field(default_factory=list)
    optimizer: Optimizer | None = None
    history: list[Result] = field(default_factory=list)  # given as evaluator.history
    events: list[tuple[str, Any]] = field(default_factory=list)  # ("history"|"put"|"suggest"|"ingest", detail)
    over_budget_puts: int = 0  # puts refused (BudgetExhausted)


class _Recorder:
    """The evaluator as the optimizer under test sees it: the real one, its use recorded."""

    def __init__(self, evaluator: Evaluator, trace: Trace) -> None:
        self._evaluator = evaluator
        self._trace = trace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._evaluator, name)

    @property
    def history(self) -> tuple[Result, ...]:
        self._trace.events.append(("history", len(self._evaluator.history)))
        return self._evaluator.history

    def put(self, points: Any) -> list[int]:
        points = self._record(points)
        return self._refusal_counted(self._evaluator.put, points)

    def get(self, n: int = 1, timeout: float | None = None, *, more_room: int | None = None) -> list[Result]:
        results = self._evaluator.get(n, timeout, more_room=more_room)
        self._trace.results.extend(results)
        return results

    def map(self, points: Any) -> list[Result]:
        points = self._record(points)
        results = self._refusal_counted(self._evaluator.map, points)
        self._trace.results.extend(results)
        return results

    def _record(self, points: Any) -> list[Any]:
        """Note a submission: its size, whether the budget allows it, and (if it does) its points."""
        trace, evaluator = self._trace, self._evaluator
        points = list(points)
        trace.events.append(("put", len(points)))
        if len(points) > evaluator.remaining:
            trace.over_budget.append(
                f"put {len(points)} points with {evaluator.remaining} left of the budget "
                f"(after {evaluator.submitted} submitted)"
            )
            return points
        for point in points:
            try:
                trace.points.append(trace.space.validate(point))
            except (ValueError, TypeError) as exc:
                trace.invalid.append(f"{dict(point)!r}: {exc}")
                trace.points.append(dict(point))
        return points

    def _refusal_counted(self, call: Callable[[list[Any]], Any], points: list[Any]) -> Any:
        try:
            return call(points)
        except BudgetExhausted:
            self._trace.over_budget_puts += 1
            raise


class _Traced(Optimizer):
    """Runs the optimizer under test with a recording evaluator (the real one, wrapped).

    With ``history`` (or ``exp_dir``) the run's evaluator is rebuilt on the same queues as
    the runtime builds it for a resumed experiment.
    """

    def __init__(self, inner: Optimizer, trace: Trace, exp_dir: Path | None = None) -> None:
        self.inner = inner
        self.trace = trace
        self.exp_dir = exp_dir

    def run(self, evaluator: Evaluator) -> None:
        trace = self.trace
        if trace.history or self.exp_dir is not None:
            evaluator = Evaluator(
                evaluator._queues,
                evaluator.space,
                workers=evaluator.workers,
                budget=evaluator.budget,
                direction=evaluator.direction,
                seed=evaluator.seed,
                first_id=max((r.id + 1 for r in trace.history), default=0),
                history=trace.history,
                exp_dir=self.exp_dir,
            )
        if isinstance(self.inner, AskTellOptimizer):
            _record_ask_tell(self.inner, trace)
        self.inner.run(_Recorder(evaluator, trace))  # type: ignore[arg-type]


def _record_ask_tell(optimizer: AskTellOptimizer, trace: Trace) -> None:
    """Record the order of ``suggest`` and ``ingest`` calls (wrapping them on the instance)."""
    suggest, ingest = optimizer.suggest, optimizer.ingest

    def traced_suggest(n: int) -> Any:
        trace.events.append(("suggest", n))
        return suggest(n)

    def traced_ingest(results: Sequence[Result]) -> None:
        trace.events.append(("ingest", [r.id for r in results]))
        ingest(results)

    optimizer.suggest, optimizer.ingest = traced_suggest, traced_ingest  # type: ignore[method-assign]


def run_traced(
    factory: OptimizerFactory,
    *,
    seed: int = 0,
    budget: int = 24,
    workers: int = 3,
    space: Space | None = None,
    objective: ObjectiveRef = SMOOTH,
    timeout: float = 60.0,
    main_thread: bool = False,
    history: Sequence[Result] = (),
    exp_dir: Path | None = None,
) -> Trace:
    """Run ``factory(seed)`` through the real runtime (worker threads, inline objective) and record it.

    ``history``: results of an earlier run, given to the optimizer as ``evaluator.history``
    (as ``emews resume`` does); ``exp_dir``: the run's ``evaluator.exp_dir``.

    The run goes on a helper thread so that a hang is caught after ``timeout``;
    ``main_thread=True`` runs the optimizer on the calling thread instead, as
    the optimizer rank does (needed by libraries such as rpy2 that must stay
    on the main thread); a hang is then left to the test runner's timeout.
    """
    space = space or mixed_space()
    trace = Trace(budget, workers, seed, space, history=sorted(history, key=lambda r: r.id))

    def make() -> Optimizer:
        trace.optimizer = factory(seed)
        return _Traced(trace.optimizer, trace, exp_dir)

    spec = RunSpec(
        space=space,
        make_optimizer=make,
        objective=objective,
        budget=budget,
        seed=seed,
        isolation="inline",
        show_progress=False,
    )
    before = set(threading.enumerate())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["summary"] = run_in_threads(spec, workers=workers)
        except BaseException as exc:  # the runtime itself failed: report, do not hang
            box["error"] = exc

    start = time.monotonic()
    if main_thread:
        target()
        trace.hung = False
    else:
        runner = threading.Thread(target=target, name="emews-conformance-run", daemon=True)
        runner.start()
        runner.join(timeout)
        trace.hung = runner.is_alive()
    trace.elapsed = time.monotonic() - start
    if "error" in box:
        raise box["error"]
    trace.summary = box.get("summary")
    if not trace.hung:
        deadline = time.monotonic() + 2.0
        while True:
            left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        trace.threads_left = [t.name for t in left]
    return trace


# --------------------------------------------------------------------------- the checks


def _fail(problems: list[str]) -> None:
    if problems:
        raise ConformanceError("\n".join(problems))


def _run_error(trace: Trace) -> str | None:
    if trace.hung:
        return f"run did not return within {trace.elapsed:.0f} s"
    err = trace.summary.error if trace.summary else None
    if err is None:
        return None
    detail = getattr(err, "traceback", None) or f"{type(err).__name__}: {err}"
    return f"the run ended with an error: {detail}"


def check_budget(trace: Trace, *, full_budget: bool = True, strict: bool = True) -> None:
    """Never more evaluations than the budget; with ``full_budget``, exactly the budget."""
    problems = []
    if err := _run_error(trace):
        problems.append(err)
    n = len(trace.points)
    if n > trace.budget:
        problems.append(f"{n} evaluations submitted with a budget of {trace.budget}")
    done = trace.summary.completed if trace.summary else 0
    if done > trace.budget:
        problems.append(f"{done} evaluations completed with a budget of {trace.budget}")
    if strict and trace.over_budget:
        problems.append("asked for more evaluations than the budget had left: " + "; ".join(trace.over_budget))
    if full_budget and not trace.hung and n < trace.budget:
        problems.append(
            f"used {n} of a budget of {trace.budget} evaluations "
            "(set full_budget = False if the optimizer ends early by design)"
        )
    _fail(problems)


def check_points_in_space(trace: Trace) -> None:
    """Every proposed point is a member of the space."""
    problems = [f"proposed a point outside the space: {msg}" for msg in trace.invalid[:5]]
    if len(trace.invalid) > 5:
        problems.append(f"... and {len(trace.invalid) - 5} more")
    problems += [f"point {p!r} is not in the space" for p in trace.points if not trace.space.contains(p)][:5]
    if not trace.points and not trace.hung:
        problems.append("proposed no points at all")
    if not problems and (err := _run_error(trace)):
        problems.append(err)
    _fail(problems)


def check_failures_handled(trace: Trace, *, full_budget: bool = True) -> None:
    """Run against the flaky objective: it completes, and failed results reach the optimizer."""
    problems = []
    if err := _run_error(trace):
        problems.append(f"with an objective that fails on some points, {err}")
    failed = [r for r in trace.results if not r.ok]
    if not problems and trace.summary and trace.summary.failed == 0:
        problems.append("the flaky objective failed on no point of this space; use a larger budget")
    elif not problems and not failed:
        problems.append(
            f"{trace.summary.failed if trace.summary else 0} evaluations failed but the optimizer received none of them"
        )
    if not problems and any(not math.isinf(r.loss) for r in failed):
        problems.append("a failed result did not carry an infinite loss")
    if not problems and full_budget and len(trace.points) < trace.budget:
        problems.append(
            f"stopped after {len(trace.points)} of {trace.budget} evaluations when "
            "some failed (set full_budget = False if it ends early by design)"
        )
    _fail(problems)


def check_deterministic(first: Trace, second: Trace) -> None:
    """Two runs with the same seed on one worker proposed the same points in the same order."""
    problems = [e for e in (_run_error(first), _run_error(second)) if e]
    if not problems and first.points != second.points:
        i = next(
            (i for i, (a, b) in enumerate(zip(first.points, second.points, strict=False)) if a != b),
            min(len(first.points), len(second.points)),
        )
        a = first.points[i] if i < len(first.points) else "<none>"
        b = second.points[i] if i < len(second.points) else "<none>"
        problems.append(
            f"same seed ({first.seed}), different points: evaluation {i} was {a!r} "
            f"in the first run and {b!r} in the second "
            "(use random.Random(seed), not the global random module)"
        )
    _fail(problems)


def check_clean_stop(trace: Trace) -> None:
    """``run`` returned in time and every thread started during the run has ended."""
    problems = []
    if trace.hung:
        problems.append(f"run did not return within {trace.elapsed:.0f} s")
    if trace.threads_left:
        problems.append("threads still running after the run: " + ", ".join(trace.threads_left))
    _fail(problems)


def check_resumes(resumed: Trace, finished: Trace, *, full_budget: bool = True, strict: bool = True) -> None:
    """Resumes: ingests history before proposing; a resumed finished run proposes nothing.

    ``resumed`` ran with part of an earlier run's results as history, ``finished`` with a
    history that spent the whole budget.
    """
    problems = [
        f"resumed with {len(t.history)} earlier results, {e}" for t in (resumed, finished) if (e := _run_error(t))
    ]
    events = resumed.events
    first_put = next((i for i, (kind, _) in enumerate(events) if kind == "put"), len(events))
    if not any(kind == "history" for kind, _ in events[:first_put]):
        problems.append("proposed points before reading evaluator.history (the earlier runs' results)")
    if isinstance(resumed.optimizer, AskTellOptimizer):
        first_suggest = next((i for i, (kind, _) in enumerate(events) if kind == "suggest"), len(events))
        told = {i for kind, ids in events[:first_suggest] if kind == "ingest" for i in ids}
        missing = {r.id for r in resumed.history} - told
        if missing:
            problems.append(
                f"{len(missing)} of {len(resumed.history)} earlier results were not ingested before the first suggest"
            )
    left = resumed.budget - len(resumed.history)
    if len(resumed.points) > left:
        problems.append(
            f"resumed with {len(resumed.history)} of a budget of {resumed.budget} spent, "
            f"it submitted {len(resumed.points)} (more than the {left} left)"
        )
    elif full_budget and not resumed.hung and len(resumed.points) < left:
        problems.append(f"resumed with {left} evaluations left, it submitted only {len(resumed.points)}")
    if strict and (resumed.over_budget or finished.over_budget):
        problems.append(
            "asked for more evaluations than the budget had left: "
            + "; ".join(resumed.over_budget + finished.over_budget)
        )
    if redrawn := redrawn_first_points(resumed):
        problems.append(
            f"resumed, it proposed the earlier run's first {redrawn} points again, in order (seeded afresh? "
            "draw on with emews.resumed_seed(seed, evaluator.earlier_points))"
        )
    if finished.points:
        problems.append(
            f"resumed after the whole budget ({finished.budget}) was spent, it still "
            f"submitted {len(finished.points)} points"
        )
    _fail(problems)


def redrawn_first_points(resumed: Trace, count: int = 2) -> int:
    """How many of the earlier run's first ``count`` points a resumed run proposed again first, in order.

    0 unless the resumed run's first ``count`` points are the earlier run's first ``count``: what a
    seeded optimizer does when it seeds its generator afresh instead of drawing on.
    """
    earlier = [dict(r.params) for r in resumed.history[:count]]
    again = resumed.points[:count]
    return count if len(earlier) == count and again == earlier else 0


def check_degenerate_spaces(
    factory: OptimizerFactory, *, seed: int = 0, budget: int = 8, timeout: float = 60.0, main_thread: bool = False
) -> None:
    """On each of :data:`DEGENERATE_SPACES` the optimizer runs, stops cleanly, stays within the budget
    and proposes only points of the space (it may end early: there may be one point only)."""
    problems = []
    for name, make_space in DEGENERATE_SPACES.items():
        trace = run_traced(
            factory, seed=seed, budget=budget, workers=2, space=make_space(), timeout=timeout, main_thread=main_thread
        )
        for check in (check_clean_stop, check_points_in_space, partial(check_budget, full_budget=False)):
            try:
                check(trace)
            except ConformanceError as exc:
                problems.append(f"on a space with {name}: {exc}")
    if problems:
        _fail(problems)


def resume_histories(trace: Trace) -> tuple[list[Result], list[Result]]:
    """From a run's results: the first half (a run killed midway) and all of them (a finished run)."""
    results = sorted(trace.results, key=lambda r: r.id)
    return results[: len(results) // 2], results


# --------------------------------------------------------------------------- all at once


def check_optimizer(
    factory: OptimizerFactory,
    *,
    budget: int = 24,
    workers: int = 3,
    space: Space | None = None,
    seed: int = 0,
    full_budget: bool = True,
    deterministic: bool = True,
    strict_budget: bool = True,
    resumes: bool = True,
    degenerate: bool = True,
    timeout: float = 60.0,
) -> dict[str, Trace]:
    """Run every conformance check on ``factory(seed) -> Optimizer``; raise listing all failures."""
    kw: dict[str, Any] = dict(seed=seed, budget=budget, space=space, timeout=timeout)
    traces = {
        "smooth": run_traced(factory, workers=workers, **kw),
        "flaky": run_traced(factory, workers=workers, objective=FLAKY, **kw),
    }
    checks: list[tuple[str, Callable[[], None]]] = [
        ("budget", lambda: check_budget(traces["smooth"], full_budget=full_budget, strict=strict_budget)),
        ("space", lambda: check_points_in_space(traces["smooth"])),
        ("failures", lambda: check_failures_handled(traces["flaky"], full_budget=full_budget)),
        ("clean stop", lambda: check_clean_stop(traces["smooth"])),
    ]
    if degenerate:
        checks.append(("degenerate spaces", lambda: check_degenerate_spaces(factory, seed=seed, timeout=timeout)))
    if deterministic:
        traces["once"] = run_traced(factory, workers=1, **kw)
        traces["twice"] = run_traced(factory, workers=1, **kw)
        checks.append(("determinism", lambda: check_deterministic(traces["once"], traces["twice"])))
    if resumes:
        half, whole = resume_histories(traces["smooth"])
        traces["resumed"] = run_traced(factory, workers=workers, history=half, **kw)
        traces["finished"] = run_traced(factory, workers=workers, history=whole, **{**kw, "budget": len(whole)})
        checks.append(
            (
                "resumes",
                lambda: check_resumes(
                    traces["resumed"], traces["finished"], full_budget=full_budget, strict=strict_budget
                ),
            )
        )
    problems = []
    for name, check in checks:
        try:
            check()
        except ConformanceError as exc:
            problems.append(f"[{name}] {exc}")
    if problems:
        raise ConformanceError("optimizer failed conformance:\n" + "\n".join(problems))
    return traces


class OptimizerConformance:
    """Base class for pytest: subclass it, define ``make_optimizer(seed)``, get the tests.

    Tune with class attributes: ``budget``, ``workers``, ``seed``, ``space``
    (a :class:`~emews.core.space.Space`; default :func:`mixed_space`),
    ``full_budget``, ``deterministic``, ``strict_budget``, ``timeout``, and
    ``main_thread`` (run the optimizer on pytest's main thread, e.g. for rpy2).
    Runs are cached per class, so the tests share them.
    """

    budget: int = 24
    workers: int = 3
    seed: int = 0
    space: Space | None = None
    full_budget: bool = True
    deterministic: bool = True
    strict_budget: bool = True
    timeout: float = 60.0
    main_thread: bool = False
    degenerate: bool = True

    _trace_cache: dict[tuple[type, str], Trace] = {}

    def make_optimizer(self, seed: int) -> Optimizer:
        raise NotImplementedError("define make_optimizer(self, seed) to return the optimizer under test")

    def trace(self, kind: str = "smooth") -> Trace:
        """The run of ``kind`` (``smooth``, ``flaky``, ``once``, ``twice``, ``resumed``,
        ``finished``), run on first use."""
        key = (type(self), kind)
        if key not in self._trace_cache:
            workers = 1 if kind in ("once", "twice") else self.workers
            objective = FLAKY if kind == "flaky" else SMOOTH
            history: list[Result] = []
            budget = self.budget
            if kind in ("resumed", "finished"):
                half, whole = resume_histories(self.trace())
                history = half if kind == "resumed" else whole
                budget = budget if kind == "resumed" else len(whole)
            self._trace_cache[key] = run_traced(
                self.make_optimizer,
                seed=self.seed,
                budget=budget,
                workers=workers,
                space=self.space,
                objective=objective,
                timeout=self.timeout,
                main_thread=self.main_thread,
                history=history,
            )
        return self._trace_cache[key]

    def test_budget_respected(self) -> None:
        check_budget(self.trace(), full_budget=self.full_budget, strict=self.strict_budget)

    def test_points_inside_space(self) -> None:
        check_points_in_space(self.trace())

    def test_failed_results_handled(self) -> None:
        check_failures_handled(self.trace("flaky"), full_budget=self.full_budget)

    def test_deterministic_under_seed(self) -> None:
        if not self.deterministic:
            _skip("deterministic = False")
            return
        check_deterministic(self.trace("once"), self.trace("twice"))

    def test_clean_stop(self) -> None:
        check_clean_stop(self.trace())

    def test_degenerate_spaces(self) -> None:
        """Runs on spaces with ``lower == upper``, one-value lists, and constants only."""
        if not self.degenerate:
            _skip("degenerate = False")
            return
        check_degenerate_spaces(self.make_optimizer, seed=self.seed, timeout=self.timeout, main_thread=self.main_thread)

    def test_resumes(self) -> None:
        """Resumes: ingests history before proposing; a resumed finished run proposes nothing."""
        check_resumes(
            self.trace("resumed"), self.trace("finished"), full_budget=self.full_budget, strict=self.strict_budget
        )


# --------------------------------------------------------------------------- trial schedulers

SchedulerFactory = Callable[[], TrialScheduler]


def check_scheduler(
    factory: SchedulerFactory,
    *,
    trials: int = 16,
    workers: int = 4,
    steps: int = 12,
    space: Space | None = None,
    seed: int = 0,
) -> SimulatedRun:
    """Run every trial-scheduler check on ``factory() -> TrialScheduler`` (unbound); raise listing
    all failures. Returns the minimizing run."""
    kw: dict[str, Any] = dict(trials=trials, workers=workers, steps=steps, space=space, seed=seed)
    run, again, maximized = (
        simulate(factory, **kw),
        simulate(factory, **kw),
        simulate(factory, direction="maximize", **kw),
    )
    checks = {
        "decisions": valid_problems(run),
        "rebuilt state": rebuild_problems(run, factory),
        "resume": resume_problems(run, factory),
        "determinism": same_calls_problems(run.calls, again.calls, "same seed"),
        "direction": same_calls_problems(mirrored(run), maximized.calls, "maximize, metric negated"),
        "no metric": missing_metric_problems(factory, space, seed),
    }
    problems = [f"[{name}] {problem}" for name, found in checks.items() for problem in found]
    if problems:
        raise ConformanceError("trial scheduler failed conformance:\n" + "\n".join(problems))
    return run


class SchedulerConformance:
    """Base class for pytest: subclass it, define ``make_scheduler()`` (unbound), get the tests.

    Tune with class attributes: ``trials``, ``workers``, ``steps`` (each trial's course), ``seed``
    and ``space`` (a :class:`~emews.core.space.Space`; default
    :func:`~emews.training.schedulers.conformance.training_space`). Runs are cached per class.
    """

    trials: int = 16
    workers: int = 4
    steps: int = 12
    seed: int = 0
    space: Space | None = None

    _run_cache: dict[tuple[type, str], SimulatedRun] = {}

    def make_scheduler(self) -> TrialScheduler:
        raise NotImplementedError("define make_scheduler(self) to return the trial scheduler under test")

    def simulated(self, kind: str = "minimize") -> SimulatedRun:
        """The simulated run of ``kind`` (``minimize``, ``again``, ``maximize``), run on first use."""
        key = (type(self), kind)
        if key not in self._run_cache:
            self._run_cache[key] = simulate(
                self.make_scheduler,
                trials=self.trials,
                workers=self.workers,
                steps=self.steps,
                space=self.space,
                seed=self.seed,
                direction="maximize" if kind == "maximize" else "minimize",
            )
        return self._run_cache[key]

    def test_decisions_valid(self) -> None:
        _fail(valid_problems(self.simulated()))

    def test_state_rebuilt_by_replaying_reports(self) -> None:
        _fail(rebuild_problems(self.simulated(), self.make_scheduler))

    def test_resumes(self) -> None:
        _fail(resume_problems(self.simulated(), self.make_scheduler))

    def test_deterministic_under_seed(self) -> None:
        _fail(same_calls_problems(self.simulated().calls, self.simulated("again").calls, "same seed"))

    def test_direction_mirrors(self) -> None:
        _fail(
            same_calls_problems(
                mirrored(self.simulated()), self.simulated("maximize").calls, "maximize, metric negated"
            )
        )

    def test_report_without_metric_continues(self) -> None:
        _fail(missing_metric_problems(self.make_scheduler, self.space, self.seed))


def _skip(reason: str) -> None:
    try:
        import pytest
    except ImportError:  # pragma: no cover - outside pytest a skipped check just passes
        return
    pytest.skip(reason)
