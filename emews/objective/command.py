"""Command objectives: each evaluation runs an external program (a CANDLE ``model.py`` or ``model.sh``).

``objective: {command: [python3, model.py], metric: loss}`` runs ``python3 model.py --name value ...``
in the task's run dir and reads the last ``loss <value>`` (or JSON) line of its stdout. The
command is an argv list, never run through a shell (a user who wants one writes ``sh -c``).

Parameters reach the program one of three ways (``params:``):

``flags``  ``--name value``: ``True`` as a bare ``--name`` (argparse's ``store_true``; ``False`` left out;
           CANDLE's ``str2bool`` flags refuse it: ``emews check`` refuses a boolean for a ``defaults:`` model),
           a list as ``--name v1 v2``, ``None`` left out (the default); a value that starts
           with ``-`` as ``--name=value``, so that a parser reads it as a value, not an option;
``env``    one environment variable per parameter, named as the parameter;
``file``   a JSON or YAML file in the run dir (``params_file``), its path in ``{params_file}``;
``candle`` as a CANDLE Benchmarks model reads them (:mod:`emews.objective.candle_params`): ``--config_file``
           names a per-task ``[Global_Params]`` file of the defaults and the point; the point's
           values for CANDLE's own defaulted options follow as flags (booleans ``True``/``False``).

``{name}`` in an argument is replaced by that parameter's value (it is then not also passed as a
flag), and ``{run_dir}``, ``{params_file}``, ``{seed}``, ``{task_id}`` by the task's. Strings
are passed as they are, other values as JSON (``true``, ``0.001``, ``[128, 64]``). In the
string a shell runs (``[sh, -c, "..."]``, :mod:`emews.objective.shellscript`) each value is quoted for
its place: one literal word, never code.

Every file the command objective names in the run dir (``params_file``, ``result_file``, its
records) stays inside it: a name that leaves it is refused (:func:`run_dir_name`), and at run
time a link that leads out of it is neither written, deleted nor read (:func:`in_run_dir`).

The result (``result:``) is read from ``stdout`` (the last line ``<metric> <value>``,
``<metric>: <value>``, ``<metric>=<value>``, a JSON object holding the metric, or a Keras
progress line's ``- <metric>: <value>``: a Keras model's last epoch), from a
``file`` the command writes in its run dir (``result_file``: JSON, ``KEY value`` lines, a bare
number, or a CSV whose header names the metric, its last row: Keras' ``CSVLogger``, CANDLE's
``training.log``), or from a CANDLE ``output_dir`` (``--output_dir RUN_DIR`` is passed, ``result.txt`` read,
as CANDLE Supervisor's ``model.sh`` does; with ``params: candle``, ``output_dir = '.'``,
which CANDLE's parser makes the run dir).

The process runs in its own session with the worker's environment (and so its GPU binding),
plus ``EMEWS_TASK_ID``, ``EMEWS_SEED``, ``EMEWS_RUN_DIR`` and ``EMEWS_PARAMS_FILE`` (with ``params:
candle`` also ``CANDLE_OUTPUT_DIR``, the run dir: where CANDLE's library roots the model's output). Its stdout
and stderr are appended to ``stdout.txt``/``stderr.txt`` in the run dir. The task timeout is the
runner's: it kills the command's whole process tree (``emews.processes.tree``). A non-zero
exit, a signal or a missing result raise :class:`~emews.objective.function.EvaluationFailed` with the
exit status and the last lines of stderr (or stdout).

Retries (``task.retries``) and checkpoints apply around :meth:`CommandObjective.call` as for
any objective: a second attempt appends to the same output files and reads only its own output.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from emews.core.failure_cause import TAIL_LINES, clip, with_output
from emews.core.parent_death import killed_with
from emews.core.results import Status
from emews.core.textfiles import write_atomic
from emews.objective.candle_params import (
    CONFIG_FILE,
    CONFIG_OPTION,
    OUTPUT_DIR,
    OUTPUT_ROOT_VARIABLE,
    candle_point,
    flagged_output_dir,
    library_output_dir,
    model_flags,
    write_config,
)
from emews.objective.function import (
    PARAMS_RECORD,
    EvaluationFailed,
    ObjectiveLoadError,
    TaskContext,
    load_defaults,
    record_params,
    with_defaults,
)
from emews.objective.program_file import interpreter_problem, program_problem
from emews.objective.shellscript import find_script, quoter
from emews.objective.team import Team
from emews.objective.worker_context import WorkerContext
from emews.processes.oom import OomWatch, prefer_as_victim

ParamsStyle = Literal["flags", "env", "file", "candle"]
ResultSource = Literal["stdout", "file", "output_dir"]

PARAMS_STYLES: tuple[str, ...] = ("flags", "env", "file", "candle")
RESULT_SOURCES: tuple[str, ...] = ("stdout", "file", "output_dir")
#: placeholders every command may use besides the parameters' names
TASK_PLACEHOLDERS = ("run_dir", "params_file", "seed", "task_id")
#: ``{name}``, but not the shell's ``${name}``
PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: what CANDLE Supervisor's model.sh reads from the model's output directory
CANDLE_RESULT_FILE = "result.txt"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: what argparse reads as a negative number rather than an option (its own rule)
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
#: argparse's refusal of a bare flag whose option takes a value
BARE_FLAG_REFUSED = re.compile(r"argument --([A-Za-z_][\w-]*)(?:/-\S+)?: expected one argument")
#: how a Keras ``fit`` progress line starts: the steps done, ``2/2``, bold in Keras 3
KERAS_STEPS = re.compile(r"^\s*(?:\x1b\[[0-9;]*m)?\d+/\d+(?:\x1b\[[0-9;]*m)?[\s\[]")
#: what a file the command objective names in the run dir may be
RUN_DIR_FILE_ALLOWED = "a relative path inside the task's run dir (not absolute, no '..' leaving it)"


@dataclass(frozen=True)
class CommandRef:
    """What to run for each evaluation and how to talk to it (see the module docstring)."""

    command: tuple[str, ...]
    metric: str = "value"
    params: ParamsStyle = "flags"
    params_file: str = "params.json"
    result: ResultSource = "stdout"
    result_file: str | None = None
    defaults: str | None = None

    def load(self) -> CommandObjective:
        """Check that the program exists and read the model defaults (an ObjectiveLoadError if not)."""
        program = self.command[0]
        if not PLACEHOLDER.search(program) and _find_program(program) is None:
            problem = program_problem(Path(program)) if "/" in program else "not found on PATH"
            raise ObjectiveLoadError(f"command program {program!r} {problem or 'cannot be run'}")
        return CommandObjective(self, load_defaults(self.defaults))

    def interpreter_problem(self, search_path: str | None = None) -> str | None:
        """Why the interpreter the program's ``#!`` line names cannot be run here (``None``: it can,
        or the program is no such script); not refused at load: a site's ``module load`` may bring it."""
        program = self.command[0]
        if PLACEHOLDER.search(program):
            return None
        found = program if "/" in program else shutil.which(program, path=search_path)
        problem = None if found is None else interpreter_problem(Path(found), search_path)
        return None if problem is None else f"command program {program!r}: {problem}"

    @property
    def placeholders(self) -> set[str]:
        """Names used as ``{name}`` in the command's arguments."""
        return {m for arg in self.command for m in PLACEHOLDER.findall(arg)}

    @property
    def script_index(self) -> int | None:
        """Where the string a shell runs is in the command (``[sh, -c, STRING]``), if it is there."""
        return find_script(self.command)

    @property
    def result_path(self) -> str | None:
        """The file in the run dir that holds the result (``None``: stdout)."""
        if self.result == "output_dir":
            return self.result_file or CANDLE_RESULT_FILE
        if self.result == "file":
            return self.result_file or "result.json"
        return None


