"""The conformance kit applied to every built-in optimizer, and shown to catch broken ones."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from emews.core.evaluator import Evaluator
from emews.core.optimizer import AskTellOptimizer, Optimizer
from emews.optimizers.ga import GeneticAlgorithm
from emews.optimizers.random import RandomSearch
from emews.optimizers.sweep import Sweep
from emews.core.seeds import resumed_seed
from emews.core.space import Constant, Int, Space
from emews.testing import (
    FLAKY, ConformanceError, OptimizerConformance, check_budget, check_clean_stop, check_deterministic,
    check_failures_handled, check_optimizer, check_points_in_space, check_resumes, mixed_space,
    resume_histories, run_traced,
)

# --------------------------------------------------------------------------- built-ins pass


class TestRandomSearch(OptimizerConformance):
    def make_optimizer(self, seed: int) -> Optimizer:
        return RandomSearch(seed=seed)


class TestSweep(OptimizerConformance):
    def make_optimizer(self, seed: int) -> Optimizer:
        return Sweep(levels=3)


class TestSweepSmallGrid(OptimizerConformance):
    """A grid smaller than the budget: the sweep ends early by design."""

    space = Space({"n": Int(0, 11), "tag": Constant("t")})
    full_budget = False

    def make_optimizer(self, seed: int) -> Optimizer:
        return Sweep(levels=12)

    def test_whole_grid_evaluated(self) -> None:
        assert sorted(p["n"] for p in self.trace().points) == list(range(12))


class TestGASimple(OptimizerConformance):
    def make_optimizer(self, seed: int) -> Optimizer:
        return GeneticAlgorithm(population=6, seed=seed, strategy="simple")


class TestGAMuPlusLambda(OptimizerConformance):
    def make_optimizer(self, seed: int) -> Optimizer:
        return GeneticAlgorithm(population=6, lambda_=4, seed=seed, strategy="mu_plus_lambda",
                                cxpb=0.5, mutpb=0.4, failure="worst")


class TestGAAsync(OptimizerConformance):
    def make_optimizer(self, seed: int) -> Optimizer:
        return GeneticAlgorithm(population=6, seed=seed, strategy="async", failure="mean")


class TestGAFewGenerations(OptimizerConformance):
    """``generations`` ends the GA before the budget: allowed when declared."""

    full_budget = False

    def make_optimizer(self, seed: int) -> Optimizer:
        return GeneticAlgorithm(population=4, generations=2, seed=seed)

    def test_stops_after_its_generations(self) -> None:
        assert len(self.trace().points) <= 4 * 3


def test_check_optimizer_passes_for_a_builtin() -> None:
    traces = check_optimizer(lambda seed: RandomSearch(seed=seed), budget=10, workers=2)
    assert set(traces) == {"smooth", "flaky", "once", "twice", "resumed", "finished"}
    assert len(traces["smooth"].points) == 10


# --------------------------------------------------------------------------- broken ones are caught


class OverBudget(Optimizer):
    """Asks for more than the budget in one batch (the evaluator refuses; the kit must notice)."""

    def run(self, evaluator: Evaluator) -> None:
        rng = random.Random(0)
        evaluator.put([evaluator.space.sample(rng) for _ in range(evaluator.remaining + 5)])


class OutOfSpace(AskTellOptimizer):
    def suggest(self, n: int) -> list[dict[str, Any]]:
        point = self.space.sample(random.Random(1))
        point["units"] = 1000  # Int(1, 64)
        return [point]

    def ingest(self, results: Any) -> None:
        pass


class Unseeded(AskTellOptimizer):
    def __init__(self) -> None:
        self.rng = random.Random()  # ignores the seed

    def suggest(self, n: int) -> list[dict[str, Any]]:
        return [self.space.sample(self.rng) for _ in range(n)]

    def ingest(self, results: Any) -> None:
        pass


class ChokesOnFailures(Unseeded):
    def __init__(self) -> None:
        self.rng = random.Random(0)

    def ingest(self, results: Any) -> None:
        for r in results:
            if not r.ok:
                raise ValueError(f"cannot learn from a loss of {r.loss}")


class QuitsEarly(Unseeded):
    def __init__(self) -> None:
        super().__init__()
        self.asked = 0

    def suggest(self, n: int) -> list[dict[str, Any]]:
        if self.asked >= 5:
            return []
        self.asked += 1
        return [self.space.sample(self.rng)]


class LeaksThread(Unseeded):
    release = threading.Event()

    def run(self, evaluator: Evaluator) -> None:
        threading.Thread(target=self.release.wait, name="leaked-refit", daemon=True).start()
        super().run(evaluator)


class Forgetful(Optimizer):
    """Never looks at ``evaluator.history``: a resumed run starts from scratch."""

    def run(self, evaluator: Evaluator) -> None:
        rng = random.Random(0)
        while evaluator.remaining:
            evaluator.map([evaluator.space.sample(rng)])


class LearnsLate(Unseeded):
    """Ingests the earlier results only after its first proposals."""

    def run(self, evaluator: Evaluator) -> None:
        self.start(evaluator.space, evaluator.workers)
        evaluator.put(self.suggest(1))
        self.ingest(list(evaluator.history))
        while evaluator.remaining:
            evaluator.map(self.suggest(1))


class ProposesWhenDone(Optimizer):
    """Reads the history, then asks for a point even when the budget is spent."""

    def run(self, evaluator: Evaluator) -> None:
        assert evaluator.history is not None
        rng = random.Random(0)
        evaluator.put([evaluator.space.sample(rng)])
        while evaluator.remaining:
            evaluator.map([evaluator.space.sample(rng)])


class Hangs(Optimizer):
    release = threading.Event()

    def run(self, evaluator: Evaluator) -> None:
        self.release.wait()


def test_over_budget_request_is_caught() -> None:
    trace = run_traced(lambda seed: OverBudget(), budget=8)
    with pytest.raises(ConformanceError, match="more evaluations than the budget had left"):
        check_budget(trace)


def test_out_of_space_point_is_caught() -> None:
    trace = run_traced(lambda seed: OutOfSpace(), budget=8)
    with pytest.raises(ConformanceError, match="outside the space.*units"):
        check_points_in_space(trace)


def test_nondeterminism_is_caught() -> None:
    traces = [run_traced(lambda seed: Unseeded(), budget=6, workers=1) for _ in range(2)]
    with pytest.raises(ConformanceError, match="same seed"):
        check_deterministic(*traces)


def test_optimizer_crashing_on_failed_results_is_caught() -> None:
    trace = run_traced(lambda seed: ChokesOnFailures(), budget=20, objective=FLAKY)
    with pytest.raises(ConformanceError, match="cannot learn from a loss of inf"):
        check_failures_handled(trace)


def test_unused_budget_is_caught() -> None:
    trace = run_traced(lambda seed: QuitsEarly(), budget=12)
    with pytest.raises(ConformanceError, match="used 5 of a budget of 12"):
        check_budget(trace)
    check_budget(trace, full_budget=False)  # fine when ending early is by design


def test_leaked_thread_is_caught() -> None:
    try:
        trace = run_traced(lambda seed: LeaksThread(), budget=4)
        with pytest.raises(ConformanceError, match="leaked-refit"):
            check_clean_stop(trace)
    finally:
        LeaksThread.release.set()


def test_hung_run_is_caught() -> None:
    try:
        trace = run_traced(lambda seed: Hangs(), budget=4, timeout=0.5)
        assert trace.hung
        with pytest.raises(ConformanceError, match="did not return"):
            check_clean_stop(trace)
    finally:
        Hangs.release.set()


def test_check_optimizer_lists_every_failure() -> None:
    with pytest.raises(ConformanceError) as info:
        check_optimizer(lambda seed: OutOfSpace(), budget=6, workers=2, deterministic=False)
    text = str(info.value)
    assert "[space]" in text and "[budget]" in text


def test_mixed_space_has_every_type() -> None:
    kinds = {type(d).__name__ for d in mixed_space().dimensions.values()}
    assert kinds == {"Float", "Int", "Categorical", "Ordered", "Constant"}
    assert any(getattr(d, "log", False) for d in mixed_space().dimensions.values())


def _resume_traces(factory: Any) -> tuple[Any, Any]:
    half, whole = resume_histories(run_traced(lambda seed: RandomSearch(seed=seed), budget=8))
    return (run_traced(factory, budget=8, history=half),
            run_traced(factory, budget=len(whole), history=whole))


def test_an_optimizer_ignoring_the_history_is_caught() -> None:
    with pytest.raises(ConformanceError, match="before reading evaluator.history"):
        check_resumes(*_resume_traces(lambda seed: Forgetful()))


def test_ingesting_the_history_after_proposing_is_caught() -> None:
    with pytest.raises(ConformanceError, match="4 of 4 earlier results were not ingested"):
        check_resumes(*_resume_traces(lambda seed: LearnsLate()))


def test_proposing_in_a_finished_run_is_caught() -> None:
    resumed, finished = _resume_traces(lambda seed: ProposesWhenDone())
    assert finished.over_budget_puts == 1 and not finished.points
    with pytest.raises(ConformanceError, match="more evaluations than the budget had left: put 1 points with 0 left"):
        check_resumes(resumed, finished)


class SeededAfresh(Optimizer):
    """Reads the history, then draws with its seed from the start: the first run's points again."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def run(self, evaluator: Evaluator) -> None:
        assert evaluator.history is not None
        rng = random.Random(self.seed)
        while evaluator.remaining:
            evaluator.map([evaluator.space.sample(rng)])


