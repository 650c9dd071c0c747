"""The schema of a workflow file: one pydantic model per section, checked as the file is read.

Each section model refuses unknown keys (``extra="forbid"``) and says what it allows; the
parameter models build their own dimension type (:mod:`emews.core.space`).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_serializer,
    field_validator,
    model_validator,
)

from emews.core.direction import Direction
from emews.core.errors import KeyedValueError
from emews.core.space import Categorical, Constant, Dimension, Float, Int, Ordered
from emews.core.task_size import ALLOWED as TASK_SIZE_ALLOWED
from emews.objective.command import RUN_DIR_FILE_ALLOWED, CommandRef, ParamsStyle, ResultSource, run_dir_name
from emews.objective.function import ObjectiveRef
from emews.site.walltime import DURATION_FORMS, WALLTIME_FORMS, format_hms, parse_duration, parse_walltime
from emews.store.postgres_url import URL_ALLOWED, check_url, lease_seconds


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: a finite number: ``1`` and ``1.5`` yes, ``"1.5"``, ``true`` and ``.inf`` no
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class _RangeParam(_Strict):
    """``int`` and ``float``: bounds, ``log``, GA ``sigma``; each builds its own dimension type."""

    type: str
    lower: Number
    upper: Number
    log: StrictBool = False
    sigma: Number | None = None

    #: Optuna's names of these keys (suggest_float(name, low, high)): said as what to write here
    other_names: ClassVar[dict[str, str]] = {"low": "lower", "high": "upper"}
    dimension_type: ClassVar[builtins.type[Int] | builtins.type[Float]]  # `type` is a field here

    def dimension(self) -> Dimension:
        return self.dimension_type(self.lower, self.upper, self.log, self.sigma)  # type: ignore[arg-type]  # Int checks its bounds are integers


class IntParam(_RangeParam):
    type: Literal["int"]
    lower: StrictInt
    upper: StrictInt

    dimension_type = Int


class FloatParam(_RangeParam):
    type: Literal["float"]

    dimension_type = Float


class _ChoiceParam(_Strict):
    """``categorical`` and ``ordered``: a list of values."""

    type: str
    values: list[Any]

    #: Optuna's name of this key (suggest_categorical(name, choices)): said as what to write here
    other_names: ClassVar[dict[str, str]] = {"choices": "values"}
    dimension_type: ClassVar[builtins.type[Categorical]]  # `type` is a field here

    def dimension(self) -> Dimension:
        return self.dimension_type(tuple(self.values))


class CategoricalParam(_ChoiceParam):
    type: Literal["categorical"]

    dimension_type = Categorical


class OrderedParam(_ChoiceParam):
    type: Literal["ordered"]
    sigma: Number | None = None  # GA: a Gaussian step of this many positions

    dimension_type = Ordered

    def dimension(self) -> Dimension:
        return Ordered(tuple(self.values), self.sigma)


class ConstantParam(_Strict):
    type: Literal["constant"]
    value: Any

    def dimension(self) -> Dimension:
        return Constant(self.value)


ParamSpec = Annotated[
    IntParam | FloatParam | CategoricalParam | OrderedParam | ConstantParam, Field(discriminator="type")
]


PARAM_MODELS: dict[Any, type[BaseModel]] = {
    "int": IntParam,
    "float": FloatParam,
    "categorical": CategoricalParam,
    "ordered": OrderedParam,
    "constant": ConstantParam,
}


class OptimizerSection(_Strict):
    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class TrialSchedulerSection(_Strict):
    """``trial_scheduler:``, which decides on training reports (``emews.training.schedulers``)."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class CheckpointSection(_Strict):
    """How ``ctx.report(checkpoint=...)`` writes (on a background thread by default, or in the
    call; ``local_dir``: staged on a node-local tier first, then flushed to the experiment) and
    which checkpoints are kept (all by default; see ``emews.training.retention``)."""

    background: StrictBool = True
    local_dir: str | None = Field(None, min_length=1)  # node-local tier, flushed to the experiment dir
    keep_last: StrictInt | None = Field(None, ge=1)
    keep_best: StrictInt | None = Field(None, ge=0)
    keep_best_experiment: StrictInt | None = Field(None, ge=0)


class WalltimeSection(_Strict):
    """Pausing trials before the allocation ends: ``limit`` (HH:MM:SS from the job's start; default:
    the batch system's end time from the environment, else the batch site's walltime), ``margin``
    (seconds before the end) and ``grace`` (seconds a stop signal leaves running trials to pause at
    their next report before they are aborted: keep it below the batch system's kill wait)."""

    limit: str | None = None
    margin: Number = Field(300.0, ge=0)
    grace: Number = Field(20.0, ge=0)

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: Any) -> str | None:
        return _duration(value)


