"""Resume continues the search: the Evaluator contract (history, requeue, first_id) and every
Python optimizer learning the earlier results before its first proposal."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

from emews.core.evaluator import BudgetExhausted, Evaluator, EvaluatorObserver
from emews.core.optimizer import Optimizer
from emews.optimizers.bayes import BayesianOptimizer
from emews.optimizers._ga import archive
from emews.optimizers._ga.failure_policy import FailurePolicy
from emews.optimizers._ga.individual import Individual
from emews.optimizers.ga import GeneticAlgorithm
from emews.optimizers.random import RandomSearch
from emews.optimizers.sweep import Sweep
from emews.core.queues import QueuePair
from emews.core.results import Result, Status, Task
from emews.core.space import Constant, Float, Int, Space
from emews.testing import run_traced, smooth_objective

SPACE = Space({"x": Float(-5.0, 5.0, sigma=0.01), "n": Int(0, 8), "tag": Constant("t")})


class Proposed(EvaluatorObserver):
    """The points an optimizer submits, in order."""

    def __init__(self, evaluator: Evaluator) -> None:
        self.points: list[dict[str, Any]] = []
        evaluator.observers.append(self)

    def submitted(self, tasks) -> None:
        self.points.extend(dict(t.params) for t in tasks)

def result(task_id: int, params: dict[str, Any], loss: float | None = None) -> Result:
    """A finished evaluation of an earlier run (``loss`` None: it failed)."""
    if loss is None:
        return Result(task_id, params, Status.FAILED, None, math.inf, error="boom")
    return Result(task_id, params, Status.OK, loss, loss)


def history(n: int) -> list[Result]:
    """``n`` earlier results on SPACE, loss |x|, every fifth one failed."""
    out = []
    for i in range(n):
        point = {"x": -4.0 + 8.0 * i / max(n - 1, 1), "n": i % 9, "tag": "t"}
        out.append(result(i, point, None if i % 5 == 4 else abs(point["x"])))
    return out


class AtFirstProposal(Optimizer):
    """Runs ``inner``; ``probe(inner)`` is called once, at its first ``put`` or ``map``."""

    def __init__(self, inner: Optimizer, probe: Callable[[Optimizer], Any]) -> None:
        self.inner, self.probe = inner, probe
        self.seen: Any = None
        self.first_batch: list[dict[str, Any]] | None = None

    def run(self, evaluator: Any) -> None:
        for name in ("put", "map"):
            setattr(evaluator, name, self._probed(getattr(evaluator, name)))
        self.inner.run(evaluator)

    def _probed(self, call: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def probed(points: Any) -> Any:
            points = list(points)
            if self.first_batch is None:
                self.first_batch = points
                self.seen = self.probe(self.inner)
            return call(points)
        return probed


def resumed_run(make: Callable[[int], Optimizer], earlier: Sequence[Result], *, budget: int,
                probe: Callable[[Optimizer], Any] = lambda opt: None, workers: int = 2,
                space: Space = SPACE, **kw: Any) -> tuple[Any, AtFirstProposal]:
    box: dict[str, AtFirstProposal] = {}

    def factory(seed: int) -> Optimizer:
        box["wrapper"] = AtFirstProposal(make(seed), probe)
        return box["wrapper"]

    trace = run_traced(factory, budget=budget, workers=workers, space=space, history=earlier, **kw)
    assert trace.summary is not None and trace.summary.error is None, trace.summary
    return trace, box["wrapper"]


class Answerer:
    """Stands in for the distributor: answers every task with smooth_objective, on a thread."""

    def __init__(self, queues: QueuePair) -> None:
        self.queues = queues
        self.answered: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "Answerer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.queues.new_tasks.set()
        self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.queues.new_tasks.wait()
            self.queues.new_tasks.clear()
            while self.queues.tasks:
                task = self.queues.tasks.popleft()
                self.answered.append(task.id)
                value = smooth_objective(task.params)
                self.queues.deliver([Result(task.id, task.params, Status.OK, value, value)])


def task(task_id: int, params: dict[str, Any]) -> Task:
    return Task(task_id, params, 0, 0.0)


# --------------------------------------------------------------------------- the Evaluator contract

def test_history_counts_against_the_budget_and_requeued_tasks_go_out_again_with_their_ids() -> None:
    queues = QueuePair()
    running = [task(7, {"x": 0.5, "n": 1, "tag": "t"}), task(9, {"x": 1.5, "n": 2, "tag": "t"})]
    ev = Evaluator(queues, SPACE, workers=2, budget=10, history=history(5), requeue=running, first_id=8)
    assert ev.history == tuple(history(5)) and ev.requeued == tuple(running)
    assert [t.id for t in queues.tasks] == [7, 9]          # submitted at construction, ids unchanged
    assert ev.submitted == 2 and ev.pending == 2 and ev.remaining == 10 - 5 - 2
    with Answerer(queues):
        ids = ev.put([{"x": 0.0, "n": 0, "tag": "t"}])
        assert ids == [10]                                   # past every earlier id, not first_id 8
        got = []
        while ev.pending:
            got += ev.get(1)
    assert sorted(r.id for r in got) == [7, 9, 10] and ev.remaining == 2
    with pytest.raises(BudgetExhausted):
        ev.put([{"x": 0.0, "n": 0, "tag": "t"}] * 3)


def test_a_finished_experiment_resumes_to_nothing_to_do_and_a_larger_budget_extends_it() -> None:
    assert Evaluator(QueuePair(), SPACE, workers=2, budget=5, history=history(5)).remaining == 0
    assert Evaluator(QueuePair(), SPACE, workers=2, budget=4, history=history(5)).remaining == 0
    assert Evaluator(QueuePair(), SPACE, workers=2, budget=8, history=history(5)).remaining == 3


def test_the_same_point_is_evaluated_again_when_proposed_again() -> None:
    """No point-key replay: an id is a task, whatever its point."""
    queues = QueuePair()
    earlier = history(3)
    ev = Evaluator(queues, SPACE, workers=1, budget=5, history=earlier, first_id=3)
    with Answerer(queues) as answerer:
        again = ev.map([dict(earlier[0].params)])
    assert [r.id for r in again] == [3] and answerer.answered == [3]


# --------------------------------------------------------------------------- random search

def test_a_seeded_random_search_continues_its_sequence() -> None:
    whole = run_traced(lambda s: RandomSearch(seed=s), seed=3, budget=16, space=SPACE)
    first = run_traced(lambda s: RandomSearch(seed=s), seed=3, budget=8, space=SPACE)
    assert first.points == whole.points[:8]
    resumed, _ = resumed_run(lambda s: RandomSearch(seed=s), first.results, budget=16, seed=3)
    assert resumed.points == whole.points[8:]


def test_random_search_skips_the_draws_of_requeued_tasks_too() -> None:
    space = Space({"x": Float(0.0, 1.0)})
    whole = run_traced(lambda s: RandomSearch(seed=s), seed=1, budget=6, space=space, workers=1)
    queues = QueuePair()
    earlier = [result(0, whole.points[0], 0.1), result(1, whole.points[1], 0.2)]
    ev = Evaluator(queues, space, workers=1, budget=6, seed=1, history=earlier,
                   requeue=[task(2, whole.points[2])])
    proposed = Proposed(ev)
    with Answerer(queues):
        RandomSearch(seed=1, backlog=1).run(ev)
    assert proposed.points == whole.points[3:]


def test_random_search_skips_the_draws_of_tasks_lost_at_a_kill() -> None:
    """A task dispatched just before a kill -9 may be in neither table: its id was issued all the same
    (it was found: the resumed run proposed the point of a stored id again)."""
    space = Space({"x": Float(0.0, 1.0)})
    whole = run_traced(lambda s: RandomSearch(seed=s), seed=1, budget=8, space=space, workers=1)
    queues = QueuePair()
    earlier = [result(0, whole.points[0], 0.1), result(1, whole.points[1], 0.2), result(3, whole.points[3], 0.3)]
    ev = Evaluator(queues, space, workers=1, budget=6, seed=1, history=earlier)  # id 2 lost
    proposed = Proposed(ev)
    with Answerer(queues):
        RandomSearch(seed=1, backlog=1).run(ev)
    assert proposed.points == whole.points[4:7]


# --------------------------------------------------------------------------- sweep

def test_a_resumed_grid_sweep_finishes_the_rest_without_redoing() -> None:
    space = Space({"n": Int(0, 11), "tag": Constant("t")})
    grid = [{"n": n, "tag": "t"} for n in range(12)]
    earlier = [result(i, {"n": float(p["n"]), "tag": "t"}, 1.0) for i, p in enumerate(grid[:5])]  # 3 -> 3.0
    trace, _ = resumed_run(lambda s: Sweep(levels=12), earlier, budget=20, space=space)
    assert trace.points == grid[5:]                          # the rest, once each
    assert len(trace.history) + len(trace.points) == 12


def test_a_resumed_points_file_keeps_its_repeated_lines(tmp_path: Path) -> None:
    space = Space({"n": Int(0, 9)})
    lines = [{"n": 1}, {"n": 2}, {"n": 1}, {"n": 3}]
    upf = tmp_path / "upf.txt"
    upf.write_text("".join(json.dumps(p) + "\n" for p in lines))
    trace, _ = resumed_run(lambda s: Sweep(file=upf), [result(0, {"n": 1}, 1.0)], budget=4, space=space)
    assert trace.points == [{"n": 2}, {"n": 1}, {"n": 3}]


def test_a_resumed_sweep_does_not_propose_the_requeued_points() -> None:
    space = Space({"n": Int(0, 5)})
    queues = QueuePair()
    ev = Evaluator(queues, space, workers=2, budget=6, history=[result(0, {"n": 0}, 1.0)],
                   requeue=[task(1, {"n": 1}), task(2, {"n": 2})])
    proposed = Proposed(ev)
    with Answerer(queues) as answerer:
        Sweep(levels=6).run(ev)
    assert proposed.points == [{"n": 3}, {"n": 4}, {"n": 5}] and sorted(answerer.answered) == [1, 2, 3, 4, 5]


# --------------------------------------------------------------------------- GA

def _near_one_of(point: dict[str, Any], parents: Sequence[dict[str, Any]]) -> bool:
    return any(abs(point["x"] - p["x"]) < 0.1 and abs(point["n"] - p["n"]) <= 5 for p in parents)


@pytest.mark.parametrize("strategy", ["simple", "async"])
def test_the_ga_starts_from_the_best_of_the_history(strategy: str) -> None:
    earlier = history(20)
    best4 = sorted((r for r in earlier if r.ok), key=lambda r: r.loss)[:4]
    trace, probe = resumed_run(
        lambda s: GeneticAlgorithm(population=4, seed=s, strategy=strategy, cxpb=0.0, mutpb=1.0, indpb=1.0),
        earlier, budget=28, probe=lambda opt: None)
    assert len(trace.points) == 8                            # the budget less the history
    # no random initial population: every first child is a small mutation of one of the best four
    assert probe.first_batch and all(_near_one_of(p, [dict(r.params) for r in best4])
                                     for p in probe.first_batch)
    best = trace.optimizer.inner.best
    assert best.loss <= best4[0].loss                        # the hall of fame holds the history


@pytest.mark.parametrize("strategy", ["simple", "async"])
def test_a_ga_resumed_in_its_initial_population_draws_the_rest_of_it(strategy: str) -> None:
    """Stopped before its initial population was evaluated, a seeded GA topped the population up
    with the seed's first draws again: the resumed run's first children were the points of ids 0, 1..."""
    def make(s: int) -> GeneticAlgorithm:
        return GeneticAlgorithm(population=8, seed=s, strategy=strategy)

    whole = run_traced(make, seed=3, budget=8, space=SPACE, workers=1)
    first = run_traced(make, seed=3, budget=5, space=SPACE, workers=1)
    assert first.points == whole.points[:5]
    resumed, _ = resumed_run(make, first.results, budget=12, seed=3, workers=1)
    assert not [p for p in resumed.points if p in first.points]
    assert resumed.points[:3] == whole.points[5:8]  # the initial population is the one a whole run draws


def test_a_finished_ga_resume_proposes_nothing_and_its_population_is_the_best_of_the_history() -> None:
    earlier = history(12)
    trace, probe = resumed_run(lambda s: GeneticAlgorithm(population=4, seed=s), earlier, budget=12)
    ga = trace.optimizer.inner
    assert trace.points == [] and probe.first_batch in (None, [])
    expected = sorted((r for r in earlier if r.ok), key=lambda r: r.loss)[:4]
    assert [dict(i) for i in ga.population] == [dict(r.params) for r in expected]


def test_the_ga_generation_count_goes_on() -> None:
    """12 earlier evaluations with population 4 paid for the initial population and 2 generations;
    with ``generations: 3`` one more is left."""
    trace, _ = resumed_run(lambda s: GeneticAlgorithm(population=4, generations=3, seed=s, mutpb=1.0),
                           history(12), budget=40)
    ga = trace.optimizer.inner
    assert [rec["gen"] for rec in ga.logbook] == [3]
    assert 0 < len(trace.points) <= 4


def test_the_async_ga_takes_in_results_of_requeued_tasks() -> None:
    queues = QueuePair()
    star = {"x": 0.0, "n": 0, "tag": "t"}                     # smooth_objective's best point
    ev = Evaluator(queues, SPACE, workers=2, budget=16, history=history(10), requeue=[task(10, star)])
    ga = GeneticAlgorithm(population=4, seed=0, strategy="async")
    with Answerer(queues) as answerer:
        ga.run(ev)
    assert len(answerer.answered) == 16 - 10 and 10 in answerer.answered
    assert dict(ga.best) == star and ga.best.result.id == 10


def test_ga_failures_in_the_history_get_the_failure_policy() -> None:
    earlier = [result(0, {"x": 1.0, "n": 0, "tag": "t"}, 1.0), result(1, {"x": 2.0, "n": 0, "tag": "t"}, None),
               result(2, {"x": 3.0, "n": 0, "tag": "t"}, 3.0)]
    trace, _ = resumed_run(lambda s: GeneticAlgorithm(population=4, seed=s, failure="worst"), earlier,
                           budget=3)
    losses = sorted(ind.loss for ind in trace.optimizer.inner.population)
    assert losses == [1.0, 3.0, 3.0]                          # the failure imputed as the worst seen


def test_the_ga_archive_holds_values_json_cannot(tmp_path: Path) -> None:
    """Reliability 3h: a categorical value of 1e400 (inf) crashed the archive after the run.
    The space now refuses it; the archive still writes whatever an individual holds."""
    ind = Individual({"c": 1e400, "d": {"a": [1, -math.inf]}, "x": 0.5})
    FailurePolicy().assign([ind], [result(3, dict(ind), None)])
    written = archive.save([ind], [ind], tmp_path)
    assert [p.name for p in written] == ["ga_population.json", "ga_hall_of_fame.json"]
    saved = json.loads((tmp_path / "ga_population.json").read_text())
    assert saved == [{"params": {"c": "inf", "d": {"a": [1, "-inf"]}, "x": 0.5}, "loss": None,
                      "objective": None, "status": "failed", "task_id": 3}]


# --------------------------------------------------------------------------- bayes

def test_bayes_tells_its_model_every_earlier_result_before_proposing() -> None:
    earlier = history(15)

    def model_state(opt: Any) -> tuple[int, int]:
        return opt.engine.n_told, opt.engine.fits

    trace, probe = resumed_run(lambda s: BayesianOptimizer(seed=s, n_initial_points=5, model_process=False),
                               earlier, budget=21, probe=model_state)
    told, fits = probe.seen
    assert told == 15                                        # failures included
    assert fits >= 1                                         # the first proposals come from a model
    assert len(trace.points) == 6


@pytest.mark.parametrize("generator", ["random", "lhs"])
def test_a_seeded_bayes_resumed_in_its_initial_design_continues_it(generator: str) -> None:
    """The first proposals of a resumed run were the earlier run's first points again (same seed, same
    draws): a waste of evaluations. A run resumed inside the initial design now draws on from it."""
    def make(s: int) -> BayesianOptimizer:
        return BayesianOptimizer(seed=s, n_initial_points=10, initial_point_generator=generator, model_process=False)

    whole = run_traced(make, seed=3, budget=12, space=SPACE, workers=1)
    first = run_traced(make, seed=3, budget=8, space=SPACE, workers=1)
    assert first.points == whole.points[:8]
    resumed, _ = resumed_run(make, first.results, budget=12, seed=3, workers=1)
    assert not [p for p in resumed.points if p in first.points]
    assert resumed.points == whole.points[8:10] + resumed.points[2:]  # the design goes on, then the model


def test_a_seeded_hyperspace_resumed_proposes_none_of_the_earlier_points() -> None:
    from emews.optimizers.hyperspace import HyperSpace

    def make(s: int) -> HyperSpace:
        return HyperSpace(seed=s, n_initial_points=10, output_warp=False)

    first = run_traced(make, seed=3, budget=8, space=SPACE, workers=1)
    resumed, _ = resumed_run(make, first.results, budget=16, seed=3, workers=1)
    assert len(resumed.points) == 8 and not [p for p in resumed.points if p in first.points]


def test_a_wide_hyperspace_run_tells_its_model_every_earlier_result_before_proposing(monkeypatch) -> None:
    """At width (more workers than hyperspace.WIDE, lowered to 8) the resumed run's first
    proposals come from a model of the earlier results, as bayes' do (one loop: _bayes._serve)."""
    import emews.optimizers.hyperspace as hyperspace_module

    monkeypatch.setattr(hyperspace_module, "WIDE", 8)
    monkeypatch.setattr(hyperspace_module, "PROCESS_AFTER", math.inf)  # counters read in this process
    earlier = history(15)

    def model_state(opt: Any) -> tuple[int, int]:
        return opt.model.n_told, opt.stats["random_fillers"]

    trace, probe = resumed_run(
        lambda s: hyperspace_module.HyperSpace(seed=s, n_initial_points=2, n_candidates=100, output_warp=False),
        earlier, budget=39, probe=model_state, workers=12)
    told, fillers = probe.seen
    assert told == 15 and fillers == 0       # the model had learned the history; nothing random was put first
    assert len(trace.points) == 24


def test_bayes_ask_tell_api_maps_results_by_task_id() -> None:
    """An int parameter that comes back as a float (3 -> 3.0) broke the old point keys."""
    opt = BayesianOptimizer(seed=0, n_initial_points=3)
    opt.start(SPACE, 1)
    opt.ingest(history(4))                                   # an earlier run's: counted as proposed
    assert opt.engine.n_told == 4 and opt.engine.n_proposed == 4
    points = opt.suggest(2)
    opt.submitted([40, 41], points)
    echoed = [result(40, {**points[0], "n": float(points[0]["n"])}, 0.5), result(41, points[1], None)]
    opt.ingest(echoed)
    assert opt._pending == {} and opt.engine.n_told == 6
