"""The README's examples run: the custom optimizer passes the conformance kit, the commands match CI.

The Optuna adapter's listing moved to ``docs/optimizers.md``; its test reads it there.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from testutil import REPO
from emews.testing import check_optimizer

README = (REPO / "README.md").read_text()
OPTIMIZERS_DOC = (REPO / "docs" / "optimizers.md").read_text()


def python_block(containing: str, text: str = README) -> str:
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return next(b for b in blocks if containing in b)


def test_readme_custom_optimizer_passes_the_conformance_kit(tmp_path: Path) -> None:
    source = python_block("class LocalSearch")
    assert len(source.strip().splitlines()) < 40
    path = tmp_path / "my_search.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("my_search", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check_optimizer(lambda seed: module.LocalSearch(seed=seed), budget=24, workers=3)


def test_ci_runs_the_readme_test_command() -> None:
    command = re.search(r"\*\*Run the whole test suite\*\*.*?```bash\n(.*?)\n```", README, re.S).group(1)
    assert command.strip() in (REPO / ".ci" / "run").read_text()


def test_the_optimizer_docs_show_the_real_optuna_adapter_and_it_conforms() -> None:
    source = (REPO / "emews" / "contrib" / "optuna.py").read_text()
    assert python_block("class OptunaSampler", OPTIMIZERS_DOC) == source[source.index("import importlib"):]
    from emews.contrib.optuna import OptunaSampler

    check_optimizer(lambda seed: OptunaSampler(seed=seed), budget=16, workers=2)
