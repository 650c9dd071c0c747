"""What the workflow asks the optimizer class before it runs (``takes_open_points``, ``point_keys``,
``planned_evaluations``): asked one way (``emews.config.plugin_calls.ask_optimizer``); a class
that cannot be loaded is ``check_workflow``'s to report, the class's own errors are said in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from emews.cli import main
from emews.config.workflow import load_workflow
from testutil import write_workflow

PLUGIN = """\
from emews.core.errors import KeyedValueError
from emews.core.optimizer import Optimizer


class Plug(Optimizer):
    def __init__(self, points: str = "a.txt", mode: str = "grid") -> None:
        pass

    @classmethod
    def takes_open_points(cls, options):
        {takes_open_points}

    @classmethod
    def point_keys(cls, options):
        {point_keys}

    @classmethod
    def planned_evaluations(cls, options, space):
        {planned_evaluations}

    def run(self, evaluator):
        pass
"""
QUIET = {"takes_open_points": "return False", "point_keys": "return None", "planned_evaluations": "return None"}

#: question -> (what it raises, the key the line names, a text of the line)
RAISING = {
    "takes_open_points": ("raise ValueError('cannot read the points')", "optimizer.options", "cannot read the points"),
    "point_keys": (
        "raise KeyedValueError('optimizer.options.mode', 'no keys in this mode', 'grid or file')",
        "optimizer.options.mode",
        "no keys in this mode (allowed: grid or file)",
    ),
    "planned_evaluations": (
        "raise RuntimeError('the plan broke')",
        "optimizer",
        "failed to answer before the run: RuntimeError: the plan broke (at ",
    ),
}


def _plugin(folder: Path, **questions: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plug.py").write_text(PLUGIN.format(**{**QUIET, **questions}))


@pytest.mark.parametrize("question", list(RAISING))
def test_an_optimizer_question_that_raises_is_said_in_one_line(
    question: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Each question was asked under ``except Exception``: what the class raised was dropped (an
    open space taken as closed, no placeholder check, no planned budget) and the run went on."""
    raised, key, text = RAISING[question]
    _plugin(tmp_path / "wf", **{question: raised})
    path = write_workflow(tmp_path / "wf", optimizer={"name": "plug.py:Plug"})
    monkeypatch.chdir(tmp_path / "wf")
    for command in (["check", str(path)], ["launch", str(path), "--exp-dir", str(tmp_path / "exp")]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert err.startswith(f"emews: error: {path}: {key}: ") and text in err, err
    assert not (tmp_path / "exp").exists()


def test_an_optimizer_that_cannot_be_loaded_is_reported_by_the_check(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    path = write_workflow(tmp_path, optimizer={"name": "rnadom"})
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"emews: error: {path}: optimizer.name: unknown optimizer 'rnadom'; did you mean"), err


def test_a_package_optimizer_that_fails_to_import_is_reported_by_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "broken_pkg_48.py").write_text("raise RuntimeError('no licence')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write_workflow(tmp_path, optimizer={"name": "broken_pkg_48:Search"})
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"emews: error: {path}: optimizer.name: cannot load optimizer "
                          "'broken_pkg_48:Search': RuntimeError: no licence"), err


def test_an_optimizer_file_beside_the_workflow_is_asked_from_anywhere(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``optimizer: plug.py:Plug`` beside the workflow, which takes open points (a UPF), loaded from
    another folder: the question looked for plug.py in the current folder only, took the
    space as closed and refused the points' keys the space does not list."""
    _plugin(tmp_path / "wf", takes_open_points="return True", point_keys="return frozenset({'params'})")
    path = write_workflow(tmp_path / "wf", optimizer={"name": "plug.py:Plug"}, space={})
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert load_workflow(str(path)).space.open
