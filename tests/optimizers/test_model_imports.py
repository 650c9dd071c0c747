"""``emews check`` and ``emews launch`` load an optimizer's class, never its model.

Both commands import the optimizer to validate its options (the class's signature) and ask it
questions before the job starts; the built-in optimizers import their libraries (scikit-optimize,
scikit-learn, scipy, numpy; the GA's DEAP tools and moocore) where the run starts, on the
optimizer rank.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from testutil import EmewsCommand, command_cost, write_workflow

#: the libraries of the models (bayes' engine cost over a second of CPU and 140 MB to import)
MODEL_MODULES = ("numpy", "scipy", "sklearn", "skopt", "pandas", "deap.tools", "moocore")


def libraries(modules: list[str]) -> list[str]:
    """The top packages of ``modules``."""
    return sorted({m.split(".")[0] for m in modules})


@pytest.mark.parametrize("name", ["bayes", "hyperspace", "ga"])
def test_check_and_launch_load_the_optimizer_class_but_not_its_model(name: str, tmp_path: Path) -> None:
    cmd = EmewsCommand(tmp_path)
    check = command_cost(cmd, "check", name, heavy=MODEL_MODULES)
    assert (check.status, libraries(check.heavy)) == (0, [])
    assert f"ok — optimizer {name}" in check.out
    exp = tmp_path / "exp"
    dry_run = ["launch", name, "--site", "local", "--workers", "2", "--dry-run", "--exp-dir", str(exp)]
    launch = command_cost(cmd, *dry_run, heavy=MODEL_MODULES)
    assert (launch.status, libraries(launch.heavy)) == (0, [])
    assert f"-m emews run {exp}" in launch.out


@pytest.mark.parametrize(
    ("name", "options", "said"),
    [
        ("bayes", {"base_estimator": "GBRT"}, "base_estimator: invalid value 'GBRT' (allowed: GP, RF, ET)"),
        ("ga", {"strategy": "fast"}, "strategy: unknown strategy 'fast' (allowed: simple, mu_plus_lambda, async)"),
        (
            "hyperspace",
            {"split": ["mode"]},
            "split: 'mode' is not a numeric dimension of the space with more than one value (allowed: x)",
        ),
    ],
)
def test_options_the_class_refuses_are_said_in_one_line_without_the_model(
    name: str, options: dict[str, Any], said: str, tmp_path: Path
) -> None:
    """The options the class refuses itself (not its schema) are still refused by ``check``: one
    line naming the file and the key, exit 2, and still no model imported."""
    write_workflow(tmp_path, optimizer={"name": name, "options": options})
    cost = command_cost(EmewsCommand(tmp_path), "check", "wf.yaml", heavy=MODEL_MODULES)
    assert (cost.status, libraries(cost.heavy)) == (2, [])
    assert cost.err == f"emews: error: wf.yaml: optimizer.options.{said}"
