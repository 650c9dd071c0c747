"""Workflow files: optimizer + objective + space + budget + task options.

``emews launch NAME`` finds ``./workflows/NAME.yaml`` first, then the built-in
workflows; a path to a ``.yaml`` file works too. Relative paths inside a
workflow (objective module, space file, optimizer file) are resolved once, at
load time, so the copy written into the experiment directory is self-contained.
"""

from __future__ import annotations

import builtins
import importlib.resources
import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    TypeAdapter,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from emews.config.plugins import (
    OPTIMIZERS,
    TRIAL_SCHEDULERS,
    PluginNotFound,
    options_model,
    path_options,
    validate_options,
)
from emews.config.shadowing import shadowing_problem
from emews.config.space_names import other_tool_problems
from emews.config.validation import config_error
from emews.config.yamlio import load_mapping, set_dotted
from emews.core.direction import Direction
from emews.core.errors import ConfigError, EmewsError, KeyedValueError, brief, closest, did_you_mean
from emews.core.imports import is_file_ref
from emews.core.replicates import REPLICATE
from emews.core.space import Categorical, Constant, Dimension, Float, Int, Ordered, Space, SpaceError, load_candle_json
from emews.core.task_size import ALLOWED as TASK_SIZE_ALLOWED
from emews.core.task_size import FunctionSize, ParameterSize, TaskSize, TaskSizeError, parse_task_size
from emews.objective.candle_params import expression_problem
from emews.objective.command import (
    RUN_DIR_FILE_ALLOWED,
    TASK_PLACEHOLDERS,
    CommandRef,
    ParamsStyle,
    ResultSource,
    run_dir_name,
)
from emews.objective.function import ObjectiveFunctionError, ObjectiveLoadError, ObjectiveRef
from emews.objective.shellscript import find_script, rewrite_words
from emews.site.walltime import DURATION_FORMS, WALLTIME_FORMS, format_hms, parse_duration, parse_walltime
from emews.store.postgres_url import URL_ALLOWED, check_url


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
_PARAM_MODELS: dict[Any, type[BaseModel]] = {
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
        """``lease``, or its default: 60 s."""
        return 60.0 if self.lease is None else self.lease

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


class Workflow:
    """A validated workflow with its paths resolved."""

    def __init__(self, model: WorkflowModel, source: Path, space: Space, label: str | None = None) -> None:
        self.model = model
        self.source = source  # relative paths were resolved against its folder
        self.space = space
        self.label = label or str(source)  # what error messages call it: the file, or ``emews.run``
        self.task_size: TaskSize = parse_task_size(model.task.ranks, space)

    def check_task_size(self, workers: int) -> None:
        """Raise a ConfigError when ``task.ranks`` cannot fit a job of ``workers`` worker ranks."""
        problem = self.task_size.check(workers, self.space)
        if problem is not None:
            raise ConfigError(
                problem,
                file=self.label,
                key="task.ranks",
                allowed=f"sizes from 1 to {workers} (the job's worker ranks)",
            )

    @property
    def name(self) -> str:
        return self.model.name or self.source.stem

    @property
    def seed(self) -> int:
        if self.model.seed is not None:
            return self.model.seed
        seed = self.model.optimizer.options.get("seed")
        return seed if isinstance(seed, int) else 0

    @property
    def objective(self) -> ObjectiveRef | CommandRef:
        return self.model.objective.ref()

    def warnings(self) -> list[str]:
        """What may fail at run time though it need not (said at check and launch, not refused): a
        command objective's ``#!`` interpreter missing here (a site's ``module load`` may bring it)."""
        objective = self.objective
        problem = objective.interpreter_problem() if isinstance(objective, CommandRef) else None
        if problem is None:
            return []
        return [
            f"{self.label}: objective.command: {problem} (fine if the site's environment.setup, a "
            f"module load, provides it; emews check --try runs the command here)"
        ]

    def optimizer_class(self) -> type:
        return OPTIMIZERS.resolve(self.model.optimizer.name)

    def make_optimizer(self) -> Any:
        """The optimizer, built from the options validated against its signature (Paths as ``Path``)."""
        cls = self.optimizer_class()
        return cls(**validate_options(cls, self.model.optimizer.options))

    def make_trial_scheduler(self) -> Any:
        """The trial scheduler (``None`` when the workflow has none), built from its validated options."""
        section = self.model.trial_scheduler
        if section is None:
            return None
        cls = TRIAL_SCHEDULERS.resolve(section.name, self.source.parent)
        return cls(**validate_options(cls, section.options))

    def to_dict(self) -> dict[str, Any]:
        """The resolved workflow (space inlined, paths absolute), as written to the experiment dir."""
        data = self.model.model_dump(exclude_none=True)
        data["name"] = self.name
        data["space"] = {name: dim.to_spec() for name, dim in self.space.dimensions.items()}
        return data


def builtin_workflow_dir() -> Path:
    return Path(str(importlib.resources.files("emews.workflows")))


def available_workflows() -> list[str]:
    names = {p.stem for p in builtin_workflow_dir().glob("*.yaml")}
    names.update(p.stem for p in Path("workflows").glob("*.yaml"))
    return sorted(names)


def find_workflow_file(ref: str) -> Path:
    """A path, ``./workflows/REF.yaml``, or the built-in ``REF.yaml``."""
    if ref.endswith((".yaml", ".yml")) or "/" in ref:
        path = Path(ref)
        if not path.is_file():
            raise ConfigError("workflow file does not exist" + _near_miss(ref, Path.cwd()), file=ref)
        return path.resolve()
    for folder in (Path("workflows"), builtin_workflow_dir()):
        candidate = folder / f"{ref}.yaml"
        if candidate.is_file():
            return candidate.resolve()
    raise ConfigError(
        f"unknown workflow {ref!r}" + did_you_mean(ref, available_workflows()),
        key="WORKFLOW",
        allowed=", ".join(available_workflows()) + ", or a path to a .yaml file",
    )


def _resolve_path(text: str, workflow_dir: Path, builtin_dir: Path | None = None) -> Path | None:
    """Find a relative path: cwd, the workflow's folder, its parent, then a built-in folder."""
    path = Path(text)
    if path.is_absolute():
        return path if path.exists() else None
    candidates = [Path.cwd() / path, workflow_dir / path, workflow_dir.parent / path]
    if builtin_dir is not None:
        candidates.append(builtin_dir / path.name)
    return next((c.resolve() for c in candidates if c.exists()), None)


def _existing_path(
    text: str,
    workflow_dir: Path,
    *,
    what: str,
    file: str,
    key: str,
    allowed: str,
    builtin_dir: Path | None = None,
    file_only: bool = False,
) -> Path:
    """:func:`_resolve_path` (a file when ``file_only``), or the ConfigError that names ``key``:
    "``what`` TEXT does not exist"."""
    found = _resolve_path(text, workflow_dir, builtin_dir)
    if found is None or (file_only and not found.is_file()):
        raise ConfigError(
            f"{what} {text} does not exist" + _near_miss(text, workflow_dir), file=file, key=key, allowed=allowed
        )
    return found


def _near_miss(text: str, workflow_dir: Path) -> str:
    """``"; did you mean 'objectives/model.py'?"`` when a file in the folder ``text`` names (from
    the current or the workflow's folder) has a name close to its own (``modle.py``, ``model``)."""
    path = Path(text)
    folders = [path.parent] if path.is_absolute() else [Path.cwd() / path.parent, workflow_dir / path.parent]
    names: set[str] = set()
    for folder in folders:
        try:
            names.update(entry.name for entry in folder.iterdir() if entry.is_file())
        except OSError:
            continue
    close = f"{path.name}.py" if f"{path.name}.py" in names else closest(path.name, sorted(names))  # .py left out
    return f"; did you mean {str(path.parent / close)!r}?" if close is not None else ""


_PARAM: TypeAdapter[Any] = TypeAdapter(ParamSpec)


def _build_space(raw: dict[str, Any], file: str, workflow_dir: Path, open_points: bool = False) -> Space:
    """``{file: params.json}`` (a CANDLE GA JSON) or a mapping of parameter specs; ``open_points``:
    an open space (see :class:`~emews.core.space.Space`), which may be empty."""
    if set(raw) == {"file"} and isinstance(raw["file"], str):
        path = _resolve_path(raw["file"], workflow_dir)
        if path is None:
            raise ConfigError(f"space file {raw['file']} does not exist", file=file, key="space.file")
        try:
            space = load_candle_json(path)
        except SpaceError as exc:
            raise ConfigError(exc.detail, file=str(path), key=exc.key) from None
        return space.opened() if open_points else space
    dims: dict[str, Dimension] = {}
    problems: list[ConfigError] = []
    for name, entry in raw.items():
        try:
            dims[name] = _dimension(str(name), entry, file)
        except ConfigError as exc:
            problems.append(exc)  # every parameter's mistakes, not only the first one's
    if problems:
        raise ConfigError.together(problems)
    try:
        return Space(dims, open=open_points)
    except SpaceError as exc:
        raise ConfigError(
            exc.detail,
            file=file,
            key=exc.key,
            allowed=None
            if open_points
            else "a space is optional only for a sweep over a points "
            "file (optimizer: {name: sweep, options: {file: points.txt}})",
        ) from None


def _dimension(name: str, entry: Any, file: str) -> Dimension:
    """The dimension of one ``space`` entry (a ConfigError naming ``space.NAME``)."""
    if not isinstance(entry, dict):
        raise ConfigError(
            f"expected a mapping such as {{type: float, lower: 0, upper: 1}}, got {brief(entry)}",
            file=file,
            key=f"space.{name}",
        )
    others = other_tool_problems(entry)  # Ray Tune's loguniform as a type, Optuna's step
    if others:
        raise ConfigError.together(
            [
                ConfigError(message, file=file, key=f"space.{name}.{key}", allowed=allowed)
                for key, message, allowed in others
            ]
        )
    try:
        spec = _PARAM.validate_python(entry)
    except ValidationError as exc:
        kind = entry.get("type")  # any YAML value: a mapping or a list is no type (and unhashable)
        model = _PARAM_MODELS.get(kind) if isinstance(kind, str) else None
        raise config_error(exc, model, file, ("space", name), skip=1 if model else 0) from None
    try:
        return spec.dimension()
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc), file=file, key=f"space.{name}") from None


