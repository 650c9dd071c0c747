"""The layers only point down (issue 9): a test over the import graph of the package.

    python -m pytest -q tests/test_layers.py

Every module of ``emews`` (and of the optimizers and objectives shipped inside it) belongs to one
layer; a module may import from its own layer and the layers below, and the two middle
layers (configuration and engine) do not know each other. ARCHITECTURE.md draws the same map.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from testutil import REPO

#: (rank, group) per module prefix; the longest matching prefix wins
LAYERS: dict[str, tuple[int, str]] = {
    # core: the contracts every layer uses (points, results, objectives, the optimizer's view)
    "emews.errors": (0, "core"), "emews.results": (0, "core"), "emews.space": (0, "core"), "emews.textfiles": (0, "core"),
    "emews.objective": (0, "core"), "emews.imports": (0, "core"), "emews.queues": (0, "core"),
    "emews.evaluator": (0, "core"), "emews.optimizer": (0, "core"), "emews.jsoncodec": (0, "core"),
    "emews.gpu_binding": (0, "core"), "emews.failure_cause": (0, "core"),
    "emews.command": (0, "core"), "emews.shellscript": (0, "core"), "emews.candle_params": (0, "core"), "emews.model_defaults": (0, "core"), "emews.replicates": (0, "core"),
    # training trials: messages, the objective's session, checkpoint files, the trial schedulers
    "emews.training": (0, "core"), "emews.trial_session": (0, "core"), "emews.checkpoints": (0, "core"),
    "emews.schedulers": (0, "core"), "emews.retention": (0, "core"),
    # multi-rank tasks: their size per point, a member's view of its team
    "emews.task_size": (0, "core"), "emews.team": (0, "core"),
    # configuration: files and command-line values -> validated objects; experiment directories
    "emews.yamlio": (1, "config"), "emews.validation": (1, "config"), "emews.plugins": (1, "config"),
    "emews.workflow": (1, "config"), "emews.site": (1, "config"), "emews.experiment": (1, "config"),
    "emews.lease": (1, "config"),
    # engine: ranks, messages, runners, child processes, the results store
    "emews.runtime": (1, "engine"), "emews.runtime.gang": (1, "engine"),
    # wiring one run from configuration and engine; reading results back
    "emews.job": (2, "wiring"), "emews.mpi_main": (2, "wiring"), "emews.rank_zero": (2, "wiring"), "emews.report": (2, "wiring"),
    "emews.csvfollow": (2, "wiring"), "emews.csvrows": (2, "wiring"), "emews.csvpart": (2, "wiring"),
    "emews.by_point": (2, "wiring"), "emews.deephyper_csv": (2, "wiring"),
    "emews.reporting": (2, "wiring"),
    "emews.catalog": (2, "wiring"), "emews.first_try": (2, "wiring"),
    # front ends and plug-ins
    "emews": (3, "front"), "emews.cli": (3, "front"), "emews.__main__": (3, "front"),
    "emews.testing": (3, "front"), "emews.contrib": (3, "front"), "emews.rbridge": (3, "front"),
    "emews.optimizers": (3, "front"), "emews.objectives": (3, "front"),
}
#: where the source of each top-level package lives (setup.cfg's package_dir)
SOURCES = {"emews": REPO / "emews", "emews.optimizers": REPO / "optimizers", "emews.objectives": REPO / "objectives"}


def layer_of(module: str) -> tuple[int, str]:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        found = LAYERS.get(".".join(parts[:n]))
        if found is not None:
            return found
    raise KeyError(module)


def modules() -> dict[str, Path]:
    found = {}
    for package, root in SOURCES.items():
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def imports_of(module: str, path: Path) -> list[str]:
    """Every emews module ``module`` imports, at any depth of its code (lazy imports included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            out.append(base)
    return [name for name in out if name == "emews" or name.startswith("emews.")]


def allowed(source: tuple[int, str], target: tuple[int, str]) -> bool:
    if target[0] < source[0]:
        return True
    return target == source


def test_every_module_has_a_layer() -> None:
    for module in modules():
        layer_of(module)


@pytest.mark.parametrize("module", sorted(modules()))
def test_imports_only_point_down(module: str) -> None:
    source = layer_of(module)
    wrong = [target for target in imports_of(module, modules()[module])
             if not target.startswith(module) and not allowed(source, layer_of(target))]
    assert not wrong, f"{module} ({source[1]}) imports {', '.join(f'{t} ({layer_of(t)[1]})' for t in wrong)}"


def test_worker_ranks_start_without_the_configuration_layer() -> None:
    """A worker rank imports only the runtime: no pydantic, YAML, site or workflow code, no SQLite
    (thousands of workers start from rank 0's broadcast plan, not by each reading the files)."""
    import subprocess
    import sys

    code = ("import sys, emews.mpi_main, emews.runtime.worker_rank\n"
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'yaml', 'sqlite3')\n"
            "      or m.startswith(('emews.site', 'emews.workflow', 'emews.rank_zero', 'emews.job')))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []
