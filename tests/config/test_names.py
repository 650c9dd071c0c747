"""One name per thing: the workflow's ``trial_scheduler:`` (the old ``scheduler:`` still loads, with
a notice), ``--set`` keys that say which file they change, one ``Direction``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from testutil import REPO, TESTS, write_workflow

from emews.cli import _split_overrides, main
from emews.config.experiment import SITE_FILE, WORKFLOW_FILE, update_budget
from emews.config.workflow import load_workflow
from emews.config.yamlio import dump_yaml
from emews.core.direction import Direction
from emews.core.errors import ConfigError

TRAINER = TESTS / "objectives" / "trainer.py"
ASHA = {"name": "asha", "options": {"max_t": 9}}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def trainer(folder: Path, **sections) -> Path:
    return write_workflow(folder, objective={"module": str(TRAINER), "metric": "loss"},
                          space={"rate": {"type": "float", "lower": 0.0, "upper": 1.0}}, **sections)


def test_the_old_scheduler_key_loads_with_one_notice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = trainer(tmp_path, scheduler=ASHA)
    assert main(["check", str(path)]) == 0
    notices = [line for line in capsys.readouterr().err.splitlines() if "notice" in line]
    assert len(notices) == 1 and str(path) in notices[0] and "'trial_scheduler'" in notices[0], notices
    workflow = load_workflow(str(path))
    assert workflow.model.trial_scheduler is not None and workflow.model.trial_scheduler.name == "asha"
    written = workflow.to_dict()  # what the experiment directory gets: the new name only
    assert written["trial_scheduler"]["name"] == "asha" and "scheduler" not in written


def test_the_new_key_loads_without_a_notice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["check", str(trainer(tmp_path, trial_scheduler=ASHA))]) == 0
    assert "notice" not in capsys.readouterr().err


def test_both_keys_at_once_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = trainer(tmp_path, scheduler=ASHA, trial_scheduler=ASHA)
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{path}: scheduler: both 'scheduler' and 'trial_scheduler'" in err, err


def test_resume_changes_an_older_experiments_budget_and_keeps_its_keys(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    """An experiment launched before the rename holds ``scheduler:``; ``resume --set budget...``
    rewrote its workflow.yaml under the new name before the job had migrated the store: a job that
    failed before that left a file its own emews no longer read beside a store only it read. Only the
    budget changes now (no notice: the file is emews' record), and this emews reads it as before."""
    exp = older_experiment(tmp_path)
    before = yaml.safe_load((exp / WORKFLOW_FILE).read_text())
    update_budget(exp, {"budget.evaluations": 12})
    data = yaml.safe_load((exp / WORKFLOW_FILE).read_text())
    assert data == {**before, "budget": {**before.get("budget", {}), "evaluations": 12}}
    assert data["scheduler"] == ASHA and "trial_scheduler" not in data
    workflow = load_workflow(str(exp / WORKFLOW_FILE), check_imports=False)
    assert workflow.model.trial_scheduler is not None and workflow.model.trial_scheduler.name == "asha"
    assert capsys.readouterr().err == ""


def older_experiment(tmp_path: Path) -> Path:
    """An experiment directory as an emews of before the rename recorded it (``scheduler:``)."""
    exp = tmp_path / "exp"
    exp.mkdir()
    old = yaml.safe_load(trainer(tmp_path, scheduler=ASHA).read_text())
    (exp / WORKFLOW_FILE).write_text(yaml.safe_dump(old))
    (exp / SITE_FILE).write_text("extends: local\n")
    return exp


def test_an_older_experiments_record_loads_without_a_notice(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``emews resume`` of an experiment launched before the rename said, twice (resume, then the
    job's rank 0), ``notice: EXP/workflow.yaml: 'scheduler' is now 'trial_scheduler' (rename it; the
    old key is read until the next release)``: it asked the user to edit emews' own record, and an
    experiment outlives the release that would stop reading it. A record loads under the old name
    silently, for good; a file the user wrote still gets the notice."""
    exp = older_experiment(tmp_path)
    workflow = load_workflow(str(exp / WORKFLOW_FILE))
    assert workflow.model.trial_scheduler is not None and workflow.model.trial_scheduler.name == "asha"
    assert capsys.readouterr().err == ""
    assert main(["check", str(tmp_path / "wf.yaml")]) == 0
    assert "'scheduler' is now 'trial_scheduler'" in capsys.readouterr().err


# --set KEY=VALUE -> (workflow overrides, site overrides)
ROUTED = {
    "workflow section": ("budget.evaluations=5", {"budget.evaluations": 5}, []),
    "trial scheduler": ("trial_scheduler.options.max_t=9", {"trial_scheduler.options.max_t": 9}, []),
    "batch scheduler": ("scheduler.account=ABC", {}, ["scheduler.account=ABC"]),
    "launcher": ("launcher.args=-x", {}, ["launcher.args=-x"]),
    "workflow prefix": ("workflow.name=mine", {"workflow.name": "mine"}, []),  # as typed: its loader reads the prefix
    "site prefix": ("site.name=cluster", {}, ["site.name=cluster"]),
    "site prefix, section": ("site.scheduler.queue=debug", {}, ["site.scheduler.queue=debug"]),
}


@pytest.mark.parametrize("case", list(ROUTED))
def test_set_keys_name_their_file(case: str) -> None:
    item, workflow, site = ROUTED[case]
    assert _split_overrides([item]) == (workflow, site)


# --set KEY=VALUE -> (the key the message names, what it offers instead)
UNROUTED = {
    "in both files": ("name=x", "name", "workflow.name or site.name"),
    "description in both": ("description=x", "description", "workflow.description or site.description"),
    "trial scheduler as the old key": ("scheduler.options.max_t=9", "scheduler.options.max_t",
                                       "trial_scheduler.options.max_t"),
    "trial scheduler name": ("scheduler.name=asha", "scheduler.name", "trial_scheduler.name"),
    "neither file": ("budgte.evaluations=5", "budgte", "trial_scheduler"),
}


@pytest.mark.parametrize("case", list(UNROUTED))
def test_set_keys_of_no_file_or_of_both_are_refused(case: str) -> None:
    item, key, offered = UNROUTED[case]
    with pytest.raises(ConfigError) as info:
        _split_overrides([item])
    assert info.value.file == "--set" and info.value.key == key, info.value
    assert offered in str(info.value.allowed), info.value


def test_a_set_key_of_no_file_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = trainer(tmp_path, trial_scheduler=ASHA)
    for argv in (["check", str(path)], ["launch", str(path), "--workers", "1", "--exp-dir", "exp"]):
        assert main([*argv, "--set", "scheduler.options.max_t=9"]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "trial_scheduler.options.max_t" in err, err
    assert not (tmp_path / "exp").exists()


def test_set_trial_scheduler_changes_an_older_files_section(tmp_path: Path) -> None:
    """``--set trial_scheduler.*`` changes an older file's ``scheduler:`` section (renamed first)."""
    workflow = load_workflow(str(trainer(tmp_path, scheduler=ASHA)), {"trial_scheduler.options.max_t": 3})
    assert workflow.model.trial_scheduler.name == "asha" and workflow.model.trial_scheduler.options == {"max_t": 3}


def test_a_section_only_set_wrote_is_blamed_on_set(tmp_path: Path) -> None:
    """The reference's ``--set trial_scheduler.options.max_t=9`` on a workflow without a trial
    scheduler named the workflow file (``wf.yaml: trial_scheduler.name: required key is missing``),
    which has no such section: the section is ``--set``'s, and so is what it lacks. A file's own
    mistake beside a ``--set`` is still the file's."""
    path = trainer(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_workflow(str(path), {"trial_scheduler.options.max_t": 9})
    assert (info.value.file, info.value.key) == ("--set", "trial_scheduler.name"), info.value
    bad = trainer(tmp_path, task={"timeout": -1})
    with pytest.raises(ConfigError) as info:
        load_workflow(str(bad), {"trial_scheduler.name": "asha"})
    assert (info.value.file, info.value.key) == (str(bad), "task.timeout"), info.value


def test_launch_help_says_which_file_a_set_key_changes(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["launch", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("trial_scheduler.options.max_t", "scheduler.account", "batch scheduler", "workflow.", "site."):
        assert words in text, text


def test_direction_is_the_one_sign() -> None:
    up, down = Direction.of("maximize"), Direction.of("minimize")
    assert (up.sign, down.sign) == (-1.0, 1.0) and Direction.of(None) is down
    assert Direction.of("max") is up and Direction.of("min") is down and (up.mode, down.mode) == ("max", "min")
    assert up.loss(0.9) == -0.9 and up.from_loss(up.loss(0.9)) == 0.9 and down.loss(0.9) == 0.9
    assert up == "maximize" and str(up) == f"{up}" == "maximize"
    with pytest.raises(ValueError, match="allowed: minimize, maximize"):
        Direction.of("up")


def test_the_workflow_direction_is_checked_and_written_as_its_name(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    path = write_workflow(tmp_path, objective={"module": str(TRAINER), "metric": "loss", "direction": "up"})
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: objective.direction: invalid value 'up'" in err and "'minimize' or 'maximize'" in err, err
    path = write_workflow(tmp_path, objective={"module": str(TRAINER), "metric": "loss", "direction": "maximize"})
    workflow = load_workflow(str(path))
    assert workflow.model.objective.direction is Direction.MAXIMIZE
    assert "direction: maximize\n" in dump_yaml(workflow.to_dict())


def _computes_a_sign(node: ast.AST) -> bool:
    """``-1.0 if ... else 1.0``, or ``X if <a comparison with "maximize", "max", ...> else Y`` (not a
    choice between two names)."""
    if not isinstance(node, ast.IfExp):
        return False
    if all(isinstance(b, (ast.Constant, ast.UnaryOp)) and _number(b) in (1, -1) for b in (node.body, node.orelse)):
        return True
    names = {"maximize", "minimize", "max", "min"}
    compares = any(isinstance(c, ast.Constant) and c.value in names
                   for part in ast.walk(node.test) if isinstance(part, ast.Compare)
                   for c in ast.walk(part))
    labels = all(isinstance(b, ast.Constant) and isinstance(b.value, str) for b in (node.body, node.orelse))
    return compares and not labels


def _number(node: ast.AST) -> object:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    return node.value if isinstance(node, ast.Constant) else None


def test_no_module_computes_the_sign_of_a_direction_again() -> None:
    """The sign of minimize/maximize lives in ``emews.core.direction`` alone: no other module has a
    ``-1.0 if ... else 1.0`` or picks a value by comparing with ``"maximize"``, ``"max"``, ..."""
    found = []
    for root in ("emews", "optimizers", "objectives"):
        for path in (REPO / root).rglob("*.py"):
            if path.name == "direction.py" and path.parent.name == "core":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if _computes_a_sign(node):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == [], found


def test_each_module_basename_names_one_concept() -> None:
    """No two modules of the package share a file name (``failures.py`` twice was two concepts)."""
    seen: dict[str, list[str]] = {}
    for root in ("emews", "optimizers"):
        for path in (REPO / root).rglob("*.py"):
            if path.name != "__init__.py":
                seen.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


@pytest.mark.parametrize(("entry", "says"), [
    ({"type": "float", "low": 0.0, "high": 1.0},
     ["space.p.low: unknown key 'low'; did you mean 'lower'?", "space.p.high: unknown key 'high'; did you mean 'upper'?"]),
    ({"type": "categorical", "choices": [1, 2]}, ["space.p.choices: unknown key 'choices'; did you mean 'values'?"]),
    ({"type": "int", "lower": 16, "upper": 64, "step": 16},
     ["space.p.step: int and float have no step (Optuna's step, hyperopt's q): list the values, "
      "{type: ordered, values: [16, 32, 48, 64]}"]),
    ({"type": "float", "lower": 0.0, "upper": 1.0, "q": 0.25},
     ["space.p.q: int and float have no step", "{type: ordered, values: [0.0, 0.25, 0.5, 0.75, 1.0]}"]),
    ({"type": "int", "lower": 0, "upper": 1000, "step": 10},
     ["{type: ordered, values: [0, 10, 20, ..., 1000]}"]),
    ({"type": "loguniform", "lower": 1.0e-4, "upper": 0.1},
     ["space.p.type: 'loguniform' is Ray Tune's: {type: float, log: true}", "(allowed: int, float, categorical"]),
    ({"type": "choice", "values": ["a", "b"]}, ["space.p.type: 'choice' is Ray Tune's: {type: categorical}"]),
    ({"type": "randint", "lower": 1, "upper": 9}, ["space.p.type: 'randint' is Ray Tune's: {type: int}"]),
])
def test_a_space_written_with_optuna_or_ray_tune_names_says_what_to_write(tmp_path: Path, capsys, entry, says) -> None:
    """Optuna's suggest_float(low, high, step), suggest_categorical(choices) and Ray Tune's
    tune.loguniform/choice/randint written as keys or types of a space entry: each is one line
    naming space.NAME.KEY and what to write here, and nothing else about that entry (no 'upper:
    required key is missing' beside 'high')."""
    path = write_workflow(tmp_path, space={"p": entry})
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "required key is missing" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == max(1, sum(part.startswith("space.") for part in says)), err
    assert all(part in err for part in says), err


# --set KEY=VALUE -> the key its one line names (once: '--set: KEY: ...', as a workflow key is named)
SET_NAMED = {
    "a site key's bad value": ("scheduler.nodes=x", "scheduler.nodes"),
    "a site key misspelled": ("scheduler.nodez=2", "scheduler.nodez"),
    "a site section given whole": ("scheduler={nodes: x}", "scheduler.nodes"),
    "a site value used as a section": ("scheduler.nodes.x=1", "scheduler.nodes.x"),
    "a site walltime": ("scheduler.walltime=abc", "scheduler.walltime"),
    "a site list": ("environment.setup=3", "environment.setup"),
    "malformed YAML for a site key": ("launcher.workers_per_node=[x", "launcher.workers_per_node"),
    "the trial scheduler as the site's": ("scheduler.name=asha", "scheduler.name"),
    "a workflow value used as a section": ("budget.evaluations.x=2", "budget.evaluations.x"),
    "malformed YAML for a workflow key": ("budget.evaluations=[x", "budget.evaluations"),
}


@pytest.mark.parametrize("case", list(SET_NAMED))
def test_a_set_mistake_names_its_key_once(case: str, capsys: pytest.CaptureFixture) -> None:
    """``emews launch random --site polaris --set scheduler.nodes=x --dry-run`` said '--set
    scheduler.nodes: scheduler.nodes: must be ...' (the key twice), where a workflow key is said
    '--set: budget.evaluations: ...': every --set mistake is said the one way."""
    item, key = SET_NAMED[case]
    assert main(["launch", "random", "--site", "polaris", "--set", item, "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(f"emews: error: --set: {key}: "), err
    assert f"--set {key}" not in err, err



MBO = {"name": "mbo", "options": {"seed": 1, "n_initial": 8, "lambda": 1.0}}


@pytest.mark.parametrize("item", ["optimizer.options.lamda=2", "optimizer.options.lambda=x",
                                  "optimizer.options.n_initial=-1", "optimizer.options.infill=zz"])
def test_a_bad_optimizer_option_given_with_set_is_blamed_on_set(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                                item: str) -> None:
    """``emews check mbo --set optimizer.options.lamda=2`` said '.../mbo.yaml: optimizer.options: mbo:
    unknown option 'lamda'', blaming the file for a value --set gave (the optimizer refused it
    without naming the option, so the key is its section's). A problem the file alone does not
    have is --set's."""
    path = trainer(tmp_path, optimizer=MBO)
    assert main(["check", str(path), "--set", item]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("emews: error: --set: optimizer.options"), err
    assert str(path) not in err, err


def test_a_files_own_bad_optimizer_option_beside_a_set_stays_the_files(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    path = trainer(tmp_path, optimizer={"name": "mbo", "options": {"infill": "zz"}})
    assert main(["check", str(path), "--set", "optimizer.options.seed=3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"emews: error: {path}: optimizer.options.infill: invalid value"), err
