"""Command objectives: each evaluation runs an external program (a CANDLE ``model.py`` or ``model.sh``).

``objective: {command: [python3, model.py], metric: loss}`` runs ``python3 model.py --name value ...``
in the task's run dir and reads the last ``loss <value>`` (or JSON) line of its stdout. The
command is an argv list, never run through a shell (a user who wants one writes ``sh -c``).

Parameters reach the program one of three ways (``params:``):

``flags``  CANDLE style ``--name value``: ``True`` as a bare ``--name`` (``False`` left out),
           a list as ``--name v1 v2``, ``None`` left out (the default);
``env``    one environment variable per parameter, named as the parameter;
``file``   a JSON or YAML file in the run dir (``params_file``), its path in ``{params_file}``.

``{name}`` in an argument is replaced by that parameter's value (it is then not also passed as a
flag), and ``{run_dir}``, ``{params_file}``, ``{seed}``, ``{task_id}`` by the task's. Strings
are passed as they are, other values as JSON (``true``, ``0.001``, ``[128, 64]``).

The result (``result:``) is read from ``stdout`` (the last line ``<metric> <value>``,
``<metric>: <value>``, ``<metric>=<value>`` or a JSON object holding the metric), from a
``file`` the command writes in its run dir (``result_file``: JSON, ``KEY value`` lines or a bare
number), or from a CANDLE ``output_dir`` (``--output_dir RUN_DIR`` is passed, ``result.txt`` read,
as CANDLE Supervisor's ``model.sh`` does).

The process runs in its own session with the worker's environment (and so its GPU binding),
plus ``EMEWS_TASK_ID``, ``EMEWS_SEED``, ``EMEWS_RUN_DIR`` and ``EMEWS_PARAMS_FILE``. Its stdout
and stderr are appended to ``stdout.txt``/``stderr.txt`` in the run dir. The task timeout is the
runner's: it kills the command's whole process tree (``emews.runtime.processes``). A non-zero
exit, a signal or a missing result raise :class:`~emews.objective.EvaluationFailed` with the
exit status and the last lines of stderr (or stdout).

Retries (``task.retries``) and checkpoints apply around :meth:`CommandObjective.call` as for
any objective: a second attempt appends to the same output files and reads only its own output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping

from emews.objective import (EvaluationFailed, ObjectiveLoadError, TaskContext, load_defaults, record_params,
                             with_defaults)
from emews.results import Status

ParamsStyle = Literal["flags", "env", "file"]
ResultSource = Literal["stdout", "file", "output_dir"]

PARAMS_STYLES: tuple[str, ...] = ("flags", "env", "file")
RESULT_SOURCES: tuple[str, ...] = ("stdout", "file", "output_dir")
#: placeholders every command may use besides the parameters' names
TASK_PLACEHOLDERS = ("run_dir", "params_file", "seed", "task_id")
#: ``{name}``, but not the shell's ``${name}``
PLACEHOLDER = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: how many lines of stderr (or stdout) a failure's error quotes
TAIL_LINES = 20
#: what CANDLE Supervisor's model.sh reads from the model's output directory
CANDLE_RESULT_FILE = "result.txt"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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

    def load(self) -> "CommandObjective":
        """Check that the program exists and read the model defaults (an ObjectiveLoadError if not)."""
        program = self.command[0]
        if not PLACEHOLDER.search(program) and _find_program(program) is None:
            raise ObjectiveLoadError(f"command program {program!r} not found"
                                     + ("" if "/" in program else " on PATH"))
        return CommandObjective(self, load_defaults(self.defaults))

    @property
    def placeholders(self) -> set[str]:
        """Names used as ``{name}`` in the command's arguments."""
        return {m for arg in self.command for m in PLACEHOLDER.findall(arg)}

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
        return program if os.access(program, os.X_OK) and Path(program).is_file() else None
    return shutil.which(program)


