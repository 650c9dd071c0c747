"""Resume continues the search in R (mbo, any ROptimizer through the bridge) and in the Optuna
adapter; the pre-launch ``Optimizer.check`` of sweep and mbo (reliability 3o)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from emews.testing import run_traced

from emews.cli import main
from emews.core.evaluator import Evaluator
from emews.optimizers.mbo import MBO
from emews.core.queues import QueuePair
from emews.optimizers.sweep import Sweep
from emews.config.plugins import path_options
from emews.contrib.rbridge import ROptimizer
from emews.core.space import Categorical, Float, Int, Space

from test_resume import SPACE, Answerer, history, result, resumed_run, task

needs_r = pytest.mark.skipif(importlib.util.find_spec("rpy2") is None, reason="rpy2 is not installed")

MIXED = Space({"x": Float(-5.0, 5.0), "n": Int(1, 100, log=True), "c": Categorical(("a", "b", 3))})


def mixed_history(n: int) -> list:
    points = [{"x": -4.5 + 9.0 * i / (n - 1), "n": 1 + (7 * i) % 100, "c": ("a", "b", 3)[i % 3]} for i in range(n)]
    return [result(i, p, None if i == 2 else abs(p["x"])) for i, p in enumerate(points)]


# --------------------------------------------------------------------------- R

@needs_r
def test_r_receives_the_history_as_a_results_data_frame(tmp_path: Path) -> None:
    script = tmp_path / "peek.R"
    script.write_text(
        "peek <- function(evaluator, space, options) {\n"
        "  h <- evaluator$history()\n"
        "  list(rows = nrow(h), columns = names(h), classes = vapply(h, function(v) class(v)[1], ''),\n"
        "       failed = sum(!is.finite(h$loss)), ids = h$id, c = as.character(h$c))\n"
        "}\n")
    trace, _ = resumed_run(lambda s: ROptimizer(script=script, entry="peek"), mixed_history(6), budget=6,
                           space=MIXED, main_thread=True)
    value = trace.optimizer.inner.value
    assert value["rows"] == 6 and value["failed"] == 1 and value["ids"] == [0, 1, 2, 3, 4, 5]
    assert value["columns"] == ["id", "x", "n", "c", "loss", "objective", "status", "error"]
    assert value["classes"]["x"] == "numeric" and value["classes"]["n"] == "integer"
    assert value["c"] == ["a", "b", "3", "a", "b", "3"]


@needs_r
def test_mbo_uses_the_history_as_its_initial_design() -> None:
    """With 10 earlier results and n_initial 8 there is no initial design left: the first
    proposals are the model's, one per worker; with 3 earlier results 5 design points remain."""
    full, probe = resumed_run(lambda s: MBO(seed=s, n_initial=8, candidates=300), mixed_history(10),
                              budget=16, space=MIXED, main_thread=True)
    assert len(probe.first_batch) == 2 and len(full.points) == 6
    summary = full.optimizer.inner.value
    assert summary["evaluations"] == 16 and summary["failed"] >= 1     # the history is in the model's data
    part, probe = resumed_run(lambda s: MBO(seed=s, n_initial=8, candidates=300), mixed_history(3),
                              budget=12, space=MIXED, main_thread=True)
    assert len(probe.first_batch) == 5 and len(part.points) == 9


@needs_r
def test_a_finished_mbo_resume_proposes_nothing(tmp_path: Path) -> None:
    trace, probe = resumed_run(lambda s: MBO(seed=s, n_initial=4), mixed_history(10), budget=10,
                               space=MIXED, main_thread=True, exp_dir=tmp_path)
    assert trace.points == [] and probe.first_batch is None
    report = json.loads((tmp_path / "mbo.json").read_text())
    assert report["finished"] and report["summary"]["evaluations"] == 10


@needs_r
def test_mbo_takes_in_results_of_requeued_tasks() -> None:
    queues = QueuePair()
    running = task(10, {"x": 0.25, "n": 5, "c": "b"})
    ev = Evaluator(queues, MIXED, workers=2, budget=16, history=mixed_history(10), requeue=[running])
    mbo = MBO(seed=0, n_initial=8, candidates=300)
    with Answerer(queues) as answerer:
        mbo.run(ev)
    assert 10 in answerer.answered and len(answerer.answered) == 16 - 10
    assert mbo.value["evaluations"] == 16                    # history, the requeued task and 5 new ones