def _find_program(program: str) -> str | None:
    if "/" in program:
        return None if program_problem(Path(program)) else program
    return shutil.which(program)


def as_text(value: Any) -> str:
    """A value as one argument or variable: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def as_flags(params: Mapping[str, Any], *, bool_values: bool = False) -> list[str]:
    """``--name value`` arguments (booleans as bare flags, or with ``bool_values`` as CANDLE's
    ``--name True``/``--name False``; lists as repeated values); a value that starts with ``-`` as
    ``--name=value``, so that a parser cannot take it for an option."""
    argv: list[str] = []
    for name, value in params.items():
        if isinstance(value, bool) and bool_values:
            argv += [f"--{name}", str(value)]
        elif value is None or value is False:
            continue
        elif value is True:
            argv.append(f"--{name}")
        elif isinstance(value, (list, tuple)):
            argv += [f"--{name}", *(list_item(name, v) for v in value)]
        else:
            text = as_text(value)
            argv += [f"--{name}={text}"] if text.startswith("-") else [f"--{name}", text]
    return argv


def number_text(value: Any) -> str:
    """A value as one argument (:func:`as_text`), a negative number in the form argparse reads as a
    number (``-0.00001``, not ``-1e-05``, which it takes for an option)."""
    text = as_text(value)
    if isinstance(value, float) and value < 0 and math.isfinite(value) and not NEGATIVE_NUMBER.match(text):
        return format(Decimal(repr(value)), "f")
    return text


def list_item(name: str, value: Any) -> str:
    """One value of a list flag (:func:`number_text`); an EvaluationFailed for a word that would
    read as an option."""
    text = number_text(value)
    if text.startswith("-") and not NEGATIVE_NUMBER.match(text):
        raise EvaluationFailed(
            f"parameter {name!r}: list item {text!r} starts with '-' and would be read as an "
            "option; pass it with params: file or params: env"
        )
    return text


def substitute(arg: str, values: Mapping[str, Any], quote: Callable[[str, int], str] = lambda text, at: text) -> str:
    """Replace each ``{name}`` that ``values`` holds by its :func:`number_text`, passed through
    ``quote(text, at)`` (``at``: where the placeholder is in ``arg``); other braces stay as written."""
    return PLACEHOLDER.sub(lambda m: quote(number_text(values[m[1]]), m.start()) if m[1] in values else m[0], arg)


def run_dir_name(name: str) -> str:
    """``name`` if it is a path relative to the run dir that stays inside it; a ValueError if not."""
    normal = os.path.normpath(name) if name else ""
    if not name or os.path.isabs(name) or normal in (".", "..") or normal.startswith("../"):
        raise ValueError(f"{name!r} is not a file inside the task's run dir")
    return name


def in_run_dir(run_dir: Path, name: str) -> Path:
    """The real path of ``name`` in ``run_dir``: an EvaluationFailed when the name or a link on
    its way (one an earlier attempt or the command left) leads out of the run dir."""
    try:
        run_dir_name(name)
    except ValueError as exc:
        raise EvaluationFailed(str(exc)) from None
    root = Path(os.path.realpath(run_dir))
    real = Path(os.path.realpath(run_dir / name))
    if root not in real.parents:
        raise EvaluationFailed(f"{name} in {run_dir} leads to {real}, outside the run dir: not touched")
    return real


class CommandObjective:
    """A loaded command objective: the objective interface (``setup``/``call``/``teardown``)."""

    def __init__(self, ref: CommandRef, defaults: Mapping[str, Any]) -> None:
        self.ref = ref
        self.defaults = dict(defaults)

    def setup(self, context: WorkerContext | None = None) -> None:
        """Nothing to prepare: the program starts per evaluation."""

    def teardown(self) -> None:
        """Nothing to release."""

    def argv(
        self, params: Mapping[str, Any], task: Mapping[str, Any], point: Mapping[str, Any] | None = None
    ) -> list[str]:
        """The command line for ``params`` (defaults merged) and the task's own values; ``point``
        (the values before the defaults; default ``params``) is what ``params: candle`` passes as flags."""
        values = {**params, **task}
        script = self.ref.script_index
        argv = [
            substitute(arg, values, quoter(arg)) if i == script else substitute(arg, values)
            for i, arg in enumerate(self.ref.command)
        ]
        used = self.ref.placeholders
        if self.ref.params == "flags":
            argv += as_flags({k: v for k, v in params.items() if k not in used})
        elif self.ref.params == "candle":
            flags = model_flags(params if point is None else point, used)
            argv += [CONFIG_OPTION, str(Path(task["run_dir"]) / CONFIG_FILE), *as_flags(flags, bool_values=True)]
        return argv

    def environment(
        self, params: Mapping[str, Any], task: Mapping[str, Any], team: Team | None = None
    ) -> dict[str, str]:
        """The command's environment: the worker's, the task's ``EMEWS_*`` variables, a multi-rank
        task member's torch.distributed rendezvous (MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_RANK, as
        torchrun sets them), with ``params: env`` the parameters, with ``params: candle`` the run dir as
        :data:`~emews.objective.candle_params.OUTPUT_ROOT_VARIABLE`."""
        env = dict(os.environ)
        if team is not None and team.size > 1:
            env.update(team.environ())
        env.update(EMEWS_TASK_ID=str(task["task_id"]), EMEWS_SEED=str(task["seed"]), EMEWS_RUN_DIR=str(task["run_dir"]))
        if "params_file" in task:
            env["EMEWS_PARAMS_FILE"] = str(task["params_file"])
        if self.ref.params == "candle":
            env[OUTPUT_ROOT_VARIABLE] = str(task["run_dir"])
        if self.ref.params == "env":
            bad = [name for name in params if not ENV_NAME.match(name)]
            if bad:
                raise EvaluationFailed(
                    f"parameters {', '.join(map(repr, bad))} cannot be environment "
                    "variables (allowed: letters, digits and _, not first a digit)"
                )
            env.update({name: as_text(value) for name, value in params.items() if value is not None})
        return env

    def call(self, params: Mapping[str, Any], context: TaskContext) -> Any:
        """Run the command for one evaluation; return what it reported (a number or a dict)."""
        context.pid = os.getpid()
        run_dir = context.run_dir
        point = candle_point(params, self.defaults) if self.ref.params == "candle" else params
        merged = with_defaults(self.defaults, point)
        if self.ref.result == "output_dir":  # CANDLE's parser puts "." in the run dir, where the command runs
            merged["output_dir"] = OUTPUT_DIR if self.ref.params == "candle" else str(run_dir)
        in_run_dir(run_dir, PARAMS_RECORD)
        record_params(run_dir, merged)
        task: dict[str, Any] = {"run_dir": str(run_dir), "seed": context.seed, "task_id": context.task_id}
        if self.ref.params == "file" or "params_file" in self.ref.placeholders:
            params_path = in_run_dir(run_dir, self.ref.params_file)
            params_path.parent.mkdir(parents=True, exist_ok=True)
            write_params_file(params_path, merged)
            task["params_file"] = str(run_dir / self.ref.params_file)
        if self.ref.params == "candle":
            write_config(in_run_dir(run_dir, CONFIG_FILE), merged)
        argv = self.argv(merged, task, point)
        result_names = self._result_names(argv, merged, run_dir)
        # an earlier attempt's result is not this one's; it is left in place, not deleted: a result
        # file may be the model's own record (CANDLE's ckpts/last/ckpt-info.json, which it restarts from)
        earlier = {name: file_version(in_run_dir(run_dir, name)) for name in result_names}
        output = CapturedOutput(run_dir, context.team_rank)
        oom = OomWatch()  # a SIGKILL of the OOM killer is said as out of memory
        returncode = output.run(argv, self.environment(merged, task, context.team))
        if returncode != 0:
            message, status = _describe_exit(argv[0], returncode, output)
            message = oom.named(message, returncode)
            raise EvaluationFailed(self._bare_flag_hint(message, merged), status)
        written = [
            name for name in result_names if file_version(in_run_dir(run_dir, name)) not in (None, earlier[name])
        ]
        found = (
            parse_result(output.stdout(), self.ref.metric, bare_number=False)
            if not result_names
            else next(
                (
                    value
                    for name in written
                    if (value := read_result_file(in_run_dir(run_dir, name), self.ref.metric)) is not None
                ),
                None,
            )
        )
        if found is None and context.team_rank > 0:
            return None  # a member's value never counts: torchrun-style scripts report on rank 0 only
        if found is None and result_names and not written:
            raise EvaluationFailed(_describe_no_file(argv[0], result_names, run_dir, output))
        if found is None:
            where = "stdout" if not result_names else f"{' or '.join(result_names)} in {run_dir}"
            tail = output.tail("stdout") if not result_names else ""
            # what it printed instead, in the line that names the failure (fail fast, the summary, check --try)
            last = f"; its last line: {clip(tail.splitlines()[-1].strip())!r}" if tail else ""
            raise EvaluationFailed(
                f"command {argv[0]} exited 0 but reported no {self.ref.metric!r} in {where}{last}"
                + (f"; last lines of stdout:\n{tail}" if tail else "")
            )
        return found

    def _bare_flag_hint(self, message: str, params: Mapping[str, Any]) -> str:
        """``message`` with a hint on its first line when argparse wanted a value after a true
        boolean that ``params: flags`` passed as a bare flag (CANDLE's ``str2bool`` options)."""
        first, newline, rest = message.partition("\n")
        found = BARE_FLAG_REFUSED.search(first)
        if self.ref.params != "flags" or found is None or params.get(found[1]) is not True:
            return message
        return (
            f"{first} (params: flags passes the boolean {found[1]} as a bare --{found[1]}, for "
            "store_true; a parser whose booleans take a value, as CANDLE's str2bool, reads them "
            f"with params: candle){newline}{rest}"
        )

    def _result_names(self, argv: list[str], params: Mapping[str, Any], run_dir: Path) -> list[str]:
        """The files in the run dir that may hold the result, in the order read (none: stdout).
        ``result: output_dir`` with the output dir given as a flag: also where CANDLE's parser
        puts it (``RUN_DIR/EXP000/RUN000/result.txt``, :func:`flagged_output_dir`); with ``params:
        candle`` also the same name where CANDLE's library puts the model's output dir
        (``RUN_DIR/nt3/EXP000/RUN000/training.log``, :func:`library_output_dir`)."""
        name = self.ref.result_path
        if name is None:
            return []
        names = [name]
        if self.ref.params == "candle":  # where CANDLE's library puts output_dir (OUTPUT_ROOT_VARIABLE)
            candle_dir = library_output_dir(argv, params, run_dir)
        elif self.ref.result == "output_dir":
            candle_dir = flagged_output_dir(argv, run_dir)
        else:
            candle_dir = None
        if candle_dir is not None and candle_dir != run_dir and candle_dir.is_relative_to(run_dir):
            names.append(str(candle_dir.relative_to(run_dir) / name))
        return names


class CapturedOutput:
    """The command's stdout and stderr, appended to the run dir's files; this attempt's part read back.
    A multi-rank task's members share the run dir: team rank ``r > 0`` writes ``stdout.rank-r.txt``
    (two members appending to one file interleave their bytes)."""

    def __init__(self, run_dir: Path, team_rank: int = 0) -> None:
        self.run_dir = run_dir
        tag = f".rank-{team_rank}" if team_rank else ""
        self.paths = {name: in_run_dir(run_dir, f"{name}{tag}.txt") for name in ("stdout", "stderr")}
        self.offsets = {name: path.stat().st_size if path.exists() else 0 for name, path in self.paths.items()}

    def run(self, argv: list[str], env: dict[str, str]) -> int:
        """Run ``argv`` to its end in its own session; return its exit status (``-N``: signal N).

        An exception while waiting (the task timer, a stop) kills its process group before it
        propagates; what escaped the group is the runner's to kill (``emews.processes.tree``).
        """
        with self.paths["stdout"].open("ab") as out, self.paths["stderr"].open("ab") as err:
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=self.run_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    preexec_fn=_model_start(os.getpid()),
                )
            except OSError as exc:
                said = exc.strerror or str(exc)
                found = Path(self.run_dir, argv[0]) if "/" in argv[0] else shutil.which(argv[0], path=env.get("PATH"))
                if exc.errno == errno.ENOENT and found is not None and os.path.isfile(found):  # its #! is not there
                    said = interpreter_problem(Path(found), env.get("PATH")) or said
                raise EvaluationFailed(f"cannot run command {argv[0]}: {said}") from None
        try:
            return proc.wait()
        finally:
            if proc.returncode is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()

    def read(self, name: str) -> str:
        with self.paths[name].open("rb") as fh:
            fh.seek(self.offsets[name])
            return fh.read().decode("utf-8", errors="replace")

    def stdout(self) -> str:
        return self.read("stdout")

    def tail(self, name: str, lines: int = TAIL_LINES) -> str:
        return "\n".join(self.read(name).rstrip().splitlines()[-lines:])