def as_text(value: Any) -> str:
    """A value as one argument or variable: strings as they are, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def as_flags(params: Mapping[str, Any]) -> list[str]:
    """CANDLE-style ``--name value`` arguments (booleans as bare flags, lists as repeated values)."""
    argv: list[str] = []
    for name, value in params.items():
        if value is None or value is False:
            continue
        if value is True:
            argv.append(f"--{name}")
        elif isinstance(value, (list, tuple)):
            argv += [f"--{name}", *(as_text(v) for v in value)]
        else:
            argv += [f"--{name}", as_text(value)]
    return argv


def substitute(arg: str, values: Mapping[str, Any]) -> str:
    """Replace each ``{name}`` that ``values`` holds; other braces stay as written."""
    return PLACEHOLDER.sub(lambda m: as_text(values[m[1]]) if m[1] in values else m[0], arg)


class CommandObjective:
    """A loaded command objective: the objective interface (``setup``/``call``/``teardown``)."""

    def __init__(self, ref: CommandRef, defaults: Mapping[str, Any]) -> None:
        self.ref = ref
        self.defaults = dict(defaults)

    def setup(self, context: TaskContext | None = None) -> None:
        """Nothing to prepare: the program starts per evaluation."""

    def teardown(self) -> None:
        """Nothing to release."""

    def argv(self, params: Mapping[str, Any], task: Mapping[str, Any]) -> list[str]:
        """The command line for ``params`` (defaults merged) and the task's own values."""
        values = {**params, **task}
        argv = [substitute(arg, values) for arg in self.ref.command]
        if self.ref.params == "flags":
            used = self.ref.placeholders
            argv += as_flags({k: v for k, v in params.items() if k not in used})
        return argv

    def environment(self, params: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, str]:
        env = dict(os.environ)
        env.update(EMEWS_TASK_ID=str(task["task_id"]), EMEWS_SEED=str(task["seed"]),
                   EMEWS_RUN_DIR=str(task["run_dir"]))
        if "params_file" in task:
            env["EMEWS_PARAMS_FILE"] = str(task["params_file"])
        if self.ref.params == "env":
            bad = [name for name in params if not ENV_NAME.match(name)]
            if bad:
                raise EvaluationFailed(f"parameters {', '.join(map(repr, bad))} cannot be environment "
                                       "variables (allowed: letters, digits and _, not first a digit)")
            env.update({name: as_text(value) for name, value in params.items() if value is not None})
        return env

    def call(self, params: Mapping[str, Any], context: TaskContext) -> Any:
        """Run the command for one evaluation; return what it reported (a number or a dict)."""
        context.pid = os.getpid()
        run_dir = context.run_dir
        merged = with_defaults(self.defaults, params)
        if self.ref.result == "output_dir":
            merged["output_dir"] = str(run_dir)
        record_params(run_dir, merged)
        task: dict[str, Any] = {"run_dir": str(run_dir), "seed": context.seed, "task_id": context.task_id}
        if self.ref.params == "file" or "params_file" in self.ref.placeholders:
            task["params_file"] = str(write_params_file(run_dir / self.ref.params_file, merged))
        result_path = None if self.ref.result_path is None else run_dir / self.ref.result_path
        if result_path is not None:
            result_path.unlink(missing_ok=True)  # an earlier attempt's result is not this one's
        argv = self.argv(merged, task)
        output = CapturedOutput(run_dir)
        returncode = output.run(argv, self.environment(merged, task))
        if returncode != 0:
            raise EvaluationFailed(*_describe_exit(argv[0], returncode, output))
        found = (parse_result(output.stdout(), self.ref.metric, bare_number=False) if result_path is None
                 else read_result_file(result_path, self.ref.metric))
        if found is None:
            where = "stdout" if result_path is None else f"{result_path.name} in {run_dir}"
            tail = output.tail("stdout") if result_path is None else ""
            raise EvaluationFailed(f"command {argv[0]} exited 0 but reported no {self.ref.metric!r} in {where}"
                                   + (f"; last lines of stdout:\n{tail}" if tail else ""))
        return found


class CapturedOutput:
    """The command's stdout and stderr, appended to the run dir's files; this attempt's part read back."""

    def __init__(self, run_dir: Path) -> None:
        self.paths = {name: run_dir / f"{name}.txt" for name in ("stdout", "stderr")}
        self.offsets = {name: path.stat().st_size if path.exists() else 0 for name, path in self.paths.items()}

    def run(self, argv: list[str], env: dict[str, str]) -> int:
        """Run ``argv`` to its end in its own session; return its exit status (``-N``: signal N).

        An exception while waiting (the task timer, a stop) kills its process group before it
        propagates; what escaped the group is the runner's to kill (``emews.runtime.processes``).
        """
        with self.paths["stdout"].open("ab") as out, self.paths["stderr"].open("ab") as err:
            try:
                proc = subprocess.Popen(argv, cwd=self.paths["stdout"].parent, env=env, stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=err, start_new_session=True)
            except OSError as exc:
                raise EvaluationFailed(f"cannot run command {argv[0]}: {exc.strerror or exc}") from None
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
    return (message + (f"; last lines of {stream}:\n{tail}" if tail else f" and wrote nothing to {stream}"), status)


def write_params_file(path: Path, params: Mapping[str, Any]) -> Path:
    """The parameters as JSON (``.json``) or YAML (``.yaml``/``.yml``) for the command to read."""
    if path.suffix in (".yaml", ".yml"):
        import yaml

        path.write_text(yaml.safe_dump(dict(params), sort_keys=False))
    else:
        path.write_text(json.dumps(dict(params), indent=1) + "\n")
    return path


def parse_result(text: str, metric: str, *, bare_number: bool) -> Any:
    """The last line of ``text`` that reports ``metric``: ``{metric: value, ...}`` from a JSON object
    (its other keys kept as metrics), or the number of a ``metric value`` line; a line that is only a
    number counts when ``bare_number``. ``None`` when no line does."""
    pattern = re.compile(rf"^\s*{re.escape(metric)}\s*[:=]?\s*(\S+)\s*$")
    for line in reversed(text.splitlines()):
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


def read_result_file(path: Path, metric: str) -> Any:
    """A result file: a JSON object with ``metric``, a JSON number, or text as :func:`parse_result` reads it."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return parse_result(text, metric, bare_number=True)
    if isinstance(data, dict):
        return data if metric in data else None
    return {metric: data} if isinstance(data, (int, float)) and not isinstance(data, bool) else None


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None