def _check_replicates(model: WorkflowModel, space: Space, file: str) -> None:
    if REPLICATE in space.dimensions:
        raise ConfigError(
            f"the parameter name {REPLICATE!r} is the replicate index when replicates > 1",
            file=file,
            key=f"space.{REPLICATE}",
            allowed="another name",
        )
    if model.budget.evaluations is not None and model.budget.evaluations < model.replicates:
        raise ConfigError(
            f"a budget of {model.budget.evaluations} evaluations cannot run one point {model.replicates} times",
            file=file,
            key="budget.evaluations",
            allowed=f"at least replicates ({model.replicates}); each point costs that many",
        )


def _takes_open_points(optimizer: OptimizerSection) -> bool:
    """Whether the optimizer, with its options, runs points that need no complete space (a UPF sweep).
    An optimizer that cannot be loaded is reported later, by :func:`check_workflow`."""
    try:
        optimizer_class: Any = OPTIMIZERS.resolve(optimizer.name)  # an Optimizer subclass
        return bool(optimizer_class.takes_open_points(optimizer.options))
    except Exception:
        return False


#: workflow keys renamed: old -> new. The old key still loads, for one release, with a notice.
RENAMED_KEYS = {"scheduler": "trial_scheduler"}
_noticed: set[tuple[str, str]] = set()  # (file, old key): one notice per file and process