def _model_start(parent_pid: int) -> Callable[[], None]:
    """The command's ``preexec_fn``: a kill -9 of its worker takes it along (:func:`killed_with`), and
    out of memory the OOM killer takes it before a rank (:func:`prefer_as_victim`: an inline worker's)."""
    die = killed_with(parent_pid)

    def start() -> None:
        die()
        prefer_as_victim()

    return start


def _describe_exit(program: str, returncode: int, output: CapturedOutput) -> tuple[str, Status]:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        message, status = f"command {program} died of signal {name}", Status.CRASHED
    else:
        message, status = f"command {program} exited with status {returncode}", Status.FAILED
    stream = "stderr" if output.read("stderr").strip() else "stdout"
    tail = output.tail(stream)
    if not tail:
        return message + f" and wrote nothing to {stream}", status
    # the first line names the cause (argparse's "prog: error: ..."), as reports and fail fast read it
    return with_output(message, stream, tail, errors_only=returncode < 0), status


def _describe_no_file(program: str, names: Sequence[str], run_dir: Path, output: CapturedOutput) -> str:
    """A command that exited 0 without writing its result file: the line of what it said that names an
    error, first (a model script that reports its model's failure and exits 0, as the EMEWS templates'
    scripts do), else that it wrote no result file."""
    message = f"command {program} exited 0 but wrote no {' or '.join(names)} in {run_dir}"
    stream = "stderr" if output.read("stderr").strip() else "stdout"
    tail = output.tail(stream)
    if not tail:
        return message + " and wrote nothing to stdout or stderr"
    return with_output(message, stream, tail, errors_only=True)  # "Epoch 6/6 done" is not why