class DrawsOn(SeededAfresh):
    """As SeededAfresh, but a resumed run draws on with resumed_seed."""

    def run(self, evaluator: Evaluator) -> None:
        self.seed = resumed_seed(self.seed, evaluator.earlier_points)
        super().run(evaluator)


def test_a_resumed_run_drawing_the_first_runs_points_again_is_caught() -> None:
    half, whole = resume_histories(run_traced(SeededAfresh, budget=8))
    resumed = run_traced(SeededAfresh, budget=8, history=half)
    finished = run_traced(SeededAfresh, budget=len(whole), history=whole)
    assert resumed.points[:2] == [dict(r.params) for r in half[:2]]
    with pytest.raises(ConformanceError, match="proposed the earlier run's first 2 points again"):
        check_resumes(resumed, finished)
    half, whole = resume_histories(run_traced(DrawsOn, budget=8))
    check_resumes(run_traced(DrawsOn, budget=8, history=half), run_traced(DrawsOn, budget=len(whole), history=whole))


def test_a_resumed_run_spends_only_what_is_left() -> None:
    resumed, finished = _resume_traces(lambda seed: RandomSearch(seed=seed))
    assert len(resumed.history) == 4 and len(resumed.points) == 4
    assert finished.points == [] and finished.summary.error is None
    check_resumes(resumed, finished)
