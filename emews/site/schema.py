"""The site schema (pydantic v2, unknown keys forbidden).

A site is data: ``scheduler`` (get nodes), ``launcher`` (start ranks), ``node``
(hardware and GPU binding) and ``environment`` (shell setup), as Parsl splits
providers and launchers.  Behaviour lives in :mod:`emews.site.batch_schedulers` and
:mod:`emews.site.launchers`.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from emews.core.errors import KeyedValueError
from emews.site.walltime import WALLTIME_FORMS, format_hms, parse_walltime

SchedulerType = Literal["lsf", "slurm", "pbs", "local"]
LauncherType = Literal["jsrun", "srun", "mpiexec", "aprun", "none"]
GpuBinding = Literal["launcher", "env"]
GpuEnv = Literal["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"]

#: Launchers that can give each rank its own GPUs from their own flags.
GPU_BINDING_LAUNCHERS = ("jsrun", "srun")


#: Account, queue and job name: one word that every scheduler takes unquoted in a directive.
WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+@:-]*")
WORD_ALLOWED = "letters, digits and _ . + - @ :, not starting with - (no spaces, quotes or newlines)"
#: Keys of ``environment.vars``: shell variable names.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
IDENTIFIER_ALLOWED = "a shell variable name: letters, digits and _, not starting with a digit"


def control_char(text: str) -> str | None:
    """The first control or line-separator character of ``text``, or None."""
    return next((c for c in text if unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)


def _one_line(value: object, what: str) -> object:
    """Refuse control characters (a newline would start a new line of job.sh)."""
    if isinstance(value, str) and (bad := control_char(value)) is not None:
        raise KeyedValueError(
            None, f"{what} {value!r} contains the control character {bad!r}", "one line of printable text"
        )
    return value


def _no_bool(value: object) -> object:
    """A count given as ``true``/``false``: an error (pydantic's lax int would read it as 1 or 0)."""
    if isinstance(value, bool):
        raise KeyedValueError(None, f"must be a whole number, not bool {value!r}", "a whole number")
    return value


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


def _as_list(value: object) -> object:
    """A string is split like a shell would; a list stays a list."""
    if isinstance(value, str):
        return shlex.split(value)
    return value


class QueueLimit(_Part):
    """Jobs a queue takes (one row of a facility's queue table): ``nodes`` from..to and a walltime
    from..to (or up to one walltime), each bound included."""

    nodes: tuple[int, int]
    walltime: tuple[str, str]

    @field_validator("walltime", mode="before")
    @classmethod
    def _up_to(cls, value: object) -> object:
        return (_SHORTEST, value) if isinstance(value, str) else value

    @field_validator("walltime", mode="after")
    @classmethod
    def _walltimes(cls, value: tuple[str, str]) -> tuple[str, str]:
        try:
            return (format_hms(parse_walltime(value[0])), format_hms(parse_walltime(value[1])))
        except ValueError as exc:
            raise KeyedValueError(None, str(exc), f"[FROM, TO], each {WALLTIME_FORMS}") from None

    @model_validator(mode="after")
    def _ordered(self) -> QueueLimit:
        if not 1 <= self.nodes[0] <= self.nodes[1]:
            raise KeyedValueError(None, f"nodes {list(self.nodes)} is not a range", "[FROM, TO], 1 <= FROM <= TO")
        if parse_walltime(self.walltime[0]) > parse_walltime(self.walltime[1]):
            raise KeyedValueError(None, f"walltime {list(self.walltime)} is not a range", "[FROM, TO], FROM <= TO")
        return self

    def takes(self, nodes: int, walltime_s: int) -> bool:
        return self.nodes[0] <= nodes <= self.nodes[1] and self.seconds[0] <= walltime_s <= self.seconds[1]

    @property
    def seconds(self) -> tuple[int, int]:
        return parse_walltime(self.walltime[0]), parse_walltime(self.walltime[1])

    def describe(self) -> str:
        return f"{self.nodes[0]}-{self.nodes[1]} nodes for {self.describe_walltime()}"

    def describe_walltime(self) -> str:
        low, high = self.walltime
        return f"up to {high}" if low == _SHORTEST else f"{low} to {high}"


_SHORTEST = "00:00:01"


class SchedulerConfig(_Part):
    """How nodes are obtained: batch system, account, queue, time, node count."""

    type: SchedulerType = "local"
    account: str | None = None
    queue: str | None = None
    walltime: str = "01:00:00"
    nodes: int = Field(1, ge=1)
    job_name: str = "emews"
    directives: list[str] = Field(default_factory=list)
    #: LSF only: the cluster runs IBM Cluster Systems Manager (CSM: Summit, Sierra), whose "easy
    #: mode" takes whole nodes with ``#BSUB -nnodes N``; a plain LSF knows no -nnodes and gets
    #: ``-n RANKS -R "span[ptile=RANKS_PER_NODE]"``
    csm: StrictBool = False
    #: queue -> the jobs it takes, from the facility's queue table (its rows: a routing queue's
    #: execution queues); a job that no row takes is refused before anything is submitted, where the
    #: scheduler would reject it (:mod:`emews.site.queue_limits`); a queue not listed is not checked
    limits: dict[str, list[QueueLimit]] = Field(default_factory=dict)

    @field_validator("nodes", mode="before")
    @classmethod
    def _count(cls, value: object) -> object:
        return _no_bool(value)

    @field_validator("walltime", mode="before")
    @classmethod
    def _walltime(cls, value: object) -> str:
        if not isinstance(value, str):
            raise KeyedValueError(None, f"walltime must be a quoted string, not {value!r}", WALLTIME_FORMS)
        try:
            return format_hms(parse_walltime(value))
        except ValueError as exc:
            raise KeyedValueError(None, str(exc), WALLTIME_FORMS) from None

    @field_validator("account", "queue", mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        return str(value) if numeric else value

    @field_validator("account", "queue", "job_name", mode="after")
    @classmethod
    def _word(cls, value: str | None) -> str | None:
        """Rendered unquoted into directives: one safe word, or the scheduler reads more."""
        if value is not None and not WORD.fullmatch(value):
            raise KeyedValueError(None, f"{value!r} cannot be written into a batch directive", WORD_ALLOWED)
        return value

    @field_validator("directives", mode="before")
    @classmethod
    def _directives(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("directives", mode="after")
    @classmethod
    def _directive_lines(cls, value: list[str]) -> list[str]:
        """Raw, but each item is one directive line (a newline would start a shell line)."""
        for line in value:
            _one_line(line, "directive")
        return value

    @property
    def walltime_seconds(self) -> int:
        return parse_walltime(self.walltime)


class LauncherConfig(_Part):
    """How ranks are started inside the allocation."""

    type: LauncherType = "mpiexec"
    command: str | None = None  # executable; "{python_bin}" is the dir of sys.executable (or its venv's base's)
    workers_per_node: int = Field(1, ge=1)
    args: list[str] = Field(default_factory=list)

    @field_validator("workers_per_node", mode="before")
    @classmethod
    def _count(cls, value: object) -> object:
        return _no_bool(value)

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: object) -> object:
        return _as_list(value)


class NodeConfig(_Part):
    """Hardware of one compute node and how GPUs are handed to worker ranks."""

    cores: int | None = Field(None, ge=1)
    #: equal sockets the cores are numbered over in order, and cores left to the system: what
    #: ``{cpu_bind_list}`` in launcher.args binds ranks by (:mod:`emews.site.cpu_bind`)
    sockets: int = Field(1, ge=1)
    reserved_cores: list[int] = Field(default_factory=list)
    gpus: int = Field(0, ge=0)
    gpus_per_worker: int = Field(0, ge=0)
    gpu_binding: GpuBinding = "env"
    gpu_env: GpuEnv = "CUDA_VISIBLE_DEVICES"
    gpu_ids: list[str] | None = None  # names written to gpu_env, default "0".."gpus-1"
    #: torch.distributed backend of a multi-rank task's ctx.process_group(): gloo (CPU), nccl
    #: (NVIDIA; AMD GPUs too, as RCCL under that name), xccl / ccl (Intel GPUs), mpi
    distributed_backend: Literal["gloo", "nccl", "xccl", "ccl", "mpi"] = "gloo"

    @field_validator("cores", "sockets", "gpus", "gpus_per_worker", mode="before")
    @classmethod
    def _count(cls, value: object) -> object:
        return _no_bool(value)

    @field_validator("gpu_ids", mode="before")
    @classmethod
    def _ids(cls, value: object) -> object:
        return [str(v) for v in value] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _check(self) -> NodeConfig:
        if self.gpus_per_worker > self.gpus:
            raise KeyedValueError(
                "node.gpus_per_worker",
                f"{self.gpus_per_worker} GPUs per worker is more than the node has (node.gpus: {self.gpus})",
                f"0..{self.gpus}",
            )
        if self.gpu_ids is not None and len(self.gpu_ids) != self.gpus:
            raise KeyedValueError(
                "node.gpu_ids",
                f"lists {len(self.gpu_ids)} ids for {self.gpus} gpus",
                f"exactly node.gpus ({self.gpus}) ids",
            )
        return self

    def device_names(self) -> list[str]:
        """Names of the node's devices as the GPU env var spells them."""
        if self.gpu_ids is not None:
            return list(self.gpu_ids)
        return [str(i) for i in range(self.gpus)]


class EnvironmentConfig(_Part):
    """Shell lines run before the launcher, and variables exported for every rank."""

    setup: list[str] = Field(default_factory=list)
    vars: dict[str, str] = Field(default_factory=dict)

    @field_validator("setup", mode="before")
    @classmethod
    def _setup(cls, value: object) -> object:
        return value.splitlines() if isinstance(value, str) else value

    @field_validator("vars", mode="before")
    @classmethod
    def _vars(cls, value: object) -> object:
        if isinstance(value, dict):
            for name, text in value.items():
                if isinstance(text, (Mapping, list, tuple, set)):  # a date (YAML's 2024-01-01) is its text
                    raise KeyedValueError(
                        None,
                        f"the value of {name} must be one value, not {type(text).__name__} {text!r}",
                        "text, a number or a boolean (quote a list to pass it as text)",
                    )
            return {
                str(k): ("" if v is None else str(v).lower() if isinstance(v, bool) else str(v))
                for k, v in value.items()
            }
        return value

    @field_validator("vars", mode="after")
    @classmethod
    def _var_names(cls, value: dict[str, str]) -> dict[str, str]:
        """Names are rendered as ``export NAME=...``: shell identifiers only (values are quoted)."""
        for name, text in value.items():
            if not IDENTIFIER.fullmatch(name):
                raise KeyedValueError(None, f"variable name {name!r} is not a shell identifier", IDENTIFIER_ALLOWED)
            if "\0" in text:
                raise KeyedValueError(None, f"the value of {name} contains a NUL byte", "any text without NUL bytes")
        return value


class SiteConfig(_Part):
    """A whole, resolved site."""

    name: str = "site"
    description: str = ""
    requires_account: bool = False
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    launcher: LauncherConfig = Field(default_factory=LauncherConfig)
    node: NodeConfig = Field(default_factory=NodeConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)

    @field_validator("name", mode="after")
    @classmethod
    def _name(cls, value: str) -> str:
        return _one_line(value, "site name")  # type: ignore[return-value]

    @model_validator(mode="after")
    def _check(self) -> SiteConfig:
        node, launcher = self.node, self.launcher
        if node.gpus_per_worker and node.gpu_binding == "launcher" and launcher.type not in GPU_BINDING_LAUNCHERS:
            raise KeyedValueError(
                "node.gpu_binding",
                f"launcher {launcher.type!r} cannot bind GPUs itself",
                "env, or launcher with " + " or ".join(GPU_BINDING_LAUNCHERS),
            )
        if node.gpus_per_worker and node.gpu_binding == "env" and launcher.type == "jsrun":
            raise KeyedValueError("node.gpu_binding", "jsrun hands GPUs to resource sets itself", "launcher")
        return self
