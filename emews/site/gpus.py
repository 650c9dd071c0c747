"""The site's GPU binding (:class:`emews.core.gpu_binding.GpuBinding`) from its ``node`` section."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from pydantic import ValidationError

from emews.core.errors import ConfigError
from emews.core.gpu_binding import LOCAL_RANK_VARS, GpuBinding, local_rank
from emews.site.schema import SiteConfig

__all__ = ["LOCAL_RANK_VARS", "GpuBinding", "bind_gpus", "gpu_binding", "local_rank"]


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


def gpu_binding(site: Any) -> GpuBinding:
    """The site's GPU binding as plain data (what worker ranks receive from rank 0)."""
    config = _config(site)
    node = config.node
    return GpuBinding(
        gpus=node.gpus,
        per_worker=node.gpus_per_worker,
        mode=node.gpu_binding,
        env_var=node.gpu_env,
        names=tuple(node.device_names()),
        optimizer_on_slot_zero=config.scheduler.type == "local",
    )


def bind_gpus(site: Any, local_rank: int, environ: MutableMapping[str, str] | None = None) -> list[int]:
    """Bind this rank's GPUs and return their indices on the node (see :class:`GpuBinding`)."""
    return gpu_binding(site).bind(local_rank, environ)
