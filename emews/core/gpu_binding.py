"""Which GPUs a worker rank uses, as plain data a worker can apply without reading the site file.

The site (``emews.site``) builds a :class:`GpuBinding` from its ``node`` section; rank 0 sends it
to the workers, which only call :meth:`GpuBinding.bind`. Slots follow :mod:`emews.site.layout`:
on a batch site slot = node-local rank, on the local site slot = rank - 1 (rank 0, the optimizer,
gets none).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Literal

from emews.core.errors import ConfigError

#: Variables that launchers set to a rank's index on its node, in lookup order: MPICH's Hydra
#: mpiexec (which, inside a Slurm job, starts its proxies with srun: its ranks also see the proxy's
#: SLURM_LOCALID, hence first), Cray PMI under PALS, Open MPI's mpirun and jsrun (Spectrum MPI),
#: Slurm's srun, jsrun, PALS. Each launcher sets only its own: one inherited from an outer launcher
#: would win over the live one's, so the job's ranks take theirs from MPI (the node communicator)
#: and ``ctx.launch`` removes them all from the program's environment.
LOCAL_RANK_VARS = (
    "MPI_LOCALRANKID",
    "PMI_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
    "JSM_NAMESPACE_LOCAL_RANK",
    "PALS_LOCAL_RANKID",
)


#: Intel Level Zero: the variable a rank's devices are written to, and the device hierarchy it is
#: read under. COMPOSITE (ALCF's default Aurora environment) exposes each GPU as a device with its
#: tiles as sub-devices, masked ``<gpu>.<tile>``; FLAT (the driver's default when unset, and what
#: ALCF's frameworks module sets) and COMBINED expose each tile as a device of its own, numbered
#: ``0..tiles-1`` (in PCI order with ZE_ENABLE_PCI_ID_DEVICE_ORDER=1), where ``<gpu>.<tile>`` names
#: a sub-device no tile has.
ZE_MASK = "ZE_AFFINITY_MASK"
ZE_HIERARCHY = "ZE_FLAT_DEVICE_HIERARCHY"


def ze_affinity_mask(share: Sequence[str], names: Sequence[str], environ: Mapping[str, str]) -> str:
    """``ZE_AFFINITY_MASK`` for the tiles ``share`` (named ``<gpu>.<tile>`` among the node's
    ``names``) under the device hierarchy ``environ`` sets: as named under COMPOSITE, else each
    tile's flat index (``gpu * tiles per GPU + tile``). Names without a tile stay as they are."""
    if environ.get(ZE_HIERARCHY, "FLAT").strip().upper() == "COMPOSITE":
        return ",".join(share)
    tiles = 1 + max((int(t) for _, t in (_gpu_tile(n) for n in names) if t is not None), default=0)
    flat = []
    for name in share:
        gpu, tile = _gpu_tile(name)
        flat.append(name if tile is None else str(int(gpu) * tiles + int(tile)))
    return ",".join(flat)


def _gpu_tile(name: str) -> tuple[str, str | None]:
    """``("3", "1")`` for ``3.1``; ``(name, None)`` for a name that is no ``<gpu>.<tile>``."""
    gpu, dot, tile = name.partition(".")
    return (gpu, tile) if dot and gpu.isdigit() and tile.isdigit() else (name, None)


def local_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's node-local rank from the launcher's environment (0 when none is set): the first
    of :data:`LOCAL_RANK_VARS` set, right in a process a launcher started with the environment it
    was given (an inherited variable of another launcher comes first: an MPI program asks MPI)."""
    environ = os.environ if environ is None else environ
    for var in LOCAL_RANK_VARS:
        value = environ.get(var, "").strip()
        if value.isdigit():
            return int(value)
    return 0


@dataclass(frozen=True)
class GpuBinding:
    """A node's GPUs and how each worker gets its share.

    ``env`` binding writes the rank's devices to ``env_var`` (the ``names``, e.g. Aurora
    tiles ``0.0``); ``launcher`` binding reads what the launcher set there (narrowed to the
    rank's share where the launcher left more visible than ``per_worker``).
    """

    gpus: int = 0
    per_worker: int = 0
    mode: Literal["env", "launcher"] = "env"
    env_var: str = "CUDA_VISIBLE_DEVICES"
    names: tuple[str, ...] = ()
    optimizer_on_slot_zero: bool = False  # the local site: rank 0 (the optimizer) is node-local rank 0

    @property
    def node_names(self) -> list[str]:
        """The node's GPUs as the binding names them (``names``, else their indices)."""
        return list(self.names) or [str(i) for i in range(self.gpus)]

    def bind(self, local_rank: int, environ: MutableMapping[str, str] | None = None) -> list[int]:
        """Bind this rank's GPUs and return their indices on the node (``[]``: none, env untouched)."""
        environ = os.environ if environ is None else environ
        if not self.per_worker or not self.gpus:
            return []
        names = self.node_names
        slot = local_rank - 1 if self.optimizer_on_slot_zero else local_rank
        if self.mode == "launcher":
            return self._keep_own_share(slot, environ, names)
        if slot < 0:
            return []
        ids = list(range(slot * self.per_worker, slot * self.per_worker + self.per_worker))
        if ids[-1] >= self.gpus:
            raise ConfigError(
                f"node-local rank {local_rank} needs GPUs {ids[0]}..{ids[-1]} but the node has {self.gpus}",
                key="launcher.workers_per_node",
                allowed=f"at most {self.gpus // self.per_worker} GPU slots per node",
            )
        environ[self.env_var] = self.spell([names[i] for i in ids], environ)
        return ids

    def spell(self, share: Sequence[str], environ: Mapping[str, str]) -> str:
        """The value of ``env_var`` that makes the GPUs named ``share`` a rank's (for
        ``ZE_AFFINITY_MASK``, as the Level Zero device hierarchy in ``environ`` numbers them)."""
        if self.env_var == ZE_MASK:
            return ze_affinity_mask(share, self.node_names, environ)
        return ",".join(share)

    def share(self, local_rank: int) -> list[str]:
        """The names of the GPUs of node-local rank ``local_rank``'s slot (``[]``: none), as
        :meth:`bind` gives them with ``env`` binding, and narrows them to with ``launcher`` binding."""
        if not self.per_worker or not self.gpus:
            return []
        names = self.node_names
        slot = local_rank - 1 if self.optimizer_on_slot_zero else local_rank
        return names[slot * self.per_worker : (slot + 1) * self.per_worker] if slot >= 0 else []

    def _keep_own_share(self, slot: int, environ: MutableMapping[str, str], names: list[str]) -> list[int]:
        """What the launcher bound; where it left more GPUs visible than ``per_worker`` (Slurm's
        ``--gpu-bind=closest`` without GPU-core affinity leaves every task all of them), the
        rank's slot's share of them, so that the workers of a node do not all use the first."""
        visible = [item.strip() for item in environ.get(self.env_var, "").split(",") if item.strip()]
        share = visible[slot * self.per_worker : (slot + 1) * self.per_worker] if slot >= 0 else []
        if len(visible) > self.per_worker and len(share) == self.per_worker:
            environ[self.env_var] = ",".join(share)
            visible = share
        return _parse_ids(",".join(visible), names)


def _parse_ids(value: str, names: list[str]) -> list[int]:
    ids = []
    for item in (v.strip() for v in value.split(",")):
        if item in names:
            ids.append(names.index(item))
        elif item.isdigit():
            ids.append(int(item))
    return ids
