"""Plug-ins that start (issue 24, deliverable 6): every Optuna sampler the adapter offers runs, the
extras install what they need and a missing one is refused by ``emews check``; ``GestGenerator``'s
initial design lets generators that need data start; a generator that cannot handle the space's
types is refused by ``emews check`` (one line, exit 2)."""

from __future__ import annotations

import configparser
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from emews.core.optimizer import Optimizer
from emews.testing import OptimizerConformance, mixed_space, run_traced
from testutil import REPO, write_workflow

pytest.importorskip("gest_api")
optuna = pytest.importorskip("optuna")

from emews.contrib.gest import GestGenerator  # noqa: E402
import emews.contrib.optuna as adapter  # noqa: E402
from emews.contrib.optuna import OptunaSampler  # noqa: E402

HERE = Path(__file__).resolve().parent
LIMITED = HERE / "gest_limited.py"

#: every sampler of ``optuna.samplers`` that OptunaSampler(sampler=NAME) builds without other options
SAMPLERS = ["TPESampler", "CmaEsSampler", "GPSampler", "QMCSampler", "RandomSampler", "NSGAIISampler",
            "NSGAIIISampler"]


def test_every_sampler_the_adapter_offers_is_listed() -> None:
    """A sampler Optuna adds is tried here too (those needing options of their own aside)."""
    # options of their own (search_space; fixed_params and a base sampler), or a finite space (a float
    # needs a step, which emews' floats do not have)
    needing_options = {"GridSampler", "PartialFixedSampler", "BruteForceSampler"}
    offered = {name for name in optuna.samplers.__all__ if name.endswith("Sampler") and not name.startswith("Base")}
    assert offered - needing_options == set(SAMPLERS)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_each_optuna_sampler_runs_past_its_startup_trials(sampler: str) -> None:
    """Past the random startup trials, where CMA-ES needs cmaes and GP torch (12 > GPSampler's 10:
    with 2 in flight, the 12th point is asked for with at least 10 results told)."""
    trace = run_traced(lambda seed: OptunaSampler(seed=seed, sampler=sampler), budget=12, workers=2,
                       timeout=300)
    assert not trace.hung and trace.summary is not None and trace.summary.error is None, \
        trace.summary and trace.summary.error
    assert len(trace.points) == 12


def _extra(name: str) -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg")
    lines = parser["options.extras_require"][name].split("\n")
    return {re.split(r"[<>=;\[ ]", line.strip(), maxsplit=1)[0].lower() for line in lines if line.strip()}


@pytest.mark.parametrize("extra", ["optuna", "contrib", "all"])
def test_the_extras_install_what_every_sampler_needs(extra: str) -> None:
    needed = {"optuna", *(package for packages in adapter.NEEDS.values() for package in packages)}
    assert needed <= _extra(extra), needed - _extra(extra)


def test_the_readme_names_the_extra() -> None:
    assert "pip install 'emews-mpi[optuna]'" in (REPO / "README.md").read_text()
    assert "emews-mpi[optuna]" in (REPO / "emews" / "contrib" / "optuna.py").read_text()


def test_a_sampler_whose_package_is_missing_is_refused_by_check(emews_cmd, tmp_path: Path) -> None:
    """cmaes hidden (a module that fails to import, as an absent one does): check says so, not the run."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "cmaes.py").write_text("raise ModuleNotFoundError(\"No module named 'cmaes'\", name='cmaes')\n")
    emews_cmd.env["PYTHONPATH"] = f"{hidden}:{emews_cmd.env.get('PYTHONPATH', '')}"
    wf = write_workflow(tmp_path, optimizer={"name": "emews.contrib.optuna:OptunaSampler",
                                             "options": {"sampler": "CmaEsSampler", "seed": 1}})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "optimizer.options" in lines[0] and "cmaes" in lines[0] and "emews-mpi[optuna]" in lines[0]



@pytest.mark.parametrize(("options", "key", "says"), [
    ({"sampler": "TPE"}, "sampler", ["unknown Optuna sampler 'TPE'; did you mean 'TPESampler'?", "allowed: ", "RandomSampler"]),
    ({"sampler": "optuna.samplers.TPESampler"}, "sampler", ["did you mean 'TPESampler'?"]),
    ({"sampler": "MedianPruner"}, "sampler", ["MedianPruner is an Optuna pruner", "trial_scheduler: {name: median}"]),
    ({"sampler": "PartialFixedSampler"}, "sampler", ["takes no seed", "allowed: "]),
    ({"sampler": "TPESampler", "n_startup": 3}, "n_startup",
     ["unknown key 'n_startup' of TPESampler; did you mean 'n_startup_trials'?", "allowed: sampler, seed, "]),
    ({"sampler": "TPESampler", "pruner": "SuccessiveHalvingPruner"}, "pruner",
     ["SuccessiveHalvingPruner is an Optuna pruner", "trial_scheduler: {name: asha}"]),
    ({"pruner": "HyperbandPruner"}, "pruner", ["trial_scheduler: {name: hyperband}"]),
])
def test_an_optuna_option_that_is_not_the_samplers_is_one_line_naming_its_key(
        emews_cmd, tmp_path: Path, options: dict, key: str, says: list[str]) -> None:
    """An Optuna user's first tries: a misspelt sampler said 'cannot build optimizer ...:
    AttributeError: module 'optuna.samplers' has no attribute 'TPE' (at .../optuna.py:46)', a
    misspelt keyword or a pruner said only 'optimizer.options: TPESampler.__init__() got an
    unexpected keyword argument ...': now one line naming optimizer.options.KEY, a near name, what
    is allowed, and for a pruner the trial scheduler that stops trials in emews."""
    wf = write_workflow(tmp_path, optimizer={"name": "emews.contrib.optuna:OptunaSampler", "options": options})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"emews: error: {wf}: optimizer.options.{key}: "), lines[0]
    assert all(part in lines[0] for part in says), lines[0]
    assert not (tmp_path / "experiments").exists()

# -- GestGenerator: an initial design, and spaces a generator cannot handle ----------------------

class TestGestInitialDesign(OptimizerConformance):
    """A generator that cannot suggest before it has data, started by ``initial_points``."""

    def make_optimizer(self, seed: int) -> Optimizer:
        return GestGenerator(f"{LIMITED}:NeedsData", {"seed": seed}, initial_points=4, seed=seed)

    def test_the_design_comes_first_and_the_generator_is_asked_only_with_data(self) -> None:
        made: list[GestGenerator] = []

        def factory(seed: int) -> Optimizer:
            made.append(self.make_optimizer(seed))
            return made[-1]

        trace = run_traced(factory, budget=12, workers=3)
        assert trace.summary is not None and trace.summary.error is None, trace.summary.error
        generator = made[0].generator
        assert len(trace.points) == 12 and generator.asked_without_data == 0
        assert len(generator.ingested) == 12  # the design's results too


def test_gest_without_an_initial_design_cannot_start_a_generator_that_needs_data() -> None:
    """What the option is for: without it the run fails on the generator's first suggest."""
    trace = run_traced(lambda seed: GestGenerator(f"{LIMITED}:NeedsData", {"seed": seed}), budget=4)
    assert trace.summary is not None and "no data contained in generator" in str(trace.summary.error)