def write_params_file(path: Path, params: Mapping[str, Any]) -> Path:
    """The parameters as JSON (``.json``) or YAML (``.yaml``/``.yml``) for the command to read."""
    if path.suffix in (".yaml", ".yml"):
        import yaml

        text = yaml.safe_dump(dict(params), sort_keys=False)
    else:
        text = json.dumps(dict(params), indent=1) + "\n"
    write_atomic(path, [text.encode()], durable=False)  # a multi-rank task's members read it as others write
    return path


def parse_result(text: str, metric: str, *, bare_number: bool) -> Any:
    """The last line of ``text`` that reports ``metric``: ``{metric: value, ...}`` from a JSON object
    (its other keys kept as metrics), the number of a ``metric value`` line, or the last
    ``- metric: value`` of a Keras progress line (:func:`keras_value`); a line that is only a number
    counts when ``bare_number``. ``None`` when no line does."""
    pattern = re.compile(rf"^\s*{re.escape(metric)}\s*[:=]?\s*(\S+)\s*$")
    for line in reversed(text.splitlines()):
        keras = keras_value(line, metric)
        if keras is not None:
            return {metric: keras}
        stripped = line.strip()
        if stripped.startswith("{"):
            try:
                data = json.loads(stripped)
            except json.JSONDecodeError:
                data = None
            if isinstance(data, dict) and metric in data:
                return data
        match = pattern.match(line)
        number = _number(match[1]) if match else (_number(stripped) if bare_number else None)
        if number is not None:
            return {metric: number}
    return None


