"""One resolver for every plug-in kind: a built-in name, an entry point of the kind's group,
``package.module:Class`` and ``file.py:Class`` find the class; whatever names no concrete subclass
of the kind's contract is refused in one line. Entry points come from a real distribution: a
temporary ``*.dist-info`` folder on ``sys.path``."""

from __future__ import annotations

import abc
import inspect
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from testutil import write_workflow

from emews.cli import main
from emews.config.plugins import KINDS, OPTIMIZERS, TRIAL_SCHEDULERS, PluginKind, PluginNotFound
from emews.config.workflow import load_workflow
from emews.core.errors import EmewsError
from emews.core.optimizer import Optimizer
from emews.training.schedulers import TrialScheduler

MODULE = "emews_test_plugins"
SOURCE = '''
from emews.core.optimizer import AskTellOptimizer
from emews.training.messages import CONTINUE
from emews.training.schedulers import TrialScheduler


class Grid(AskTellOptimizer):
    """Proposes the space's first point, over and over."""

    def suggest(self, n):
        return [{name: dim.first for name, dim in self.space.dimensions.items()}] * n

    def ingest(self, results):
        pass


class Patient(TrialScheduler):
    """Lets every trial train to its end."""

    def on_report(self, trial, step, metrics, params):
        return CONTINUE


class Unfinished(TrialScheduler):
    """Forgets on_report."""


class Unfinished2(AskTellOptimizer):
    def suggest(self, n):
        return []


class NotAPlugin:
    pass


class Rules:
    class Patient(Patient):
        pass
'''
#: per kind: (entry-point name, class name, a class of the other kind's contract, an abstract one)
CLASSES = {OPTIMIZERS: ("grid", "Grid", "Patient", "Unfinished2"),
           TRIAL_SCHEDULERS: ("patient", "Patient", "Grid", "Unfinished")}


def distribution(site: Path, name: str, entry_points: str) -> None:
    """A minimal installed distribution ``name`` in ``site`` with ``entry_points``."""
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A site folder on ``sys.path`` with the plug-in module and a distribution naming its classes."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(SOURCE)
    distribution(folder, "emews-test-plugins", f"""
        [emews.optimizers]
        grid = {MODULE}:Grid
        [emews.trial_schedulers]
        patient = {MODULE}:Patient
        nested = {MODULE}:Rules.Patient
        """)
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    sys.modules.pop(MODULE, None)


def test_the_kinds_and_their_groups() -> None:
    assert [(k.what, k.contract, k.group) for k in KINDS] == [
        ("optimizer", Optimizer, "emews.optimizers"), ("trial scheduler", TrialScheduler, "emews.trial_schedulers")]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.what)
def test_every_builtin_name_is_a_concrete_class_of_its_contract(kind: PluginKind) -> None:
    for name, target in kind.builtins.items():
        found = kind.resolve(name)
        assert issubclass(found, kind.contract) and not inspect.isabstract(found), name
        assert f"{found.__module__}:{found.__qualname__}" == target


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.what)
def test_each_form_names_the_class(kind: PluginKind, site: Path, tmp_path: Path, monkeypatch) -> None:
    entry, cls, _, _ = CLASSES[kind]
    file = site / f"{MODULE}.py"
    by_entry_point = kind.resolve(entry)
    by_module = kind.resolve(f"{MODULE}:{cls}")
    by_path = kind.resolve(f"{file}:{cls}")
    monkeypatch.chdir(tmp_path)
    by_relative_path = kind.resolve(f"{MODULE}.py:{cls}", base_dir=site)  # not in the cwd: under base_dir
    assert by_entry_point is by_module and by_module.__module__ == MODULE
    for found in (by_path, by_relative_path):  # a file is its own module (emews_<kind>_<stem>)
        assert found.__qualname__ == cls and issubclass(found, kind.contract)
        assert found.__module__ == f"emews_{kind.what.replace(' ', '_')}_{MODULE}"
    assert entry in kind.names() and entry in kind.allowed()
    assert kind.allowed().endswith("package.module:Class or file.py:Class")


def test_an_entry_point_may_name_a_nested_class(site: Path) -> None:
    assert TRIAL_SCHEDULERS.resolve("nested").__qualname__ == "Rules.Patient"


def test_a_builtin_name_wins_over_an_entry_point(site: Path) -> None:
    distribution(site, "emews-shadow", f"[emews.optimizers]\nrandom = {MODULE}:Grid\n")
    assert OPTIMIZERS.resolve("random").__name__ == "RandomSearch"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.what)
def test_what_names_no_class_of_the_kind_is_refused(kind: PluginKind, site: Path) -> None:
    _, _, other, abstract = CLASSES[kind]
    contract = kind.contract.__name__
    cases = {
        "nope": f"unknown {kind.what} 'nope'",
        "no_such_module:Thing": f"cannot import {kind.what} module 'no_such_module'",
        "missing.py:Thing": f"{kind.what} file missing.py does not exist",
        f"{MODULE}:Missing": f"{MODULE} has no {contract} subclass named 'Missing'",
        f"{MODULE}:NotAPlugin": f"{MODULE} has no {contract} subclass named 'NotAPlugin'",
        f"{MODULE}:{other}": f"{MODULE} has no {contract} subclass named '{other}'",
        f"{MODULE}:{abstract}": f"{MODULE}:{abstract} does not implement ",
        "plugin.py": f"{kind.what} 'plugin.py': expected a name, package.module:Class or file.py:Class",
    }
    for ref, says in cases.items():
        with pytest.raises(PluginNotFound) as caught:
            kind.resolve(ref)
        message = str(caught.value)
        assert says in message and "\n" not in message, (ref, message)
        assert isinstance(caught.value, EmewsError) and isinstance(caught.value, LookupError)


