"""Links in a task's run dir that a model wrote by absolute path, in a copied or moved experiment.

A model that checkpoints by absolute links (CANDLE's ``CandleCkpt``: ``ckpts/last`` and ``ckpts/best``
link ``/…/EXP/runs/000/000003/…/ckpts/epochs/007``) leaves, in a copy of the experiment (``cp -a``),
links into the original, and in a moved one (``mv``) links to nothing: resumed, the copy's task would
restart from the original's checkpoint (and its next save would still be read from there), the moved
one's from none. Before a task runs again in its run dir, :func:`repoint_links` points such links at
the same place in this run dir.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def repoint_links(run_dir: Path) -> int:
    """Re-point each absolute link under ``run_dir`` (``EXP/runs/SHARD/ID``) that leads to the same
    task's run dir of another experiment directory (``OTHER/runs/SHARD/ID/REST``) at
    ``RUN_DIR/REST``, where that is there; the number re-pointed. Other links are left as they are."""
    own = run_dir.parts[-3:]
    here = Path(os.path.realpath(run_dir))
    repointed = 0
    for folder, dirs, files in os.walk(run_dir):  # links are listed, not followed
        for name in (*dirs, *files):
            link = Path(folder, name)
            if not link.is_symlink():
                continue
            target = os.readlink(link)
            rest = _inside(Path(target).parts, own) if os.path.isabs(target) else None
            if rest is None:
                continue
            mirrored = here.joinpath(*rest)
            if Path(os.path.realpath(target)).is_relative_to(here) or not os.path.lexists(mirrored):
                continue  # ours already, or nothing here to point at
            fresh = link.with_name(f".{name}.emews-relink")
            if os.path.lexists(fresh):
                fresh.unlink()
            fresh.symlink_to(mirrored)
            os.replace(fresh, link)
            repointed += 1
    return repointed


def _inside(parts: Sequence[str], own: Sequence[str]) -> tuple[str, ...] | None:
    """What follows the last ``runs/SHARD/ID`` (``own``) in ``parts``; ``None`` without one."""
    width = len(own)
    for start in range(len(parts) - width, 0, -1):
        if tuple(parts[start : start + width]) == tuple(own):
            return tuple(parts[start + width :])
    return None
