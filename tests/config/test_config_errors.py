"""Bad input: one clear message naming file, key and what is allowed; exit 2; nothing created."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from testutil import FAULTY, write_workflow
from emews.cli import main

ISSUE_WORKFLOW = """\
optimizer: {name: random, options: {seed: 1}}
objective: {module: objectives/ackley.py, function: run, metric: value, direction: minimize}
space:
  x1: {type: float, lower: -32.768, upper: 32.768}
  lr: {type: float, lower: 1.0e-5, upper: 1.0e-1, log: true}
  units: {type: int, lower: 16, upper: 512}
  act: {type: categorical, values: [relu, tanh, sigmoid]}
  batch: {type: ordered, values: [16, 32, 64, 128]}
  epochs: {type: constant, value: 10}
budget: {evaluations: 200}
task: {timeout: 60, isolation: process}
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_the_issue_workflow_loads_as_written(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "issue.yaml"
    path.write_text(ISSUE_WORKFLOW)
    assert main(["check", str(path)]) == 0
    assert "ok" in capsys.readouterr().out


def _space(**extra):
    return {"x": {"type": "float", "lower": -1.0, "upper": 1.0}, **extra}


BROKEN = {
    "unknown top-level key": (dict(optimiser={"name": "random"}), "optimiser", "optimizer, objective"),
    "unknown task key": (dict(task={"timout": 5}), "task.timout", "timeout, isolation"),
    "wrong type": (dict(budget={"evaluations": "many"}), "budget.evaluations", None),
    "lower above upper": (dict(space=_space(u={"type": "int", "lower": 5, "upper": 1})), "space.u", None),
    "empty categorical": (dict(space=_space(c={"type": "categorical", "values": []})), "space.c", None),
    # Python's 1 == 1.0: the space matched 1.0 to 1, so no optimizer could hand the objective 1.0
    "1 and 1.0 in one categorical": (dict(space=_space(c={"type": "categorical", "values": [1, True, "1", 1.0]})),
                                     "space.c: values must not repeat: 1 and 1.0 are one value", None),
    "2.0 and 2 in one ordered": (dict(space=_space(o={"type": "ordered", "values": [2.0, 3, 2]})),
                                 "space.o: values must not repeat: 2.0 and 2 are one value", None),
    "unknown parameter type": (dict(space=_space(c={"type": "colour"})), "space.c", "int"),
    "bad isolation": (dict(task={"isolation": "docker"}), "task.isolation", "process"),
    "missing objective file": (dict(objective={"module": "nowhere/obj.py"}), "objective.module", None),
    "unimportable module": (dict(objective={"module": "no_such_module_xyz"}), "objective.module", None),
    "missing function": (dict(objective={"module": str(FAULTY), "function": "train"}), "objective.function", None),
    "unknown optimizer": (dict(optimizer={"name": "simulated-annealing"}), "optimizer.name", "random"),
    "unknown optimizer option": (dict(optimizer={"name": "random", "options": {"sede": 1}}),
                                 "optimizer.options", "seed"),
    "zero ranks per task": (dict(task={"ranks": 0}), "task.ranks", "a number of ranks"),
    "ranks naming nothing": (dict(task={"ranks": "model_size"}), "task.ranks", "a parameter whose value"),
    "ranks function file missing": (dict(task={"ranks": "nowhere/size.py:ranks"}), "task.ranks", None),
    "ranks function missing": (dict(task={"ranks": f"{FAULTY}:no_such_function"}), "task.ranks", None),
    # what emews.run accepts (optimizer="bayes", budget=60) written into the file: plain words, not pydantic's
    "optimizer as a word": (dict(optimizer="random"), "optimizer: must be a mapping (key: value), not str 'random'",
                            "a mapping with the keys name, options"),
    "budget as a number": (dict(budget=20), "budget: must be a mapping (key: value), not int 20", "evaluations"),
    "command as one string": (dict(objective={"command": "python3 nt3.py"}),
                              "objective.command: must be a list", None),
    "command's script missing": (dict(objective={"command": ["python3", "nt4.py"]}),
                                 "objective.command: the script 'nt4.py' that python3 runs does not exist",
                                 "relative to the current or the workflow's folder"),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_bad_workflow_gets_one_message_naming_file_and_key(case: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    sections, key, allowed = BROKEN[case]
    path = write_workflow(tmp_path, **sections)
    for command in (["check", str(path)], ["launch", str(path), "--site", "local", "--workers", "2"]):
        code = main(command)
        err = capsys.readouterr().err
        assert code == 2, err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err
        assert lines[0].startswith("emews: error: ") and str(path) in lines[0] and key in lines[0], lines[0]
        if allowed:
            assert "allowed:" in lines[0] and allowed in lines[0], lines[0]
        assert "Traceback" not in err
    assert not (tmp_path / "experiments").exists()


def test_unimportable_objective_reports_the_import_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "broken_obj.py"
    bad.write_text("import numpy\nimport not_a_real_dependency\n\ndef run(p):\n    return 1.0\n")
    path = write_workflow(tmp_path, objective={"module": str(bad)})
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "objective.module" in err and "not_a_real_dependency" in err


@pytest.mark.parametrize("written", ["objectives/modle.py", "objectives/model", "objectives/Model.py"])
def test_a_misspelt_objective_file_says_which_file_was_meant(written: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "objectives").mkdir()
    (tmp_path / "objectives" / "model.py").write_text("def run(p):\n    return 1.0\n")
    (tmp_path / "objectives" / "notes.txt").write_text("")
    path = write_workflow(tmp_path, objective={"module": written})
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: objective.module: objective file {written} does not exist; " in err
    assert "did you mean 'objectives/model.py'?" in err and "allowed: a path to a .py file" in err


@pytest.mark.parametrize("where, name, objective, key, words", [
    ("proj", "random.py", "proj/random.py", "objective.module", "hides Python's module 'random'"),
    (".", "emews.py", None, "objective.module", "hides emews itself"),
    (".", "yaml.py", ["python3", "proj/model.py"], "objective.command", "hides Python's module 'yaml'"),
])
def test_a_file_that_hides_a_module_the_ranks_import_is_refused(where: str, name: str, objective: object, key: str,
                                                                words: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    """An objective saved as random.py (or an emews.py in the launch folder) passed check, then every
    rank (python -m emews, the folder first on sys.path) died in a traceback from tempfile's
    'from random import Random', or ran the user's emews.py and the job ended saying nothing."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "model.py").write_text("print('loss 1.0')\n")
    (tmp_path / where / name).write_text("def run(p):\n    return 1.0\n")
    if objective is None:
        sections = {}
    elif isinstance(objective, list):
        sections = {"objective": {"command": objective, "metric": "loss"}}
    else:
        sections = {"objective": {"module": objective}}
    path = write_workflow(tmp_path, **sections)
    for command in (["check", str(path)], ["launch", str(path), "--workers", "2"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{path}: {key}: {(tmp_path / where / name).resolve()} {words}" in err, err
        assert "rename it" in err
        assert ("`python -m emews` run in its folder runs it too: use `emews`" in err) == (name == "emews.py"), err
    assert not (tmp_path / "experiments").exists()


def test_files_with_names_of_no_imported_module_are_fine(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for name in ("model.py", "test.py", "utils.py", "train.py", "site.py"):
        (tmp_path / name).write_text("def run(p):\n    return 1.0\n")
    path = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py")})
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("written", ["wf.yml", "fw.yaml", "WF.yaml"])
def test_a_misspelt_workflow_file_says_which_file_was_meant(written: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    write_workflow(tmp_path, name="wf")
    for command in ("check", "launch"):
        assert main([command, written]) == 2
        err = capsys.readouterr().err
        assert err == f"emews: error: {written}: workflow file does not exist; did you mean 'wf.yaml'?\n", err
    assert not (tmp_path / "experiments").exists()


@pytest.mark.parametrize("workflow", ["asha", "pbt", "ddp"])
def test_a_built_in_torch_workflow_without_torch_says_how_to_install_it_at_check(
        workflow: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Without the torch extra, check said ok and launch failed every evaluation in the objective's
    setup (No module named 'torch'); now check names the extra to install, as mbo names R's."""
    monkeypatch.setitem(sys.modules, "torch", None)  # a venv without emews-mpi[torch]: import torch fails
    assert main(["check", workflow]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert ": objective.module: " in err and "No module named 'torch'" in err and "pip install 'emews-mpi[torch]'" in err


@pytest.mark.parametrize("source, key, words", [
    ("def run():\n    return 1.0\n", "objective.function", "run() cannot be called as run(params) or run(params, context)"),
    ("def run(a, b, c):\n    return 1.0\n", "objective.function", "run(a, b, c) cannot be called as run(params)"),
    ("def run(*, params):\n    return 1.0\n", "objective.function", "run(*, params) cannot be called as run(params)"),
    ("def setup(a, b):\n    pass\n\ndef run(p):\n    return 1.0\n", "objective.module",
     "model.py: setup(a, b) cannot be called as setup() or setup(ctx)"),
    ("def setup(*, device):\n    pass\n\ndef run(p):\n    return 1.0\n", "objective.module",
     "setup(*, device) cannot be called as setup() or setup(ctx)"),
    ("def teardown(ctx):\n    pass\n\ndef run(p):\n    return 1.0\n", "objective.module",
     "teardown(ctx) cannot be called as teardown()"),
])
def test_an_objective_whose_functions_cannot_be_called_is_refused_by_check(
        source: str, key: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A first day's `def run():` passed check and failed every evaluation with a TypeError raised
    in emews' own call: check now names the function, its signature and the calls allowed."""
    (tmp_path / "model.py").write_text(source)
    path = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py")})
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"emews: error: {path}: {key}: ") and words in err, err


@pytest.mark.parametrize("source", ["def run(params):\n    return 1.0\n", "def run(params, ctx):\n    return 1.0\n",
                                    "def run(*args):\n    return 1.0\n", "def run(p, ctx=None, *, k=1):\n    return 1.0\n",
                                    "def setup():\n    pass\n\ndef teardown():\n    pass\n\ndef run(p):\n    return 1.0\n",
                                    "def setup(ctx=None):\n    pass\n\ndef run(p):\n    return 1.0\n",
                                    "def setup(ctx):\n    pass\n\ndef run(p):\n    return 1.0\n",
                                    "import functools\nrun = functools.partial(lambda scale, p: scale, 1.0)\n"])
def test_every_documented_objective_signature_passes_check(source: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "model.py").write_text(source)
    path = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py")})
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("where, raised", [("__init__", "RuntimeError('bad init')"),
                                           ("__init__", "ModuleNotFoundError(\"No module named 'cmaes'\")"),
                                           ("check", "KeyError('lr')")])
@pytest.mark.parametrize("command", ["check", "launch"])
def test_a_custom_optimizer_that_cannot_be_built_is_named_in_one_line(
    where: str, raised: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A plug-in whose ``__init__`` or ``check`` raised anything but TypeError/ValueError made ``emews check``
    and ``emews launch`` print a traceback through emews' own frames and exit 1."""
    (tmp_path / "my_opt.py").write_text(
        "from emews import Optimizer\n\n"
        "class Mine(Optimizer):\n"
        f"    def {where}(self, *args, **kwargs):\n"
        f"        raise {raised}\n\n"
        "    def run(self, evaluator):\n"
        "        pass\n"
    )
    path = write_workflow(tmp_path, optimizer={"name": f"{tmp_path / 'my_opt.py'}:Mine", "options": {}})
    extra = ["--workers", "1", "--exp-dir", str(tmp_path / "exp")] if command == "launch" else []
    assert main([command, str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "optimizer" in err and raised.split("(")[0] in err and "my_opt.py" in err, err
    assert not (tmp_path / "exp").exists()


def test_a_custom_optimizers_own_configuration_error_keeps_its_key(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A plug-in that raises emews' ConfigError (its key, what is allowed) is not rewrapped as "cannot
    build optimizer: ConfigError: ..." under the key ``optimizer`` (review of the catch-all above)."""
    (tmp_path / "my_opt.py").write_text(
        "from emews import Optimizer\nfrom emews.core.errors import ConfigError\n\n"
        "class Mine(Optimizer):\n"
        "    def check(self, space):\n"
        "        raise ConfigError('needs a float parameter', key='space', allowed='float parameters')\n\n"
        "    def run(self, evaluator):\n"
        "        pass\n"
    )
    path = write_workflow(tmp_path, optimizer={"name": f"{tmp_path / 'my_opt.py'}:Mine", "options": {}})
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "space: needs a float parameter" in err and "cannot build optimizer" not in err, err


def test_malformed_yaml_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("optimizer: {name: random\nbudget: {evaluations: 3}\n")
    assert main(["launch", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "line" in err and "malformed YAML" in err
    assert not (tmp_path / "experiments").exists()


@pytest.mark.parametrize("text, where, words", [
    ("space:\n  x: {type: float, lower: 0, upper: 1}\n   y: {type: float, lower: 0, upper: 1}\n",
     "line 3, column 4", "this line does not line up with the keys above it"),
    ("space:\n  x: {type: float, lower: 0, upper: 1}\n y: {type: float, lower: 0, upper: 1}\n",
     "line 3, column 2", "this line does not line up with the keys above it"),
    ("budget: 10\n  evaluations: 5\n", "line 2, column 14", "a 'key: value' where a plain value was expected"),
    ("space:\n\tx: {type: float, lower: 0, upper: 1}\n", "line 2, column 1", "indent with spaces, not tabs"),
])
def test_an_indentation_mistake_is_named_in_words_not_parser_tokens(text: str, where: str, words: str, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """PyYAML says "expected <block end>, but found '<block mapping start>'" for a line indented one
    space too far: the message says what is wrong with the line instead."""
    path = tmp_path / "wf.yaml"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: malformed YAML: {where}: " in err and words in err, err
    assert "<block" not in err


def test_unknown_site_lists_the_available_ones(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_workflow(tmp_path)
    assert main(["launch", str(path), "--site", "atlantis"]) == 2
    err = capsys.readouterr().err
    assert "atlantis" in err and "local" in err and "summit" in err
    assert not (tmp_path / "experiments").exists()


def test_unknown_workflow_lists_built_ins(capsys: pytest.CaptureFixture) -> None:
    assert main(["check", "no-such-workflow"]) == 2
    err = capsys.readouterr().err
    assert "no-such-workflow" in err and "random" in err and "sweep" in err


def test_existing_experiment_dir_is_refused_untouched(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_workflow(tmp_path)
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "precious.txt").write_text("keep me")
    assert main(["launch", str(path), "--exp-dir", str(exp)]) == 2
    assert "--exp-dir" in capsys.readouterr().err
    assert [p.name for p in exp.iterdir()] == ["precious.txt"]


def test_set_overrides_workflow_keys(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_workflow(tmp_path)
    assert main(["check", str(path), "--set", "budget.evaluations=7"]) == 0
    assert "budget 7" in capsys.readouterr().out
    assert main(["check", str(path), "--set", "budget.evaluations=-1"]) == 2
    err = capsys.readouterr().err
    assert "budget.evaluations" in err


def test_space_file_takes_a_candle_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from testutil import CANDLE_GA
    import json

    (tmp_path / "params.json").write_text(json.dumps(CANDLE_GA))
    path = write_workflow(tmp_path, space={"file": "params.json"})
    assert main(["check", str(path)]) == 0
    assert "7 parameters" in capsys.readouterr().out


def test_yaml_scientific_notation_without_dot_is_a_number(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "wf.yaml"
    text = yaml.safe_dump({"optimizer": {"name": "random"}, "objective": {"module": str(FAULTY)},
                           "budget": {"evaluations": 3}})
    path.write_text(text + "space:\n  lr: {type: float, lower: 1e-5, upper: 1e-1, log: true}\n")
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("ranks, space, checked", [
    (3, None, 0),                                                   # a fixed size above --workers 2
    ("k", {"k": {"type": "int", "lower": 1, "upper": 4}}, 0),        # a size parameter that can exceed it
    ("k", {"k": {"type": "ordered", "values": [1, 2.5]}}, 2),       # a size that is no whole number
])
def test_task_sizes_the_job_cannot_run_are_refused_at_launch(ranks, space, checked: int, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture) -> None:
    """Too wide for the job: refused at launch (check knows no worker count); no size on any job
    (2.5 ranks): refused by check already."""
    path = write_workflow(tmp_path, task={"ranks": ranks}, **({"space": _space(**space)} if space else {}))
    assert main(["check", str(path)]) == checked, capsys.readouterr().err
    capsys.readouterr()
    code = main(["launch", str(path), "--site", "local", "--workers", "2"])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and "task.ranks" in lines[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "experiments").exists()


@pytest.mark.parametrize(("site", "key", "allowed"), [
    ("frontier", "scheduler.account", "--set scheduler.account=PROJECT"),
    ("locl", "site", "local"),
])
def test_check_refuses_a_site_as_launch_would_before_saying_ok(site: str, key: str, allowed: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``emews check WF --site S`` is the check before submitting: it said "site frontier: ok" and the
    launch then refused the missing account; and it printed the workflow's "ok" before a site error."""
    monkeypatch.delenv("EMEWS_ACCOUNT", raising=False)
    path = write_workflow(tmp_path)
    for command in (["check", str(path), "--site", site], ["launch", str(path), "--site", site, "--dry-run"]):
        code = main(command)
        out, err = capsys.readouterr()
        assert code == 2 and out == "", (out, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and key in lines[0] and allowed in lines[0], err
    assert main(["check", str(path), "--site", site if site != "locl" else "local", "--set",
                 "scheduler.account=ABC123"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("site ")


@pytest.mark.parametrize("workers", ["0", "-1"])
def test_resume_refuses_a_worker_count_below_one(workers: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``emews resume EXP --workers 0`` ran with the experiment's own count, silently."""
    from emews.config.experiment import create_experiment

    exp = create_experiment(tmp_path / "exp", name="early", site={"name": "local"}, info={"workers": 2},
                            workflow={"space": {"x": {"type": "float", "lower": 0, "upper": 1}},
                                      "budget": {"evaluations": 5}})
    before = sorted(p.name for p in exp.iterdir())
    assert main(["resume", str(exp), "--workers", workers]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--workers" in err and "at least 1" in err, err
    assert sorted(p.name for p in exp.iterdir()) == before
