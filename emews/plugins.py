"""Finding optimizers: built-in short names, entry points, ``pkg.module:Class`` or ``file.py:Class``."""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from emews.optimizer import Optimizer

#: built-in optimizers by short name
BUILTIN_OPTIMIZERS = {
    "random": "emews.optimizers.random:RandomSearch",
    "sweep": "emews.optimizers.sweep:Sweep",
    "ga": "emews.optimizers.ga:GeneticAlgorithm",
    "bayes": "emews.optimizers.bayes:BayesianOptimizer",
    "mbo": "emews.optimizers.mbo:MBO",
}
ENTRY_POINT_GROUP = "emews.optimizers"


class OptimizerNotFound(LookupError):
    """The optimizer reference names nothing that can be loaded."""


def available_optimizers() -> list[str]:
    names = set(BUILTIN_OPTIMIZERS)
    names.update(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def resolve_optimizer(ref: str, base_dir: Path | None = None) -> type[Optimizer]:
    """Return the optimizer class that ``ref`` names."""
    if ref in BUILTIN_OPTIMIZERS:
        target = BUILTIN_OPTIMIZERS[ref]
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == ref]
        target = found[0].value if found else ref
    if ":" not in target:
        raise OptimizerNotFound(f"unknown optimizer {ref!r}; use a built-in name "
                                f"({', '.join(available_optimizers())}), package.module:Class or file.py:Class")
    module_ref, _, class_name = target.rpartition(":")
    module = _import(module_ref, base_dir)
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Optimizer)):
        raise OptimizerNotFound(f"{module_ref} has no Optimizer subclass named {class_name!r}")
    return cls


def _import(module_ref: str, base_dir: Path | None) -> Any:
    if module_ref.endswith(".py"):
        path = Path(module_ref)
        if not path.is_absolute() and base_dir is not None and not path.exists():
            path = base_dir / path
        if not path.is_file():
            raise OptimizerNotFound(f"optimizer file {module_ref} does not exist")
        name = "emews_user_optimizer_" + "".join(c if c.isalnum() else "_" for c in path.stem)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(module_ref)
    except ImportError as exc:
        raise OptimizerNotFound(f"cannot import optimizer module {module_ref!r}: {exc}") from exc