def _duration(value: Any, parse: Callable[[str], int] = parse_walltime, forms: str = WALLTIME_FORMS) -> str | None:
    """A duration as text (``HH:MM:SS`` or ``HH:MM``; with ``parse_duration`` also ``2h``); a bare
    number is refused (seconds or hours: it does not say)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise KeyedValueError(None, f"must be a quoted string, not {value!r}", forms)
    try:
        parse(value)
    except ValueError as exc:
        raise KeyedValueError(None, str(exc), forms) from None
    return value


class ObjectiveSection(_Strict):
    """A Python function (``module``) or an external program (``command``), and the metric."""

    module: str | None = None
    function: str | None = None  # default "run"
    command: list[str] | None = Field(None, min_length=1)
    metric: str = "value"
    direction: Direction = Direction.MINIMIZE
    params: ParamsStyle | None = None  # default flags
    params_file: str | None = None  # default params.json
    result: ResultSource | None = None  # default stdout
    result_file: str | None = None
    defaults: str | None = None

    #: keys that only a command objective reads
    COMMAND_KEYS: ClassVar[tuple[str, ...]] = ("params", "params_file", "result", "result_file")

    @field_serializer("direction")
    def _direction_name(self, direction: Direction) -> str:
        return direction.value  # workflow.yaml holds the name

    @field_validator("command", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: Any) -> Any:
        """``[python3, model.py, --epochs, 5]``: YAML reads ``5`` as a number; an argument is its text."""
        if isinstance(value, list):
            return [str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in value]
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> ObjectiveSection:
        if (self.module is None) == (self.command is None):
            raise KeyedValueError(
                "objective",
                "give either module (a Python function) or command (a program to run), not both or neither",
                "module: FILE.py | package.module, or command: [program, arg, ...]",
            )
        if self.module is not None:
            extra = [k for k in self.COMMAND_KEYS if getattr(self, k) is not None]
            if extra:
                raise KeyedValueError(
                    f"objective.{extra[0]}",
                    "only a command objective takes this key",
                    "module, function, metric, direction, defaults",
                )
        elif self.function is not None:
            raise KeyedValueError(
                "objective.function",
                "a command objective has no function",
                ", ".join(k for k in self.model_fields if k not in ("module", "function")),
            )
        if self.params == "candle" and self.defaults is None:
            raise KeyedValueError(
                "objective.defaults",
                "params: candle hands the model a config file built from its defaults, and none are named",
                "a CANDLE default model file ([Global_Params]), as *_default_model.txt",
            )
        if self.params_file is not None and not self.params_file.endswith((".json", ".yaml", ".yml")):
            raise KeyedValueError(
                "objective.params_file",
                f"{self.params_file!r} is neither JSON nor YAML",
                "a file name ending in .json, .yaml or .yml",
            )
        named = {key: getattr(self, key) for key in ("params_file", "result_file")}
        for key, name in named.items():
            try:
                if name is not None:
                    run_dir_name(name)
            except ValueError as exc:
                raise KeyedValueError(f"objective.{key}", str(exc), RUN_DIR_FILE_ALLOWED) from None
        return self

    def ref(self) -> ObjectiveRef | CommandRef:
        """What the runners load: the module's function, or the command."""
        if self.command is not None:
            return CommandRef(
                tuple(self.command),
                self.metric,
                self.params or "flags",
                self.params_file or "params.json",
                self.result or "stdout",
                self.result_file,
                self.defaults,
            )
        assert self.module is not None
        return ObjectiveRef(self.module, self.function or "run", self.metric, self.defaults)


#: alike failures that stop a run (``budget.fail_fast``). A broken set-up (an argv its parser
#: rejects, a path, an import) fails every evaluation alike; a sound one whose points fail half the
#: time, alike, starts so in 1 run of 32; and with five or more workers the first five results come
#: with the first wave of tasks, which a longer wait would not save
DEFAULT_FAIL_FAST = 5


#: what ``budget`` takes; at least one of evaluations, steps and time
BUDGET_ALLOWED = (
    "evaluations: N, steps: N (training steps reported, summed over trials), time: 'HH:MM:SS' or '2h' "
    "(wall time of the experiment's runs); whichever is reached first ends the run "
    "(a sweep's evaluations default to its number of points)"
)


class BudgetSection(_Strict):
    """When the run ends: ``evaluations``, ``steps`` (``ctx.report`` steps, each trial's highest,
    summed over trials) or ``time`` (wall time, the experiment's runs together), whichever first."""

    evaluations: StrictInt | None = Field(None, gt=0)
    steps: StrictInt | None = Field(None, gt=0)
    time: str | None = None
    #: stop the run (exit 1) when its first this many evaluations all fail with one cause; 0: never
    fail_fast: StrictInt = Field(DEFAULT_FAIL_FAST, ge=0)

    @field_validator("time", mode="before")
    @classmethod
    def _time(cls, value: Any) -> str | None:
        return _duration(value, parse_duration, DURATION_FORMS)

    @property
    def seconds(self) -> int | None:
        """``time`` in seconds (``None``: no time budget)."""
        return None if self.time is None else parse_duration(self.time)

    def describe(self) -> str:
        """``12``, or what each given limit is: ``12 evaluations or 20 steps or 00:30:00``."""
        if self.steps is None and self.time is None:
            return str(self.evaluations)
        parts = [
            f"{self.evaluations} evaluations" if self.evaluations is not None else None,
            f"{self.steps} steps" if self.steps is not None else None,
            None if self.seconds is None else format_hms(self.seconds),
        ]
        return " or ".join(p for p in parts if p is not None)


