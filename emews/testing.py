"""A conformance kit for optimizers: tests for free for plug-in authors.

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

Outside pytest, :func:`check_optimizer` runs every check and raises
:class:`ConformanceError` listing all that failed. The test objectives live
in this module (``emews.testing:smooth_objective`` and
``emews.testing:flaky_objective``) so that ``ObjectiveRef`` can import them.
"""

from __future__ import annotations

import json
import math
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from emews.evaluator import Evaluator
from emews.optimizer import Optimizer
from emews.results import Result
from emews.runtime.job import RunSpec, RunSummary, run_in_threads
from emews.runtime.objective import ObjectiveRef
from emews.space import Categorical, Constant, Float, Int, Ordered, Space

__all__ = [
    "ConformanceError", "OptimizerConformance", "Trace", "check_optimizer", "mixed_space",
    "run_traced", "smooth_objective", "flaky_objective", "SMOOTH", "FLAKY",
    "check_budget", "check_points_in_space", "check_failures_handled", "check_deterministic",
    "check_clean_stop",
]

OptimizerFactory = Callable[[int], Optimizer]


class ConformanceError(AssertionError):
    """An optimizer broke the optimizer contract; the message says how."""


# --------------------------------------------------------------------------- space and objectives

def mixed_space() -> Space:
    """A space with every dimension type (what the kit explores by default)."""
    return Space({
        "x": Float(-5.0, 5.0, sigma=1.0),
        "lr": Float(1e-4, 1.0, log=True),
        "units": Int(1, 64),
        "width": Int(1, 1024, log=True),
        "activation": Categorical(("relu", "tanh", "sigmoid")),
        "batch": Ordered((16, 32, 64, 128)),
        "shuffle": Categorical((True, False)),
        "optimizer": Constant("adam"),
    })


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
    points: list[dict[str, Any]] = field(default_factory=list)      # submitted, in order
    results: list[Result] = field(default_factory=list)             # handed to the optimizer
    over_budget: list[str] = field(default_factory=list)            # puts beyond ``remaining``
    invalid: list[str] = field(default_factory=list)                # points outside the space
    summary: RunSummary | None = None
    elapsed: float = 0.0
    hung: bool = False
    threads_left: list[str] = field(default_factory=list)
    optimizer: Optimizer | None = None


class _Traced(Optimizer):
    """Runs the optimizer under test with a recording evaluator (the real one, its methods wrapped)."""

    def __init__(self, inner: Optimizer, trace: Trace) -> None:
        self.inner = inner
        self.trace = trace

    def run(self, evaluator: Evaluator) -> None:
        trace = self.trace
        put, get, emap = evaluator.put, evaluator.get, evaluator.map

        def traced_put(points: Any) -> list[int]:
            points = list(points)
            if len(points) > evaluator.remaining:
                trace.over_budget.append(
                    f"put {len(points)} points with {evaluator.remaining} left of the budget "
                    f"(after {evaluator.submitted} submitted)")
            clean = []
            for point in points:
                try:
                    clean.append(trace.space.validate(point))
                except (ValueError, TypeError) as exc:
                    trace.invalid.append(f"{dict(point)!r}: {exc}")
                    clean.append(dict(point))
            ids = put(points)
            trace.points.extend(clean)
            return ids

        def traced_get(n: int = 1, timeout: float | None = None) -> list[Result]:
            results = get(n, timeout)
            trace.results.extend(results)
            return results

        def traced_map(points: Any) -> list[Result]:
            results = emap(points)
            trace.results.extend(results)
            return results

        evaluator.put, evaluator.get, evaluator.map = traced_put, traced_get, traced_map  # type: ignore[method-assign]
        self.inner.run(evaluator)