def rename_old_keys(data: dict[str, Any], file: str) -> None:
    """Rename the old keys of ``data`` (read from ``file``) in place, with a one-line notice on
    stderr naming the file and the new key; the old and the new key together are an error."""
    for old, new in RENAMED_KEYS.items():
        if old not in data:
            continue
        if new in data:
            raise ConfigError(
                f"both {old!r} and {new!r}: {old!r} is the old name of {new!r}",
                file=file,
                key=old,
                allowed=f"{new} only",
            )
        data[new] = data.pop(old)
        if (file, old) not in _noticed:
            _noticed.add((file, old))
            print(
                f"emews: notice: {file}: {old!r} is now {new!r} (rename it; the old key is read until the "
                "next release)",
                file=sys.stderr,
            )


def load_workflow(ref: str, overrides: Mapping[str, Any] | None = None, *, check_imports: bool = True) -> Workflow:
    """Read, validate and resolve a workflow; raise ConfigError naming file and key."""
    path = find_workflow_file(ref)
    data = load_mapping(path)
    rename_old_keys(data, str(path))
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value, f"--set {key}")
    try:
        return workflow_from_mapping(data, path, check_imports=check_imports)
    except ConfigError as exc:
        if not overrides:
            raise
        raise _blamed_on_overrides(exc, overrides) from None