def keras_value(line: str, metric: str) -> float | None:
    """The last ``metric``'s number in a Keras ``fit`` progress line (``2/2 - 0s - loss: 2.17 -
    val_loss: 2.18 - 19ms/epoch``, Keras 2 and 3, ``verbose`` 1 or 2: it starts with the steps
    done, :data:`KERAS_STEPS`), where a model without a ``CSVLogger`` (CANDLE's P1B1, P1B2, TC1)
    reports its last epoch's ``val_loss``; a line updated in place (``\\b``) holds every state of
    the bar, its last one at the line's end (``\\r`` ends a line)."""
    if not KERAS_STEPS.match(line):
        return None
    found = re.findall(rf"\s-\s{re.escape(metric)}:\s+(\S+)", line)
    return _number(found[-1]) if found else None


def file_version(path: Path) -> tuple[int, int, int, int] | None:
    """Which version of the file at ``path`` is there (device, inode, size, modification time), so
    that one the command wrote tells from one an earlier attempt left; ``None``: no file."""
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


def read_result_file(path: Path, metric: str) -> Any:
    """A result file: a JSON object with ``metric``, a JSON number, a CSV whose header names the
    metric (:func:`parse_csv_result`), or text as :func:`parse_result` reads it."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        found = parse_csv_result(text, metric)
        return found if found is not None else parse_result(text, metric, bare_number=True)
    if isinstance(data, dict):
        return data if metric in data else None
    return {metric: data} if isinstance(data, (int, float)) and not isinstance(data, bool) else None


def parse_csv_result(text: str, metric: str) -> dict[str, float] | None:
    """The last row of a CSV whose header names ``metric`` (Keras' ``CSVLogger`` file, CANDLE's
    ``training.log``: one row per epoch), its numeric columns as metrics; ``None`` when the first
    line is no such header or no row has a number for the metric."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = [name.strip() for name in lines[0].split(",")] if lines else []
    if len(header) < 2 or metric not in header:
        return None
    for line in reversed(lines[1:]):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(header):
            continue
        row = {name: _number(cell) for name, cell in zip(header, cells, strict=True)}
        if row[metric] is not None:
            return {name: value for name, value in row.items() if value is not None}
    return None


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None
