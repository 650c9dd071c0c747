"""What users import comes from ``emews`` itself (issue 29 point 10)."""

from __future__ import annotations

import emews
from testutil import modules_loaded_by


def test_every_public_name_resolves() -> None:
    for name in emews.__all__:
        assert getattr(emews, name) is not None, name
    assert set(emews.__all__) <= set(dir(emews))


def test_the_public_names_are_the_implementations() -> None:
    from emews.output.catalog import load_best
    from emews.testing import OptimizerConformance
    from emews.training.schedulers.trial_scheduler import TrialScheduler

    assert emews.load_best is load_best
    assert emews.OptimizerConformance is OptimizerConformance
    assert emews.TrialScheduler is TrialScheduler
    from emews.core.evaluator import Room  # what Evaluator.room returns: an optimizer's author types with it

    assert emews.Room is Room and "Room" in emews.__all__


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        emews.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("emews.no_such_thing resolved")


def test_importing_emews_loads_no_heavy_layer() -> None:
    """``import emews`` (what a worker rank does) imports neither pandas, the store nor the test kits."""
    loaded = modules_loaded_by("emews", ("pandas", "sqlite3", "pydantic"),
                               ("emews.testing", "emews.output", "emews.contrib", "emews.api"))
    assert loaded == []


def test_every_lazy_name_is_listed() -> None:
    assert set(emews._LAZY) <= set(emews.__all__)


def test_the_docs_examples_import_the_public_names() -> None:
    """Every Python example in the README and docs/ imports emews's names from ``emews`` itself (the
    Optuna adapter's listing in docs/optimizers.md is the package's own source, which imports inside)."""
    import ast
    import re

    from testutil import REPO

    offending = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for block in re.findall(r"```python\n(.*?)```", page.read_text(), re.S):
            if "class OptunaSampler" in block:
                continue
            for node in ast.walk(ast.parse(block)):
                names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                         else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                offending += [f"{page.name}: {name}" for name in names if name.startswith("emews.")]
    assert offending == []
    for name in ("CONTINUE", "Action", "Decision", "candle_point"):
        assert name in emews.__all__