def _blamed_on_overrides(exc: ConfigError, overrides: Mapping[str, Any]) -> ConfigError:
    """``exc`` with each problem whose key a ``--set`` gave (or lies under one) blamed on ``--set``,
    not on the workflow file (``--set budget.evaluations=abc`` named the file)."""

    def source(problem: ConfigError) -> str | None:
        key = problem.key
        given = key is not None and any(key == k or key.startswith(k + ".") for k in overrides)
        return "--set" if given else problem.file

    problems = [exc, *exc.more]
    relabelled = [ConfigError(p.message, file=source(p), key=p.key, allowed=p.allowed) for p in problems]
    return ConfigError.together(relabelled)


def workflow_from_mapping(
    data: dict[str, Any], path: Path, *, label: str | None = None, check_imports: bool = True
) -> Workflow:
    """Validate and resolve a workflow given as data (a file's, or ``emews.run``'s arguments);
    ``path``: the file it is (or stands for: relative paths are looked up in its folder and the
    current one), ``label``: what messages call it (default: the path)."""
    file = label or str(path)
    try:
        model = WorkflowModel.model_validate(data)
    except ValidationError as exc:
        problems = [config_error(exc, WorkflowModel, file)]
        if isinstance(data.get("space"), dict):  # its parameters' mistakes too, in the same message
            try:
                _build_space(data["space"], file, path.parent, open_points=True)
            except ConfigError as more:
                problems.append(more)
        raise ConfigError.together(problems) from None
    if model.task.memory_limit is not None and model.task.isolation != "process":
        raise ConfigError(
            "memory_limit needs isolation: process (an inline objective shares the worker's memory)",
            file=file,
            key="task.memory_limit",
        )
    space = _build_space(model.space, file, path.parent, _takes_open_points(model.optimizer))
    if model.replicates > 1:
        _check_replicates(model, space, file)
    _resolve_objective(model.objective, path.parent, file)
    for section in (model.optimizer, model.trial_scheduler):
        if section is not None:
            _resolve_class_file(section, path.parent)
    _resolve_task_size(model, space, path.parent, file)
    workflow = Workflow(model, path, space, file)
    _check_inline_teams(workflow, file)
    _check_trial_scheduler(workflow, file)
    if check_imports:
        check_workflow(workflow)
    _resolve_budget(workflow, file)
    return workflow


def _resolve_budget(workflow: Workflow, file: str) -> None:
    """Without ``budget.evaluations`` a sweep runs its points (each ``replicates`` times); a budget
    needs one of evaluations, steps and time."""
    budget, model = workflow.model.budget, workflow.model
    if budget.evaluations is None:
        try:
            optimizer_class: Any = workflow.optimizer_class()  # an Optimizer subclass
            points = optimizer_class.planned_evaluations(model.optimizer.options, workflow.space)
        except Exception:  # an optimizer that cannot be loaded, a bad points file: reported by check_workflow
            points = None
        if points:
            budget.evaluations = points * model.replicates
    if budget.evaluations is None and budget.steps is None and budget.time is None:
        raise ConfigError("no budget: the run would not end", file=file, key="budget", allowed=BUDGET_ALLOWED)


