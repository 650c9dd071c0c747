"""Node-local rank and per-rank GPU binding, called inside each worker rank."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from pydantic import ValidationError

from emews.errors import ConfigError
from emews.site.schema import SiteConfig

#: Variables that launchers set to a rank's index on its node, in lookup order.
LOCAL_RANK_VARS = ("MPI_LOCALRANKID", "PMI_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "SLURM_LOCALID", "JSM_NAMESPACE_LOCAL_RANK", "PALS_LOCAL_RANKID")


def local_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's node-local rank from the launcher's environment (0 when none is set)."""
    environ = os.environ if environ is None else environ
    for var in LOCAL_RANK_VARS:
        value = environ.get(var, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def _config(site: Any) -> SiteConfig:
    if isinstance(site, SiteConfig):
        return site
    config = getattr(site, "config", None)
    if isinstance(config, SiteConfig):
        return config
    try:
        return SiteConfig.model_validate(dict(site))
    except (ValidationError, TypeError, ValueError) as exc:
        raise ConfigError(f"not a resolved site: {exc}", key="site") from None


def _parse_ids(value: str, names: list[str]) -> list[int]:
    ids = []
    for item in (v.strip() for v in value.split(",")):
        if item in names:
            ids.append(names.index(item))
        elif item.isdigit():
            ids.append(int(item))
    return ids


def bind_gpus(site: Any, local_rank: int,
              environ: MutableMapping[str, str] | None = None) -> list[int]:
    """Bind this rank's GPUs and return their indices on the node.

    ``env`` binding writes the rank's devices to ``node.gpu_env`` (the names in
    ``node.gpu_ids``, e.g. Aurora tiles ``0.0``); ``launcher`` binding reads
    what the launcher set there.  Slots follow :mod:`emews.site.layout`: on a
    batch site slot = node-local rank, on the local site slot = rank - 1
    (rank 0, the optimizer, gets none).  No GPUs per worker: ``[]``, env untouched.
    """
    environ = os.environ if environ is None else environ
    config = _config(site)
    node = config.node
    gpw = node.gpus_per_worker
    if not gpw or not node.gpus:
        return []
    names = node.device_names()
    if node.gpu_binding == "launcher":
        return _parse_ids(environ.get(node.gpu_env, ""), names)
    slot = local_rank - 1 if config.scheduler.type == "local" else local_rank
    if slot < 0:
        return []
    ids = list(range(slot * gpw, slot * gpw + gpw))
    if ids[-1] >= node.gpus:
        raise ConfigError(f"node-local rank {local_rank} needs GPUs {ids[0]}..{ids[-1]} but the "
                          f"node has {node.gpus}", key="launcher.workers_per_node",
                          allowed=f"at most {node.gpus // gpw} GPU slots per node")
    environ[node.gpu_env] = ",".join(names[i] for i in ids)
    return ids