def run_traced(factory: OptimizerFactory, *, seed: int = 0, budget: int = 24, workers: int = 3,
               space: Space | None = None, objective: ObjectiveRef = SMOOTH,
               timeout: float = 60.0, main_thread: bool = False) -> Trace:
    """Run ``factory(seed)`` through the real runtime (worker threads, inline objective) and record it.

    The run goes on a helper thread so that a hang is caught after ``timeout``;
    ``main_thread=True`` runs the optimizer on the calling thread instead, as
    the optimizer rank does (needed by libraries such as rpy2 that must stay
    on the main thread); a hang is then left to the test runner's timeout.
    """
    space = space or mixed_space()
    trace = Trace(budget, workers, seed, space)

    def make() -> Optimizer:
        trace.optimizer = factory(seed)
        return _Traced(trace.optimizer, trace)

    spec = RunSpec(space=space, make_optimizer=make, objective=objective, budget=budget, seed=seed,
                   isolation="inline", show_progress=False)
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
    if (err := _run_error(trace)):
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
        problems.append(f"used {n} of a budget of {trace.budget} evaluations "
                        "(set full_budget = False if the optimizer ends early by design)")
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
    if (err := _run_error(trace)):
        problems.append(f"with an objective that fails on some points, {err}")
    failed = [r for r in trace.results if not r.ok]
    if not problems and trace.summary and trace.summary.failed == 0:
        problems.append("the flaky objective failed on no point of this space; use a larger budget")
    elif not problems and not failed:
        problems.append(f"{trace.summary.failed if trace.summary else 0} evaluations failed "
                        "but the optimizer received none of them")
    if not problems and any(not math.isinf(r.loss) for r in failed):
        problems.append("a failed result did not carry an infinite loss")
    if not problems and full_budget and len(trace.points) < trace.budget:
        problems.append(f"stopped after {len(trace.points)} of {trace.budget} evaluations when "
                        "some failed (set full_budget = False if it ends early by design)")
    _fail(problems)


def check_deterministic(first: Trace, second: Trace) -> None:
    """Two runs with the same seed on one worker proposed the same points in the same order."""
    problems = [e for e in (_run_error(first), _run_error(second)) if e]
    if not problems and first.points != second.points:
        i = next((i for i, (a, b) in enumerate(zip(first.points, second.points)) if a != b),
                 min(len(first.points), len(second.points)))
        a = first.points[i] if i < len(first.points) else "<none>"
        b = second.points[i] if i < len(second.points) else "<none>"
        problems.append(f"same seed ({first.seed}), different points: evaluation {i} was {a!r} "
                        f"in the first run and {b!r} in the second "
                        "(use random.Random(seed), not the global random module)")
    _fail(problems)


def check_clean_stop(trace: Trace) -> None:
    """``run`` returned in time and every thread started during the run has ended."""
    problems = []
    if trace.hung:
        problems.append(f"run did not return within {trace.elapsed:.0f} s")
    if trace.threads_left:
        problems.append("threads still running after the run: " + ", ".join(trace.threads_left))
    _fail(problems)


# --------------------------------------------------------------------------- all at once

def check_optimizer(factory: OptimizerFactory, *, budget: int = 24, workers: int = 3,
                    space: Space | None = None, seed: int = 0, full_budget: bool = True,
                    deterministic: bool = True, strict_budget: bool = True,
                    timeout: float = 60.0) -> dict[str, Trace]:
    """Run every conformance check on ``factory(seed) -> Optimizer``; raise listing all failures."""
    kw = dict(seed=seed, budget=budget, space=space, timeout=timeout)
    traces = {"smooth": run_traced(factory, workers=workers, **kw),
              "flaky": run_traced(factory, workers=workers, objective=FLAKY, **kw)}
    checks: list[tuple[str, Callable[[], None]]] = [
        ("budget", lambda: check_budget(traces["smooth"], full_budget=full_budget, strict=strict_budget)),
        ("space", lambda: check_points_in_space(traces["smooth"])),
        ("failures", lambda: check_failures_handled(traces["flaky"], full_budget=full_budget)),
        ("clean stop", lambda: check_clean_stop(traces["smooth"])),
    ]
    if deterministic:
        traces["once"] = run_traced(factory, workers=1, **kw)
        traces["twice"] = run_traced(factory, workers=1, **kw)
        checks.append(("determinism", lambda: check_deterministic(traces["once"], traces["twice"])))
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
    (a :class:`~emews.space.Space`; default :func:`mixed_space`),
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

    _trace_cache: dict[tuple[type, str], Trace] = {}

    def make_optimizer(self, seed: int) -> Optimizer:
        raise NotImplementedError("define make_optimizer(self, seed) to return the optimizer under test")

    def trace(self, kind: str = "smooth") -> Trace:
        """The run of ``kind`` (``smooth``, ``flaky``, ``once``, ``twice``), run on first use."""
        key = (type(self), kind)
        if key not in self._trace_cache:
            workers = 1 if kind in ("once", "twice") else self.workers
            objective = FLAKY if kind == "flaky" else SMOOTH
            self._trace_cache[key] = run_traced(
                self.make_optimizer, seed=self.seed, budget=self.budget, workers=workers,
                space=self.space, objective=objective, timeout=self.timeout, main_thread=self.main_thread)
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


def _skip(reason: str) -> None:
    try:
        import pytest
    except ImportError:  # pragma: no cover - outside pytest a skipped check just passes
        return
    pytest.skip(reason)