@pytest.fixture
def torch_default_dtype():
    """Xopt's Bayesian generators set torch's default dtype to float64 when imported: put it back, so
    that later tests in this process (the torch digits model) build float32 models as users' do."""
    torch = pytest.importorskip("torch")
    dtype = torch.get_default_dtype()
    yield
    torch.set_default_dtype(dtype)


def test_xopt_expected_improvement_runs_with_an_initial_design(torch_default_dtype) -> None:
    pytest.importorskip("xopt")
    from emews.core.space import Float, Space

    space = Space({"x": Float(-2.0, 2.0), "y": Float(-1.0, 1.0)})
    trace = run_traced(lambda seed: GestGenerator(
        "xopt.generators.bayesian.expected_improvement:ExpectedImprovementGenerator",
        initial_points=3, seed=seed), budget=5, workers=1, space=space, timeout=300)
    assert trace.summary is not None and trace.summary.error is None, trace.summary.error
    assert len(trace.points) == 5


@pytest.mark.parametrize("generator", [f"{LIMITED}:ContinuousOnly",
                                       "xopt.generators.ga.cnsga:CNSGAGenerator"], ids=["declared", "xopt-cnsga"])
def test_check_refuses_a_generator_that_cannot_handle_the_spaces_types(emews_cmd, tmp_path: Path,
                                                                     generator: str) -> None:
    if generator.startswith("xopt"):
        pytest.importorskip("xopt")
    space = {"x": {"type": "float", "lower": 0.0, "upper": 1.0},
             "act": {"type": "categorical", "values": ["relu", "tanh"]}}
    wf = write_workflow(tmp_path, optimizer={"name": "emews.contrib.gest:GestGenerator",
                                             "options": {"generator": generator, "categories": "indices"}},
                        space=space)
    continuous = write_workflow(tmp_path, name="continuous", optimizer={
        "name": "emews.contrib.gest:GestGenerator", "options": {"generator": generator}},
        space={"x": space["x"], "y": {"type": "int", "lower": 1, "upper": 4}})
    # both checks in one interpreter, each through the command's own main with its stderr apart:
    # a process per check imported Xopt (and PyTorch) twice, seconds each
    (refused, refused_err), (accepted, accepted_err) = checks_in_one_process(emews_cmd, wf, continuous)
    assert refused == 2, refused_err
    lines = refused_err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in refused_err, refused_err
    assert "optimizer.options" in lines[0] and ("discrete" in lines[0] or "act" in lines[0]), lines[0]
    assert accepted == 0, accepted_err


CHECKS = """\
import contextlib, io, json, sys
from emews.cli import main
def check(path):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["check", path])
    return [code, err.getvalue()]
print(json.dumps([check(path) for path in sys.argv[1:]]))
"""


def checks_in_one_process(emews_cmd, *workflows: Path) -> list[tuple[int, str]]:
    """``emews check W`` for each workflow, in one Python (the command's ``main``): each exit status
    with what it wrote to stderr."""
    proc = subprocess.run([sys.executable, "-c", CHECKS, *map(str, workflows)], cwd=emews_cmd.cwd,
                          env=emews_cmd.env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [(code, err) for code, err in json.loads(proc.stdout.splitlines()[-1])]
