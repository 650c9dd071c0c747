"""Launchers start ranks inside an allocation: a template per type plus raw ``args``."""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from emews.core.errors import ConfigError
from emews.objective.team import RANKS
from emews.site.layout import Layout
from emews.site.schema import LauncherConfig


def python_bin() -> str:
    """Directory of the running interpreter (where pip's ``mpich`` puts ``mpiexec``)."""
    return str(Path(sys.executable or "python3").parent)


def base_python_bin() -> str | None:
    """Directory of the base interpreter's programs, where pip put the ``mpich`` wheel's ``mpiexec``,
    for a virtual environment that uses the base's packages (``venv --system-site-packages``), whose
    mpi4py is then the base's; ``None`` for any other interpreter (its own MPI is not the base's)."""
    config = Path(sys.prefix) / "pyvenv.cfg"
    if sys.prefix == sys.base_prefix or not config.is_file():
        return None
    try:
        lines = config.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    settings = {key.strip().lower(): value.strip().lower() for key, _, value in (line.partition("=") for line in lines)}
    return str(Path(sys.base_prefix) / "bin") if settings.get("include-system-site-packages") == "true" else None


class Launcher(ABC):
    """Turns a :class:`Layout` and a command into one launcher command line."""

    type: ClassVar[str]
    default_command: ClassVar[str | None]
    #: a team's launch gives each rank GPUs of its own (jsrun's resource sets); else emews does
    binds_team_gpus: ClassVar[bool] = False

    def __init__(self, config: LauncherConfig) -> None:
        self.config = config

    def executable(self) -> str | None:
        """The launcher program; ``{python_bin}`` expands to the interpreter's directory, or, where
        that holds no such program, to the base interpreter's (:func:`base_python_bin`) if it does."""
        command = self.config.command or self.default_command
        if not command:
            return None
        found = command.replace("{python_bin}", python_bin())
        base_bin = base_python_bin() if "{python_bin}" in command and not Path(found).exists() else None
        if base_bin is not None:  # a venv over the Python with mpich
            base = command.replace("{python_bin}", base_bin)
            if Path(base).exists():
                return base
        return found

    @abstractmethod
    def placement(self, layout: Layout) -> list[str]:
        """Flags that place ``layout.ranks`` ranks (and their GPUs)."""

    def line(self, layout: Layout, command: list[str]) -> list[str]:
        exe = self.executable()
        head = [exe, *self.placement(layout)] if exe else []
        return [*head, *self.config.args, *command]

    def team_line(
        self, hosts: Sequence[str], *, local: bool, gpus_per_rank: int = 0, gpu_binding: str = "env"
    ) -> list[str]:
        """The launch line (before the program) that starts ``{ranks}`` ranks of a program on a
        multi-rank task's ``hosts``, from inside the job (``ctx.launch``); ``local``: one machine,
        no host list."""
        exe = self.executable()
        if not exe:
            return []
        nodes = list(dict.fromkeys(hosts))
        return [exe, *self.team_placement(nodes, local, gpus_per_rank, gpu_binding), *self.config.args]

    def team_placement(self, nodes: list[str], local: bool, gpus_per_rank: int, gpu_binding: str) -> list[str]:
        """Flags that place ``{ranks}`` ranks on ``nodes``."""
        return ["-n", RANKS]


class MpiexecLauncher(Launcher):
    """MPICH Hydra or HPE PALS ``mpiexec`` (``-n``, ``--ppn``)."""

    type = "mpiexec"
    default_command = "mpiexec"

    def placement(self, layout: Layout) -> list[str]:
        flags = ["-n", str(layout.ranks)]
        if layout.ranks_per_node:
            flags += ["--ppn", str(layout.ranks_per_node)]
        return flags

    def team_placement(self, nodes: list[str], local: bool, gpus_per_rank: int, gpu_binding: str) -> list[str]:
        return ["-n", RANKS] if local else ["-n", RANKS, "--hosts", ",".join(nodes)]


class SrunLauncher(Launcher):
    """Slurm ``srun``; GPUs per task when the launcher binds them."""

    type = "srun"
    default_command = "srun"

    def placement(self, layout: Layout) -> list[str]:
        flags = ["-N", str(layout.nodes), "-n", str(layout.ranks)]
        if layout.ranks_per_node:
            flags += [f"--ntasks-per-node={layout.ranks_per_node}"]
        if layout.gpus_per_rank and layout.gpu_binding == "launcher":
            flags += [f"--gpus-per-task={layout.gpus_per_rank}", "--gpu-bind=closest"]
        elif layout.gpus_per_rank:
            flags += [f"--gpus-per-node={layout.gpus_per_node}"]
        return flags

    def team_placement(self, nodes: list[str], local: bool, gpus_per_rank: int, gpu_binding: str) -> list[str]:
        """A new step on the team's nodes that shares their resources with the waiting ranks
        (``--overlap``), the job's GPUs included: each rank takes its member's share of them
        (:mod:`emews.core.launched_gpus`); ``--gpus-per-task`` would give the step GPUs of its own
        choosing (the first ones, whichever slots the team has) and each rank all of them."""
        return ["--overlap", "-N", str(len(nodes)), "-n", RANKS, f"--nodelist={','.join(nodes)}"]


class JsrunLauncher(Launcher):
    """IBM ``jsrun``: one resource set per rank (``-n -r -a1 -c -g``)."""

    type = "jsrun"
    default_command = "jsrun"
    binds_team_gpus = True

    def placement(self, layout: Layout) -> list[str]:
        if layout.gpus_per_rank and layout.gpu_binding != "launcher":
            raise ConfigError(
                "jsrun gives GPUs to resource sets; env binding is not supported",
                key="node.gpu_binding",
                allowed="launcher",
            )
        flags = ["-n", str(layout.ranks)]
        if layout.ranks_per_node:
            flags += ["-r", str(layout.ranks_per_node)]
        flags += ["-a", "1"]
        if layout.cores_per_rank:
            flags += ["-c", str(layout.cores_per_rank)]
        flags += ["-g", str(layout.gpus_per_rank)]
        return flags

    def team_placement(self, nodes: list[str], local: bool, gpus_per_rank: int, gpu_binding: str) -> list[str]:
        """Resource sets anywhere in the job (jsrun takes no host list without an ERF file)."""
        return ["-n", RANKS, "-a", "1", "-g", str(gpus_per_rank)]


class AprunLauncher(Launcher):
    """Cray ALPS ``aprun`` (``-n``, ``-N``)."""

    type = "aprun"
    default_command = "aprun"

    def placement(self, layout: Layout) -> list[str]:
        flags = ["-n", str(layout.ranks)]
        if layout.ranks_per_node:
            flags += ["-N", str(layout.ranks_per_node)]
        return flags


class NoLauncher(Launcher):
    """No launcher: the command runs as is (``args`` still come first)."""

    type = "none"
    default_command = None

    def placement(self, layout: Layout) -> list[str]:
        return []


LAUNCHERS: dict[str, type[Launcher]] = {
    cls.type: cls for cls in (MpiexecLauncher, SrunLauncher, JsrunLauncher, AprunLauncher, NoLauncher)
}


def launcher_for(config: LauncherConfig) -> Launcher:
    """The launcher class for ``config.type``."""
    return LAUNCHERS[config.type](config)