def _resolve_task_size(model: WorkflowModel, space: Space, workflow_dir: Path, file: str) -> None:
    """``task.ranks`` names a parameter, a function (its file made absolute) or a number."""
    try:
        size = parse_task_size(model.task.ranks, space)
    except TaskSizeError as exc:
        raise ConfigError(str(exc), file=file, key="task.ranks", allowed=TASK_SIZE_ALLOWED) from None
    problem = size.value_problem(space) if isinstance(size, ParameterSize) else None
    if problem is not None:  # no job runs it, whatever its width: said by emews check too
        raise ConfigError(problem, file=file, key="task.ranks", allowed=TASK_SIZE_ALLOWED)
    if isinstance(size, FunctionSize):
        module, _, name = size.ref.rpartition(":")
        if module.endswith(".py") or "/" in module:
            found = _existing_path(
                module, workflow_dir, what="task size file", file=file, key="task.ranks", allowed=TASK_SIZE_ALLOWED
            )
            model.task.ranks = f"{found}:{name}"


def _check_inline_teams(workflow: Workflow, file: str) -> None:
    """Inline multi-rank tasks need ``task.timeout``: a member blocked in ``ctx.comm`` cannot be
    interrupted, and only the timeout tells the job to end (``runtime.teams.TeamStranded``)."""
    task = workflow.model.task
    if task.isolation == "inline" and task.timeout is None and workflow.task_size.gang:
        raise ConfigError(
            "inline multi-rank tasks (task.ranks) need a timeout: a member blocked in ctx.comm "
            "cannot be interrupted, and the job ends when a team has not ended after it",
            file=file,
            key="task.timeout",
            allowed="a number of seconds > 0, or isolation: process",
        )


def _check_trial_scheduler(workflow: Workflow, file: str) -> None:
    """The ``trial_scheduler:`` section names a scheduler whose options are valid together."""
    section = workflow.model.trial_scheduler
    if section is None:
        return
    try:
        cls = TRIAL_SCHEDULERS.resolve(section.name, workflow.source.parent)
    except PluginNotFound as exc:
        raise ConfigError(str(exc), file=file, key="trial_scheduler.name", allowed=TRIAL_SCHEDULERS.allowed()) from None
    try:
        validate_options(cls, section.options)
    except ValidationError as exc:
        raise config_error(exc, options_model(cls), file, ("trial_scheduler", "options")) from None
    if getattr(cls, "exploits", False) and workflow.model.replicates > 1:  # a TrialScheduler class
        raise ConfigError(
            f"trial_scheduler {section.name} exploits (a trial takes another point's parameters and "
            f"replicate index), so the replicates of a point would mix points",
            file=file,
            key="replicates",
            allowed="1 with this trial_scheduler, or a trial_scheduler that does not exploit (asha, hyperband, median)",
        )
    try:
        workflow.make_trial_scheduler().bind(
            metric=workflow.model.objective.metric,
            direction=workflow.model.objective.direction,
            space=workflow.space,
            seed=workflow.seed,
        ).check()
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), file=file, key="trial_scheduler.options") from None


def _resolve_objective(objective: ObjectiveSection, workflow_dir: Path, file: str) -> None:
    if objective.defaults is not None:
        found = _existing_path(
            objective.defaults,
            workflow_dir,
            what="model defaults file",
            file=file,
            key="objective.defaults",
            allowed="a CANDLE default model file ([Global_Params]) relative to the current or the workflow's folder",
            file_only=True,
        )
        objective.defaults = str(found)
    if objective.command is not None:
        command = [_resolve_argument(arg, workflow_dir) for arg in objective.command]
        _check_interpreted_script(command, file)
        script = find_script(command)
        if script is not None:  # the files a shell's command string names, as argv items
            command[script] = rewrite_words(command[script], lambda word: _resolve_argument(word, workflow_dir))
        objective.command = command
        return
    module = objective.module
    assert module is not None
    if module.endswith(".py") or "/" in module:
        builtin = Path(str(importlib.resources.files("emews.objectives")))
        found = _existing_path(
            module,
            workflow_dir,
            what="objective file",
            file=file,
            key="objective.module",
            allowed="a path to a .py file (relative to the current or the workflow's folder) or an importable "
            "module name",
            builtin_dir=builtin,
        )
        objective.module = str(found)


#: programs whose first argument that is not an option is the script they run
_INTERPRETER = re.compile(r"^(?:python[0-9.]*|bash|sh|zsh|Rscript|perl|julia|ruby|node)$")
_SCRIPT_SUFFIXES = (".py", ".sh", ".R", ".r", ".jl", ".pl", ".rb", ".js")


