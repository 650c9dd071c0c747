"""Every optimizer emews ships, given a wrong option value and a misspelt option name, in the
workflow file or with ``--set``: one line naming ``optimizer.options.NAME`` (the file as typed, or
``--set``) and what is allowed, exit 2, no traceback, no experiment made.

An optimizer's own refusal (its constructor's or ``check``'s ValueError) was said as
``optimizer.options: backlog must be at least 1``, naming the section, not the option."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from testutil import TRAINER, refused_in_one_line, write_workflow

ME = "def run():\n    pass\n"

#: optimizer -> (its needed options, a wrong value: (option, value, what the line says after the key))
WRONG_VALUES: dict[str, tuple[dict[str, Any], str, Any, str]] = {
    "random": ({}, "backlog", 0, "must be at least 1, not 0"),
    "sweep": ({}, "levels", 0, "must be at least 1, not 0"),
    "ga": ({}, "strategy", "nsga", "unknown strategy 'nsga' (allowed: simple, mu_plus_lambda, async)"),
    "bayes": ({}, "acq_func", "EIPS", "invalid value 'EIPS'; did you mean 'EI'? (allowed: EI, PI, LCB)"),
    "mbo": ({}, "infill", "xx", "invalid value 'xx' (allowed: cb, ei)"),
    "hyperspace": ({}, "split", ["mode"], "'mode' is not a numeric dimension of the space with more than "
                   "one value (allowed: x)"),
    "bohb": ({}, "top_fraction", 2.0, "must be < 1, not 2.0"),
    "eqpy": ({"me": "me.py"}, "batch", "xml", "invalid value 'xml' (allowed: 'semicolon' or 'json')"),
    "eqsql": ({"me": "me.py"}, "config", "list.yaml", "PATH/list.yaml holds no mapping (allowed: the ME's YAML configuration file)"),
    "emews.contrib.optuna:OptunaSampler": ({}, "sampler", "TPE", "unknown Optuna sampler 'TPE'"),
    "emews.contrib.nevergrad:NevergradOptimizer": (
        {}, "optimizer", "TwoPointDE", "unknown Nevergrad optimizer 'TwoPointDE'; did you mean 'TwoPointsDE'? "
        "(allowed: a name of nevergrad.optimizers.registry"),
    "emews.contrib.gest:GestGenerator": (
        {}, "generator", "nowhere_48.py:Gen", "generator file nowhere_48.py does not exist (allowed: "
        "package.module:Class or file.py:Class)"),
    "emews.contrib.rbridge:ROptimizer": ({"entry": "search"}, "script", None, "ROptimizer needs one (allowed: the "
                                         "path of an R file)"),
}
#: optimizer -> (a misspelt option, the one meant); an ROptimizer's are its R function's: tests/optimizers/test_r_options.py
MISSPELT: dict[str, tuple[str, str]] = {
    "random": ("seeed", "seed"),
    "sweep": ("levls", "levels"),
    "ga": ("populaton", "population"),
    "bayes": ("acqfunc", "acq_func"),
    "mbo": ("ntre", "ntree"),
    "hyperspace": ("overlp", "overlap"),
    "bohb": ("top_fracton", "top_fraction"),
    "eqpy": ("bach", "batch"),
    "eqsql": ("exp_idd", "exp_id"),
    "emews.contrib.optuna:OptunaSampler": ("n_startup_trial", "n_startup_trials"),
    "emews.contrib.nevergrad:NevergradOptimizer": ("optimzer", "optimizer"),
    "emews.contrib.gest:GestGenerator": ("genrator", "generator"),
}
#: the package each adapter needs
NEEDS = {"optuna": "optuna", "nevergrad": "nevergrad", "gest": "gest_api", "rbridge": "rpy2"}


def test_the_tables_cover_every_built_in_optimizer() -> None:
    from emews.config.plugins import OPTIMIZERS

    assert set(OPTIMIZERS.builtins) <= set(WRONG_VALUES) and set(OPTIMIZERS.builtins) <= set(MISSPELT)


def _needs(optimizer: str) -> None:
    for word, package in NEEDS.items():
        if f"contrib.{word}:" in optimizer and importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")


def _workflow(folder: Path, optimizer: str, options: dict[str, Any]) -> Path:
    (folder / "me.py").write_text(ME)
    (folder / "cfg.yaml").write_text("samples: 4\n")
    (folder / "list.yaml").write_text("- 1\n- 2\n")
    if optimizer == "eqsql":
        options = {"config": "cfg.yaml", **options}
    return write_workflow(folder, optimizer={"name": optimizer, "options": options})


@pytest.mark.parametrize("optimizer", list(WRONG_VALUES))
def test_a_wrong_option_value_names_the_option(optimizer: str, tmp_path: Path, capsys: pytest.CaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _needs(optimizer)
    monkeypatch.chdir(tmp_path)
    needed, name, value, says = WRONG_VALUES[optimizer]
    options = {**needed, **({} if value is None else {name: value})}
    path = _workflow(tmp_path, optimizer, options)
    line = refused_in_one_line(capsys, path)
    says = says.replace("PATH", str(tmp_path))
    assert line.startswith(f"emews: error: {path}: optimizer.options.{name}: {says}"), line
    if value is not None:  # the same value given with --set is --set's, named as typed
        path = _workflow(tmp_path, optimizer, needed)
        line = refused_in_one_line(capsys, path, "--set", f"optimizer.options.{name}={json.dumps(value)}")
        assert line.startswith(f"emews: error: --set: optimizer.options.{name}: {says}"), line


@pytest.mark.parametrize("optimizer", list(MISSPELT))
def test_a_misspelt_option_name_names_it_and_the_one_meant(optimizer: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _needs(optimizer)
    monkeypatch.chdir(tmp_path)
    wrong, meant = MISSPELT[optimizer]
    needed = WRONG_VALUES[optimizer][0]
    path = _workflow(tmp_path, optimizer, {**needed, wrong: 1})
    line = refused_in_one_line(capsys, path)
    assert line.startswith(f"emews: error: {path}: optimizer.options.{wrong}: unknown "), line
    assert f"did you mean {meant!r}?" in line and "(allowed: " in line and meant in line.split("(allowed: ")[1], line
    path = _workflow(tmp_path, optimizer, needed)
    line = refused_in_one_line(capsys, path, "--set", f"optimizer.options.{wrong}=1")
    assert line.startswith(f"emews: error: --set: optimizer.options.{wrong}: unknown "), line


#: trial scheduler -> (a wrong option, its value, what the line says after the key); the same translation
TRIAL_SCHEDULER_VALUES: dict[str, tuple[str, Any, str]] = {
    "asha": ("grace_period", 0, "must be at least 1, got 0"),
    "hyperband": ("reduction_factor", 1, "must be at least 2, got 1"),
    "median": ("min_samples", 0, "must be at least 1, got 0"),
    "pbt": ("mutations", ["nope"], "name parameters the space does not search: nope (allowed: x)"),
}


@pytest.mark.parametrize("scheduler", list(TRIAL_SCHEDULER_VALUES))
def test_a_trial_schedulers_refusal_names_the_option(scheduler: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture) -> None:
    """'trial_scheduler.options: need 1 <= grace_period <= max_t, got ...' named the section."""
    name, value, says = TRIAL_SCHEDULER_VALUES[scheduler]
    path = write_workflow(tmp_path, trial_scheduler={"name": scheduler, "options": {name: value}},
                          objective={"module": str(TRAINER), "metric": "loss"})
    line = refused_in_one_line(capsys, path)
    assert line.startswith(f"emews: error: {path}: trial_scheduler.options.{name}: {says}"), line
