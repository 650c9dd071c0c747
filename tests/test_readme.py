"""The README's examples run: the custom optimizer passes the conformance kit, the commands match CI.

The Optuna adapter's listing moved to ``docs/optimizers.md``; its test reads it there.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

from testutil import REPO
from emews.core.jsoncodec import dumps_point
from emews.testing import check_optimizer, run_traced

README = (REPO / "README.md").read_text()
OPTIMIZERS_DOC = (REPO / "docs" / "optimizers.md").read_text()


def python_block(containing: str, text: str = README) -> str:
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return next(b for b in blocks if containing in b)


def readme_local_search(tmp_path: Path) -> Any:
    """The README's ``my_search.py``, imported."""
    source = python_block("class LocalSearch")
    assert len(source.strip().splitlines()) < 40
    path = tmp_path / "my_search.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("my_search", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_custom_optimizer_passes_the_conformance_kit(tmp_path: Path) -> None:
    module = readme_local_search(tmp_path)
    check_optimizer(lambda seed: module.LocalSearch(seed=seed), budget=24, workers=3)


def test_the_readme_optimizer_resumed_with_its_seed_proposes_no_earlier_point_again(tmp_path: Path) -> None:
    """Stopped after 6 of 12 and resumed with seed 3, it drew the first run's first points again
    (ids 0 and 1 came back as 6 and 7): the example now draws on with ``resumed_seed``."""
    module = readme_local_search(tmp_path)
    first = run_traced(lambda seed: module.LocalSearch(seed=seed), seed=3, budget=6, workers=2)
    resumed = run_traced(
        lambda seed: module.LocalSearch(seed=seed), seed=3, budget=12, workers=2, history=first.results
    )
    earlier = [dumps_point(r.params) for r in first.results]
    again = [p for p in resumed.points if dumps_point(p) in earlier]
    assert len(resumed.points) == 6 and again == [], again


def test_ci_runs_the_readme_test_command() -> None:
    command = re.search(r"\*\*Run the whole test suite\*\*.*?```bash\n(.*?)\n```", README, re.S).group(1)
    assert command.strip() in (REPO / ".ci" / "run").read_text()


def test_the_optimizer_docs_show_the_real_optuna_adapter_and_it_conforms() -> None:
    source = (REPO / "emews" / "contrib" / "optuna.py").read_text()
    assert python_block("class OptunaSampler", OPTIMIZERS_DOC) == source[source.index("import importlib") :]
    from emews.contrib.optuna import OptunaSampler

    check_optimizer(lambda seed: OptunaSampler(seed=seed), budget=16, workers=2)