def _check_interpreted_script(command: Sequence[str], file: str) -> None:
    """``[python3, nt4.py]`` whose script exists nowhere is refused now (every task failed with
    "can't open file" in its run dir, and only ``check --try`` said so): an interpreter's script
    argument that :func:`_resolve_argument` did not find (it stays relative) or that is missing."""
    if len(command) < 2 or not _INTERPRETER.match(Path(command[0]).name):
        return
    script = command[1]
    if script.startswith("-") or "{" in script or not script.endswith(_SCRIPT_SUFFIXES):
        return
    if not Path(script).is_absolute() or not Path(script).is_file():
        raise ConfigError(
            f"the script {script!r} that {command[0]} runs does not exist",
            file=file,
            key="objective.command",
            allowed="a script path relative to the current or the workflow's folder, or absolute",
        )


def _resolve_argument(arg: str, workflow_dir: Path) -> str:
    """A command argument naming an existing file (``model.py``, ``./model.sh``) made absolute: the
    command runs in the task's run dir. Options, placeholders and other words stay as written."""
    if arg.startswith("-") or "{" in arg or not arg:
        return arg
    found = _resolve_path(arg, workflow_dir)
    return str(found) if found is not None and found.is_file() else arg


def _check_placeholders(objective: ObjectiveSection, space: Space, defaults: Mapping[str, Any], file: str) -> None:
    """Every ``{name}`` in the command names a parameter, a model default or a task value (a points
    file's keys, in an open space, are known only per line: not checked)."""
    if objective.command is None or space.open:
        return
    known = set(space.names) | set(space.dimensions) | set(defaults) | set(TASK_PLACEHOLDERS)
    unknown = sorted(objective.ref().placeholders - known)  # type: ignore[union-attr]
    if unknown:
        raise ConfigError(
            f"{{{unknown[0]}}} names no parameter",
            file=file,
            key="objective.command",
            allowed=", ".join(f"{{{n}}}" for n in [*space.dimensions, *TASK_PLACEHOLDERS]),
        )


def _check_candle_values(objective: ObjectiveSection, space: Space, defaults: Mapping[str, Any], file: str) -> None:
    """What a CANDLE model run as a command would not read as meant: with ``params: candle``, a
    value of the space that is a Python expression as text (:func:`expression_problem`); with
    ``params: flags`` and a CANDLE default model (``defaults:``), a boolean of the space or a true
    default, which flags pass as a bare ``--name`` (``false`` left out) where CANDLE's parser takes
    ``--name True`` (``str2bool``) and refuses a bare flag."""
    if objective.command is None:
        return
    listed = {name: _listed_values(dim) for name, dim in space.dimensions.items()}
    if objective.params == "candle":
        for name, values in listed.items():
            problem = next(filter(None, map(expression_problem, values)), None)
            if problem is not None:
                raise ConfigError(problem, file=file, key=f"space.{name}")
    elif (objective.params or "flags") == "flags" and objective.defaults is not None:
        used = objective.ref().placeholders  # type: ignore[union-attr]  # {name}: no flag of its own
        booleans = [name for name, values in listed.items() if any(isinstance(v, bool) for v in values)]
        booleans += [name for name, value in defaults.items() if value is True and name not in listed]
        booleans = [name for name in booleans if name not in used]
        if booleans:
            raise ConfigError(
                f"{booleans[0]} is a boolean, which params: flags passes as a bare --{booleans[0]} (false: "
                "left out), and the model reads a CANDLE default model (defaults:), whose parser takes "
                f"a boolean as --{booleans[0]} True and refuses a bare flag",
                file=file,
                key="objective.params",
                allowed="params: candle, which hands a CANDLE model its parameters as it reads its defaults",
            )


def _listed_values(dim: Dimension) -> list[Any]:
    """The values a categorical, ordered or constant dimension lists (none for a range)."""
    spec = dim.to_spec()
    return list(spec["values"]) if "values" in spec else [spec["value"]] if "value" in spec else []


def _resolve_class_file(section: OptimizerSection | TrialSchedulerSection, workflow_dir: Path) -> None:
    """A plug-in named as ``file.py:Class`` gets the file's absolute path, so that the workflow
    written into the experiment (and read there by the job and by ``emews resume``) names the same file."""
    module, sep, cls = section.name.rpartition(":")
    if sep and module.endswith(".py"):
        found = _resolve_path(module, workflow_dir)
        if found is not None:
            section.name = f"{found}:{cls}"


