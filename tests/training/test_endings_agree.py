"""One rule says how a training trial ended (``TrialState.stopped_early``): over random sequences of
reports and answers (steps repeated by retries, any order of continue, stop, complete, pause and
exploit, decisions that name their report or, as an older store's, only their step, a wait for a
promotion at the last step), every surface says the same of each trial with a successful result:
``results.csv``'s ``t:ended``, ``emews status``, the end-of-run counts and Optuna's state in the
adapter (PRUNED exactly for the trials stopped early)."""

from __future__ import annotations

import csv
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emews.core.queues import QueuePair
from emews.core.results import Outcome, Result, Status, Task
from emews.core.evaluator import Evaluator
from emews.core.space import Float, Space
from emews.output.export import totals, write_csv
from emews.reporting.trials import trial_lines
from emews.store.opening import ReportReader
from emews.store.results_store import ResultsStore
from emews.training.messages import Ending, Report, endings_text

optuna = pytest.importorskip("optuna")
from emews.contrib.optuna import OptunaSampler  # noqa: E402

ACTIONS = ("continue", "stop", "complete", "pause", "exploit")
#: one answered report: its step, the answer, and whether its decision row names the report
answered = st.tuples(st.integers(1, 4), st.sampled_from(ACTIONS), st.booleans())
trial = st.tuples(st.lists(answered, min_size=1, max_size=6), st.booleans())  # reports, waited at the last


def _store(exp: Path, trials: list[tuple[list[tuple[int, str, bool]], bool]]) -> None:
    for name in ("workflow.yaml", "site.yaml"):
        (exp / name).write_text("{}\n")
    with ResultsStore(exp / "results.db", root=exp) as store:
        for t, (reports, waited) in enumerate(trials):
            task = Task(t, {"x": t / 10}, t, 0.0)
            for step, action, named in reports:
                seq = store.add_report(Report(t, 0, step, {"loss": 1.0 / step}, 0.0), 1.0 / step, 1.0 / step, task)
                if action != "continue":
                    store.add_decision(t, step, action, seq if named else None)
            if waited:
                store.add_wait(t, reports[-1][0], Outcome(t, Status.OK, 0.5, {"loss": 0.5}))
            store.add([Result.from_outcome(task, Outcome(t, Status.OK, 0.5, {"loss": 0.5}), 1.0)])


def _optuna_states(exp: Path) -> list[str]:
    """The states the Optuna adapter gives the experiment's trials (as a resumed run adds them)."""
    space = Space({"x": Float(0.0, 1.0)})
    reader = ReportReader(str(exp / "results.db"))
    try:
        evaluator = Evaluator(QueuePair(), space, workers=1, budget=None, reports=reader,
                              scheduler_end=reader.first_end, stopped_early=reader.stopped_early, metric="loss")
        sampler = OptunaSampler(seed=0)
        sampler.start(space, 1)
        sampler.evaluator = evaluator
        with ResultsStore(exp / "results.db", readonly=True) as store:
            sampler.ingest(list(store))
    finally:
        reader.close()
    return [t.state.name for t in sampler.study.trials]


@settings(deadline=None, max_examples=60)
@given(st.lists(trial, min_size=1, max_size=4))
def test_every_surface_says_the_same_ending(trials: list[tuple[list[tuple[int, str, bool]], bool]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        exp = Path(folder)
        _store(exp, trials)
        with ResultsStore(exp / "results.db", readonly=True) as store:
            write_csv(store, exp / "results.csv", ["x"])
            counts = totals(store).endings
            stopped = [store.stopped_early(t) for t in range(len(trials))]
            trials_said = trial_lines(store, "loss", live=False)[0]
        with open(exp / "results.csv", newline="") as fh:
            ended = [row["t:ended"] for row in csv.DictReader(fh)]
        assert ended == [Ending.STOPPED_EARLY.value if s else Ending.COMPLETED.value for s in stopped]
        assert counts == Counter(ended)
        assert f"ended ({endings_text(Counter(ended))})" in trials_said
        assert _optuna_states(exp) == ["PRUNED" if s else "COMPLETE" for s in stopped]