class TaskSection(_Strict):
    timeout: Number | None = Field(None, gt=0)
    isolation: Literal["process", "inline"] = "process"
    memory_limit: int | None = None
    #: a crashed or timed-out task runs again this many times (resuming from its last durable checkpoint)
    retries: StrictInt = Field(0, ge=0)
    #: worker ranks per task: a number, a parameter, module:function of the point, or "optimizer"
    ranks: StrictInt | str = 1

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> Any:
        """Seconds, or a duration as ``budget.time`` takes it (``'90m'``, ``'1h30m'``, ``'01:30:00'``)."""
        if not isinstance(value, str):
            return value
        try:
            return float(parse_duration(value))
        except ValueError as exc:
            raise KeyedValueError(None, str(exc), f"a number of seconds > 0, or {DURATION_FORMS}") from None

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value < 1:
            raise KeyedValueError(None, f"a task needs at least 1 rank, got {value}", TASK_SIZE_ALLOWED)
        if isinstance(value, str) and not value.strip():
            raise KeyedValueError(None, "is empty", TASK_SIZE_ALLOWED)
        return value

    @field_validator("memory_limit", mode="before")
    @classmethod
    def _bytes(cls, value: Any) -> int | None:
        return parse_memory(value)


#: the longest ``store.lease``: a pool's feeder sleeps a third of it in one ``select`` (whose
#: timeout overflows past about 24 days) and the server adds it to ``now()``
LEASE_MAX = 7 * 24 * 3600


class StoreSection(_Strict):
    """Where the results store is (``url``: a PostgreSQL database, docs/postgres.md; none: SQLite
    in the experiment directory, or ``EMEWS_STORE_URL``) and how hard it pushes commits to disk."""

    durability: Literal["normal", "full", "off"] = "normal"
    url: str | None = None
    #: seconds a pool's claim lasts without a heartbeat (60), at most a week (:data:`LEASE_MAX`)
    lease: Number | None = Field(None, gt=0, le=LEASE_MAX)
    retry: float | None = Field(None, gt=0)  # seconds a lost connection to a pooled store is tried again (120)

    @property
    def lease_seconds(self) -> float:
        """``lease``, or its default: 60 s (:func:`~emews.store.postgres_url.lease_seconds`)."""
        return lease_seconds(self.lease)

    @property
    def retry_seconds(self) -> float:
        """``retry``, or its default: 120 s."""
        return 120.0 if self.retry is None else self.retry

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_url(value)
        except ValueError as exc:
            raise KeyedValueError(None, str(exc), URL_ALLOWED) from None


#: what a workflow's ``name`` may be: it names the default experiment directory
NAME_ALLOWED = "one folder name: no '/', not '.' or '..', printable (experiments/NAME-001)"


class WorkflowModel(_Strict):
    name: str | None = None
    description: str | None = None
    seed: StrictInt | None = None
    optimizer: OptimizerSection
    objective: ObjectiveSection
    space: dict[str, Any] = Field(default_factory=dict)
    budget: BudgetSection = Field(default_factory=BudgetSection)  # a sweep's defaults to its points
    replicates: StrictInt = Field(1, ge=1)  # each point runs this many times (emews.core.replicates)
    task: TaskSection = Field(default_factory=TaskSection)
    store: StoreSection = Field(default_factory=StoreSection)
    trial_scheduler: TrialSchedulerSection | None = None
    checkpoints: CheckpointSection = Field(default_factory=CheckpointSection)
    walltime: WalltimeSection = Field(default_factory=WalltimeSection)

    @field_validator("name")
    @classmethod
    def _one_folder_name(cls, value: str | None) -> str | None:
        """The default experiment directory is ``experiments/NAME-NNN``: a path (``../x``, ``/x``)
        would put it elsewhere."""
        if value is not None and (value in ("", ".", "..") or "/" in value or not value.isprintable()):
            raise KeyedValueError(None, f"{value!r} is not one folder name", NAME_ALLOWED)
        return value


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.I)


_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_memory(text: str | int | None) -> int | None:
    """``"2GB"`` / ``"512MiB"`` / ``1073741824`` -> bytes (at least 1)."""
    if text is None:
        return None
    match = _SIZE.match(text) if isinstance(text, str) else None
    if isinstance(text, int) and not isinstance(text, bool):
        size = text
    elif match:
        size = int(float(match.group(1)) * _UNITS[(match.group(2) or "").upper()[:1]])
    else:
        raise ValueError(
            f"cannot read {text!r} as a memory size; allowed: a byte count or a size such as 2GB or 512MiB"
        )
    if size <= 0:
        raise ValueError(f"must be more than 0 bytes, got {text!r}")
    return size