def check_workflow(workflow: Workflow) -> Any:
    """Import the objective and optimizer and build the optimizer: fail now, not in the job.

    Path options are made absolute here. Returns the optimizer that was built.
    """
    file = workflow.label
    section = workflow.model.objective
    _check_shadowing(section, file)
    try:
        loaded = workflow.objective.load()
    except ObjectiveFunctionError as exc:
        raise ConfigError(str(exc), file=file, key="objective.function") from None
    except ObjectiveLoadError as exc:
        raise ConfigError(str(exc), file=file, key=_objective_key(section, str(exc))) from None
    _check_placeholders(section, workflow.space, loaded.defaults, file)
    _check_candle_values(section, workflow.space, loaded.defaults, file)
    if isinstance(workflow.task_size, FunctionSize):
        try:
            workflow.task_size.load()
        except TaskSizeError as exc:
            raise ConfigError(str(exc), file=file, key="task.ranks", allowed=TASK_SIZE_ALLOWED) from None
    cls = _optimizer_class(workflow, file)
    _check_options(workflow, cls, file)
    try:
        optimizer = workflow.make_optimizer()
        optimizer.check(workflow.space)
    except KeyedValueError as exc:  # a plug-in's option refused, with its key and what is allowed
        raise ConfigError(exc.message, file=file, key=exc.key or "optimizer.options", allowed=exc.allowed) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), file=file, key="optimizer.options") from None
    except EmewsError:  # the plug-in's own configuration error, with its file, key and allowed values
        raise
    except Exception as exc:  # the plug-in's own code failed (a RuntimeError, a missing library): one line
        raise ConfigError(
            f"cannot build optimizer {workflow.model.optimizer.name!r}: {type(exc).__name__}: {exc} "
            f"(at {_innermost_frame(exc)})",
            file=file,
            key="optimizer",
        ) from None
    return optimizer


def _innermost_frame(exc: BaseException) -> str:
    """``file:line`` of the frame ``exc`` was raised in."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "unknown place"


def _check_shadowing(section: ObjectiveSection, file: str) -> None:
    """No file in the launch folder or the objective's hides a module the ranks import (``random.py``)."""
    folders = [Path.cwd()]
    if section.module is not None and is_file_ref(section.module):
        folders.append(Path(section.module).parent)
    problem = shadowing_problem(folders)
    if problem is not None:
        key = "objective.module" if section.module is not None else "objective.command"
        raise ConfigError(problem, file=file, key=key)


def _objective_key(section: ObjectiveSection, message: str) -> str:
    """The key a load failure blames: the defaults file, the function, or the module or command."""
    if section.defaults is not None and message.startswith(section.defaults):
        return "objective.defaults"
    if section.command is not None:
        return "objective.command"
    return "objective.function" if "has no function" in message else "objective.module"


def _optimizer_class(workflow: Workflow, file: str) -> type:
    try:
        return workflow.optimizer_class()
    except PluginNotFound as exc:
        raise ConfigError(str(exc), file=file, key="optimizer.name", allowed=OPTIMIZERS.allowed()) from None
    except Exception as exc:  # the optimizer module itself failed to import
        raise ConfigError(
            f"cannot load optimizer {workflow.model.optimizer.name!r}: {type(exc).__name__}: {exc}",
            file=file,
            key="optimizer.name",
        ) from None


def _check_options(workflow: Workflow, cls: type, file: str) -> None:
    """Validate ``optimizer.options`` against ``cls``'s signature; make its Path options absolute."""
    options = workflow.model.optimizer.options
    try:
        validate_options(cls, options)
    except ValidationError as exc:
        raise config_error(exc, options_model(cls), file, ("optimizer", "options")) from None
    for name in path_options(cls):
        if options.get(name) is None:
            continue
        found = _existing_path(
            str(options[name]),
            workflow.source.parent,
            what="file",
            file=file,
            key=f"optimizer.options.{name}",
            allowed="a path relative to the current folder or the workflow's folder",
        )
        options[name] = str(found)