@needs_r
def test_mbo_check_finds_r_and_its_packages() -> None:
    MBO().check(MIXED)                                       # R, rpy2 and the fallback's packages are here
    with pytest.raises(ValueError, match=r"mbo needs R and rpy2: install with bash tools/install-r.sh "
                                         r"and pip install 'emews-mpi\[r\]' \(R lacks the package mlrMBO\)"):
        MBO(implementation="mlrMBO").check(MIXED)            # Debian has no mlrMBO


# --------------------------------------------------------------------------- Optuna

def test_optuna_adds_the_earlier_results_as_trials_before_asking() -> None:
    optuna = pytest.importorskip("optuna")
    from emews.contrib.optuna import OptunaSampler

    def trials(opt: Any) -> list:
        return [(t.state, t.value) for t in opt.study.trials]

    earlier = history(10)
    trace, probe = resumed_run(lambda s: OptunaSampler(seed=s), earlier, budget=14, probe=trials)
    states = [s for s, _ in probe.seen]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 8 and states.count(optuna.trial.TrialState.FAIL) == 2
    assert sorted(v for s, v in probe.seen if v is not None) == sorted(r.loss for r in earlier if r.ok)
    assert len(trace.points) == 4
    study = trace.optimizer.inner.study
    assert len(study.trials) == 14 and all(t.state.is_finished() for t in study.trials)


@pytest.mark.parametrize("sampler", ["TPESampler", "RandomSampler"])
def test_a_seeded_optuna_sampler_resumed_proposes_none_of_the_earlier_points(sampler: str) -> None:
    """The resumed sampler drew with the seed of the first run again: TPE's random start-up trials and
    a RandomSampler proposed the earlier run's first points a second time."""
    pytest.importorskip("optuna")
    from emews.contrib.optuna import OptunaSampler

    first = run_traced(lambda s: OptunaSampler(seed=s, sampler=sampler), seed=3, budget=6, space=SPACE, workers=1)
    resumed, _ = resumed_run(lambda s: OptunaSampler(seed=s, sampler=sampler), first.results, budget=12, seed=3,
                             workers=1)
    again, _ = resumed_run(lambda s: OptunaSampler(seed=s, sampler=sampler), first.results, budget=12, seed=3,
                           workers=1)
    assert len(resumed.points) == 6 and not [p for p in resumed.points if p in first.points]
    assert again.points == resumed.points  # a resume is as repeatable as a run


# --------------------------------------------------------------------------- check before launch

BAD_LINES = {
    "broken JSON": ('{"x1": 0.4,', "4: not a JSON object"),
    "out of range": ('{"x1": 7}', "4: x1: value 7.0 is outside"),
    "extra key": ('{"x1": 0.4, "y": 1}', "4: y: not a parameter of this space"),
    "missing key": ('{}', "4: x1: missing from point"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_sweep_check_reads_the_whole_points_file(case: str, tmp_path: Path) -> None:
    line, message = BAD_LINES[case]
    upf = tmp_path / "upf.txt"
    upf.write_text('{"x1": 0.1}\n{"x1": 0.2}\n{"x1": 0.3}\n' + line + '\n{"x1": 0.5}\n')
    space = Space({"x1": Float(0.0, 1.0)})
    with pytest.raises(ValueError) as caught:
        Sweep(file=upf).check(space)
    assert str(caught.value).startswith(f"{upf}:{message}")


def test_emews_check_refuses_a_bad_points_file_before_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture) -> None:
    """Reliability 3o: a bad line in the middle was found only after the points before it ran."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "obj.py").write_text("def run(p):\n    return p['x1']\n")
    (tmp_path / "bad_middle.jsonl").write_text('{"x1": 0.1}\n{"x1": 0.2}\n{"x1": 0.3}\n{"x1": 0.4,\n{"x1": 0.5}\n')
    (tmp_path / "upf.yaml").write_text(
        "optimizer: {name: sweep, options: {file: bad_middle.jsonl}}\nobjective: {module: obj.py}\n"
        "space:\n  x1: {type: float, lower: 0, upper: 1}\nbudget: {evaluations: 10}\n")
    assert main(["check", "upf.yaml"]) == 2
    err = capsys.readouterr().err
    assert "upf.yaml: optimizer.options.file: " in err and "bad_middle.jsonl:4: not a JSON object" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad_middle.jsonl", "obj.py", "upf.yaml"]


def test_sweep_file_accepts_str_and_path(tmp_path: Path) -> None:
    upf = tmp_path / "upf.txt"
    upf.write_text('{"x": 1.0, "n": 2, "tag": "t"}\n')
    assert Sweep(file=str(upf)).file == Sweep(file=upf).file == upf
    Sweep(file=str(upf)).check(SPACE)
    assert path_options(Sweep) == ["file"] and path_options(ROptimizer) == ["script"]