def test_the_abstract_methods_left_out_are_named(site: Path) -> None:
    with pytest.raises(PluginNotFound, match="does not implement on_report of TrialScheduler"):
        TRIAL_SCHEDULERS.resolve(f"{MODULE}:Unfinished")
    with pytest.raises(PluginNotFound, match="does not implement ingest of Optimizer"):
        OPTIMIZERS.resolve(f"{MODULE}:Unfinished2")


def test_a_module_that_fails_to_import_is_refused_with_its_error(site: Path) -> None:
    (site / "broken_plugin.py").write_text("import no_such_dependency\n")
    with pytest.raises(PluginNotFound, match="No module named 'no_such_dependency'"):
        OPTIMIZERS.resolve("broken_plugin:Thing")


def test_one_name_from_two_packages_is_refused(site: Path) -> None:
    distribution(site, "emews-other-plugins", "[emews.trial_schedulers]\npatient = other_rules:Patient\n")
    with pytest.raises(PluginNotFound, match=r"'patient' is named by several installed packages "
                                             rf"\({MODULE}:Patient, other_rules:Patient\): name one as "):
        TRIAL_SCHEDULERS.resolve("patient")


def test_a_workflow_names_an_optimizer_by_its_entry_point(site: Path, tmp_path: Path, capsys) -> None:
    assert main(["check", str(write_workflow(tmp_path, optimizer={"name": "grid"}))]) == 0, capsys.readouterr().err


def test_an_unknown_optimizer_is_one_line_naming_the_key_and_every_name(site: Path, tmp_path: Path,
                                                                        capsys) -> None:
    code = main(["check", str(write_workflow(tmp_path, optimizer={"name": "gird"}))])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert ("wf.yaml: optimizer.name: unknown optimizer 'gird'; did you mean 'grid'? (allowed: bayes, bohb, eqpy, eqsql, ga, grid, "
            "hyperspace, ") in err
    assert "package.module:Class or file.py:Class)" in err


#: every built-in plug-in and contrib adapter, ``module:Class``
BUILTINS = [*OPTIMIZERS.builtins.values(), *TRIAL_SCHEDULERS.builtins.values(), "emews.contrib.optuna:OptunaSampler",
            "emews.contrib.nevergrad:NevergradOptimizer", "emews.contrib.gest:GestGenerator",
            "emews.contrib.rbridge:ROptimizer"]


@pytest.mark.parametrize("ref", BUILTINS)
def test_each_builtin_docstring_lists_its_options(ref: str) -> None:
    """Every keyword of the constructor (a workflow option) is named in the class's own docstring."""
    module, _, name = ref.partition(":")
    cls = getattr(pytest.importorskip(module), name)
    doc = cls.__dict__.get("__doc__") or ""
    options = [n for n, p in inspect.signature(cls).parameters.items()
               if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not n.startswith("_")]
    missing = [n for n in options if not re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", doc)]
    assert options and not missing, f"{ref}'s docstring does not list {missing}"


def test_a_workflow_names_a_trial_scheduler_by_its_entry_point(site: Path, tmp_path: Path, capsys) -> None:
    wf = write_workflow(tmp_path, trial_scheduler={"name": "patient"})
    assert main(["check", str(wf)]) == 0, capsys.readouterr().err


def test_an_unknown_trial_scheduler_is_one_line_naming_the_key_and_every_name(site: Path, tmp_path: Path,
                                                                              capsys) -> None:
    code = main(["check", str(write_workflow(tmp_path, trial_scheduler={"name": "ashaa"}))])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "wf.yaml: trial_scheduler.name: unknown trial scheduler 'ashaa'" in err
    assert "(allowed: asha, hyperband, median, nested, patient, pbt, package.module:Class or file.py:Class)" in err


def test_a_plugin_file_is_named_by_its_absolute_path_in_the_experiment(tmp_path: Path, monkeypatch) -> None:
    """``file.py:Class`` relative to the workflow's folder, for an optimizer and a trial scheduler alike:
    the resolved workflow (what the experiment keeps, and the job and ``emews resume`` read) names the
    file absolutely, so it loads from any folder."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "plugins.py").write_text(SOURCE)
    wf = write_workflow(folder, optimizer={"name": "plugins.py:Grid"},
                        trial_scheduler={"name": "plugins.py:Patient"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    resolved = load_workflow(str(wf)).to_dict()
    for key, cls in (("optimizer", "Grid"), ("trial_scheduler", "Patient")):
        assert resolved[key]["name"] == f"{folder / 'plugins.py'}:{cls}"
    copy = elsewhere / "exp" / "workflow.yaml"
    copy.parent.mkdir()
    copy.write_text(yaml.safe_dump(resolved))
    again = load_workflow(str(copy))
    assert again.make_trial_scheduler().__class__.__name__ == "Patient"
    assert again.make_optimizer().__class__.__name__ == "Grid"


def test_every_plugin_contract_is_an_abc() -> None:
    """One way to write a plug-in: subclass the contract's ABC (no NotImplementedError bases, no
    Protocols, no lists of functions)."""
    from emews.core.optimizer import AskTellOptimizer
    from emews.core.space import DimensionType
    from emews.reporting.figures import ReportPlot
    from emews.site.batch_schedulers import BatchScheduler
    from emews.site.launchers import Launcher

    for contract in (Optimizer, AskTellOptimizer, TrialScheduler, DimensionType, BatchScheduler, Launcher,
                     ReportPlot):
        assert isinstance(contract, abc.ABCMeta) and inspect.isabstract(contract), contract
