"""The checkpoints an experiment kept, for a later job: list them, load the best K.

    from emews.output.catalog import load_best
    for row, state in load_best("experiments/asha-001", k=5):   # 5 trials: UQ ensemble, fine-tuning
        ...

``emews checkpoints DIR`` prints the same list. Only durable checkpoints whose files are there are
listed (one deleted to free space is not the best), and each is verified when loaded (a corrupt file raises :class:`~emews.training.checkpoints.CorruptCheckpoint`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

from emews.config.experiment import read_workflow
from emews.core.errors import EmewsError
from emews.core.imports import registered_name
from emews.objective.function import ObjectiveLoadError, import_objective_module
from emews.output.export import open_store
from emews.store import DURABLE, LOST, CheckpointRow
from emews.training.checkpoints import read_checkpoint


class Recorded(NamedTuple):
    """The checkpoints the store of an experiment records, by trial and step: the durable ones whose
    file is there, those whose file is gone (deleted to free space, or moved away), and those never
    written (``lost``: the task's process died, or its write failed, before its writer wrote it)."""

    present: list[CheckpointRow]
    gone: list[CheckpointRow]
    lost: list[CheckpointRow]


def durable_checkpoints(exp_dir: str | Path) -> Recorded:
    """:class:`Recorded` of the experiment at ``exp_dir`` (one read of its store)."""
    store = open_store(Path(exp_dir))
    if store is None:
        return Recorded([], [], [])
    try:
        rows = store.checkpoints((DURABLE, LOST))
    finally:
        store.close()
    recorded = Recorded([], [], [])
    for row in rows:
        if row.state == LOST:
            recorded.lost.append(row)
        else:
            (recorded.present if Path(row.path).is_file() else recorded.gone).append(row)
    return recorded


def list_checkpoints(exp_dir: str | Path, best: int | None = None, per_trial: bool = True) -> list[CheckpointRow]:
    """The durable checkpoints of an experiment whose files are there, by trial and step. ``best``:
    the best checkpoint of each of the ``best`` best trials, best first, by the scheduler's metric
    (``per_trial`` false: the ``best`` best checkpoints, several of which may be one trial's)."""
    return best_checkpoints(durable_checkpoints(exp_dir).present, best, per_trial)


def best_checkpoints(rows: list[CheckpointRow], best: int | None, per_trial: bool = True) -> list[CheckpointRow]:
    """:func:`list_checkpoints` of ``rows`` (all of them when ``best`` is ``None``)."""
    if best is None:
        return rows
    ranked = sorted(rows, key=lambda r: (math.inf if r.loss is None else r.loss, r.id))
    if per_trial:
        firsts: dict[int, CheckpointRow] = {}
        for row in ranked:
            firsts.setdefault(row.trial, row)
        ranked = list(firsts.values())  # insertion order: best first
    return ranked[:best]


def load_best(
    exp_dir: str | Path, k: int = 1, extract_to: Path | None = None, per_trial: bool = True
) -> list[tuple[CheckpointRow, Any]]:
    """The best checkpoint of each of the ``k`` best trials of an experiment with what it holds,
    best first (``per_trial`` false: the ``k`` best checkpoints, whichever trials they are of). A
    file checkpoint (``ctx.report(checkpoint=Path)``) is extracted into a folder of its own,
    ``TRIAL/STEM/`` (``STEM``: its file name without ``.ckpt``) under ``extract_to`` (default: beside
    the checkpoint), and its path is what it holds: checkpoints of files with one name never
    overwrite each other."""
    return [
        (row, read_saved(Path(exp_dir), row, own_folder(row, extract_to)))
        for row in list_checkpoints(exp_dir, best=k, per_trial=per_trial)
    ]


class CheckpointClassMissing(EmewsError, ImportError):
    """A checkpoint holds objects of classes of the objective's file, which cannot be imported here."""


def read_saved(exp_dir: Path, row: CheckpointRow, extract_to: Path) -> Any:
    """What ``row``'s checkpoint holds. An object of a class defined in the objective's file (a
    ``torch.nn.Module`` subclass, a dataclass) names the module the workers imported that file as
    (``emews_objective_<stem>``): the experiment's objective file is imported under that name first."""
    try:
        return read_checkpoint(row.path, extract_to)
    except ModuleNotFoundError as exc:
        module = read_workflow(exp_dir).get("objective", {}).get("module")
        if not isinstance(module, str) or not module.endswith(".py"):
            raise
        if exc.name != registered_name(Path(module), "objective"):
            raise
        try:
            import_objective_module(module)
        except ObjectiveLoadError as err:
            raise CheckpointClassMissing(
                f"{row.path}: holds objects of classes defined in the objective's file {module} "
                f"(which the workers imported as {exc.name}), and it cannot be imported here: {err}"
            ) from None
    return read_checkpoint(row.path, extract_to)


def own_folder(row: CheckpointRow, extract_to: Path | None) -> Path:
    """Where ``row``'s file, if it holds one, is extracted: ``EXTRACT_TO/TRIAL/STEM``, or
    ``STEM/`` beside the checkpoint (``STEM``: its file name without ``.ckpt``)."""
    path = Path(row.path)
    return path.parent / path.stem if extract_to is None else Path(extract_to) / f"{row.trial:06d}" / path.stem


def format_table(rows: list[CheckpointRow]) -> str:
    """``trial step metric size path`` lines, as ``emews checkpoints`` prints them."""
    lines = [f"{'trial':>6} {'step':>6} {'metric':>12} {'size':>10}  path"]
    for r in rows:
        metric = "" if r.metric is None else f"{r.metric:.6g}"
        lines.append(f"{r.trial:>6} {r.step:>6} {metric:>12} {_size(r.size):>10}  {r.path}")
    return "\n".join(lines)


def _size(size: int | None) -> str:
    if size is None:
        return ""
    scaled = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if scaled < 1024 or unit == "GiB":
            return f"{scaled:.0f} {unit}" if unit == "B" else f"{scaled:.1f} {unit}"
        scaled /= 1024
    return str(scaled)
