"""The layers only point down (issue 9): a test over the import graph of the package.

    python -m pytest -q tests/test_layers.py

Every module of ``emews`` (and of the optimizers and objectives shipped inside it) belongs to one
layer; a module may import from its own layer and the layers below, and the two middle
layers (configuration and engine) do not know each other. ARCHITECTURE.md draws the same map.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from testutil import REPO, modules_loaded_by

#: (rank, group) per folder of ``emews`` (and the optimizers and objectives shipped inside it);
#: the longest matching prefix wins. A module imports from its own group and lower ranks only.
LAYERS: dict[str, tuple[int, str]] = {
    "emews.core": (0, "core"),              # errors, spaces, results, queues, evaluator, optimizer contract
    "emews.processes": (1, "processes"),    # the one child-process toolkit
    "emews.training": (1, "training"),      # training messages, session, checkpoints, trial schedulers
    "emews.objective": (2, "objective"),    # function and command objectives, the task context, teams
    "emews.store": (2, "store"),            # the results store and its training tables
    "emews.config": (3, "config"),          # workflow files, validation, plug-ins, experiment dirs
    "emews.site": (3, "config"),            # sites: schedulers, launchers
    "emews.runtime": (3, "engine"),         # ranks, messages, runners, the distributor
    "emews.output": (4, "output"),          # results.csv, by point, DeepHyper export, best checkpoints
    "emews.optimizers": (4, "plugins"),     # built-in optimizers
    "emews.contrib": (4, "plugins"),        # adapters: Optuna, Nevergrad, gest-api, R (rpy2)
    "emews.objectives": (4, "plugins"),     # shipped example objectives
    "emews.job": (5, "wiring"),             # one run wired together: entry point, rank 0
    "emews.reporting": (5, "reporting"),    # emews report and emews status
    "emews": (6, "front"),                  # the package, the command line, the test kits
}
#: groups that never import the engine, whatever their rank
NEVER_THE_ENGINE = {"config", "output", "plugins", "reporting"}
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
    if target[1] == "engine" and source[1] in NEVER_THE_ENGINE:
        return False
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
    loaded = modules_loaded_by("emews.job.mpi_main, emews.runtime.worker_rank", ("pydantic", "yaml", "sqlite3"),
                               ("emews.site", "emews.config", "emews.store", "emews.job.rank_zero", "emews.job.wiring"))
    assert loaded == []


def test_training_knows_no_mpi() -> None:
    """Training logic (messages, session, checkpoints, trial schedulers) runs in any process: it
    imports neither mpi4py nor the engine that speaks MPI."""
    for module, path in modules().items():
        if module.startswith("emews.training"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            assert not [n for n in names if n.split(".")[0] == "mpi4py"], module


#: an SQL statement in a string (an f-string's parts included)
SQL = re.compile(r"\b(SELECT\b.+\bFROM|INSERT\s+(OR\s+[A-Z]+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
                 r"CREATE\s+(TABLE|INDEX|VIEW)|ALTER\s+TABLE|DROP\s+(TABLE|INDEX)|PRAGMA\s+\w+)\b", re.S)


def sql_of(path: Path) -> list[str]:
    """Where ``path`` imports sqlite3 or holds an SQL statement: ``LINE: what``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{node.lineno}: imports {n}" for n in names if n.split(".")[0] == "sqlite3"]
        elif isinstance(node, ast.JoinedStr | ast.Constant):
            text = _text(node)
            if text is not None and (statement := SQL.search(text)):
                found.append(f"{node.lineno}: {statement.group(0)[:40]!r}")
    return found


def _text(node: ast.JoinedStr | ast.Constant) -> str | None:
    """A string's text, an f-string's with ``{}`` for each value."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def test_every_sql_statement_is_in_the_store() -> None:
    """The store is one layer behind one interface (``emews.store.Store``): no other module imports
    sqlite3 or holds SQL, so a second backend replaces the store and nothing else."""
    assert any(sql_of(path) for module, path in modules().items() if module.startswith("emews.store."))
    outside = {module: sql for module, path in modules().items()
               if not module.startswith("emews.store") and (sql := sql_of(path))}
    assert not outside, outside


def test_the_layer_map_is_short_and_the_top_level_small() -> None:
    """The map is drawn over folders, and ``emews/`` keeps at most five modules of its own."""
    assert len(LAYERS) <= 15
    top = sorted(p.name for p in (REPO / "emews").glob("*.py"))
    assert len(top) <= 5, top
