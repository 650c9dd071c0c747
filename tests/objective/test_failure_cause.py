"""What names a failure (issue 24): a command's argparse ``error:`` line, a traceback's exception line,
and failures that differ only in the values they quote counted as one cause."""

from __future__ import annotations

import json
import os
from pathlib import Path

from emews.core.failure_cause import cause, cause_key, error_line, meaningful_line, most_frequent
from emews.core.results import Status
from emews.objective.command import CommandRef
from emews.objective.context import TaskContext
from emews.objective.function import outcome_from_exception
from testutil import TESTS, EmewsCommand, stored_rows, write_workflow

MODEL = TESTS / "models" / "candle_model.py"
PYTHON = os.environ.get("PYTHON", "python3")


def failed_command(tmp_path: Path, params: dict, command: tuple = (PYTHON, str(MODEL))) -> str:
    """The recorded error of one real run of ``command`` that fails."""
    context = TaskContext(0, 1, 7, [], "here", tmp_path / "runs")
    try:
        CommandRef(command, metric="loss").load().call(params, context)
    except Exception as exc:
        outcome = outcome_from_exception(0, exc)
    assert outcome.status in (Status.FAILED, Status.CRASHED)
    return outcome.error


def test_a_failed_commands_cause_is_argparses_error_line_not_its_exit_status(tmp_path: Path) -> None:
    error = failed_command(tmp_path, {"epochs": "many"})
    assert cause(error) == "candle_model.py: error: argument --epochs: invalid int value: 'many'"
    assert "exited with status 2" in error  # the status and stderr's last lines stay in the record
    assert error.count("usage: candle_model.py") == 1


def test_a_command_that_cannot_start_its_script_names_the_missing_file(tmp_path: Path) -> None:
    error = failed_command(tmp_path, {}, command=(PYTHON, "nt3_baseline.py"))  # relative: not in the run dir
    assert cause(error).startswith("python") and "can't open file" in cause(error)
    assert "nt3_baseline.py" in cause(error)


def test_a_silent_failure_says_so(tmp_path: Path) -> None:
    error = failed_command(tmp_path, {}, command=("false",))
    assert cause(error) == "command false exited with status 1 and wrote nothing to stdout"


def test_meaningful_line_of_a_traceback_is_its_exception_even_when_it_names_no_error() -> None:
    text = (
        'Traceback (most recent call last):\n  File "m.py", line 3, in <module>\n'
        '    raise SystemExit("error: not this line")\n    ^^^^^^^^^^^^^^^^\nKeyboardInterrupt\n'
    )
    assert meaningful_line(text) == "KeyboardInterrupt"
    assert (
        meaningful_line("epoch 1\nepoch 2\nsrun: error: task 0: Exited with exit code 2\n")
        == "srun: error: task 0: Exited with exit code 2"
    )
    assert meaningful_line("loading\nepoch 3\n") == "epoch 3"
    assert meaningful_line(" \n") is None


def test_failures_that_differ_in_their_values_are_one_cause() -> None:
    grid = [
        "nt3: error: argument --conv: invalid int value: '100 100 1'",
        "nt3: error: argument --conv: invalid int value: '50 1'",
    ]
    assert cause_key(grid[0]) == cause_key(grid[1])
    assert cause_key("RuntimeError: bad parameters x=0.25") == cause_key("RuntimeError: bad parameters x=-1.5e-3")
    assert cause_key("ValueError: lr too large") != cause_key("ValueError: batch too large")
    tracebacks = [f'Traceback (most recent call last):\n  File "o.py", line 1\nRuntimeError: bad x={x}' for x in (1, 2)]
    found = most_frequent(["objective returned NaN", *tracebacks, "objective returned NaN", tracebacks[0]])
    assert (found.line, found.count) == ("RuntimeError: bad x=1", 3)
    assert most_frequent([]) is None


def test_a_command_killed_by_a_signal_is_named_by_the_signal_unless_it_named_an_error(tmp_path: Path) -> None:
    quiet = failed_command(tmp_path, {}, command=("sh", "-c", "echo epoch 3 >&2; kill -9 $$"))
    assert cause(quiet) == "command sh died of signal SIGKILL; last lines of stderr:"
    told = failed_command(tmp_path, {}, command=("sh", "-c", "echo 'Fatal error: out of memory' >&2; kill -9 $$"))
    assert cause(told) == "Fatal error: out of memory"


def test_an_older_command_record_that_leads_with_its_exit_is_named_by_its_error_line() -> None:
    """Stores written before a command's record led with its meaningful line: the report, the summary
    and fail fast all name it by the output's argparse line (one rule, in ``cause``); after a signal,
    the signal unless the output names an error."""
    old = (
        "command python3 exited with status 2; last lines of stderr:\n"
        "usage: nt3 [-h] [--epochs EPOCHS]\nnt3: error: argument --epochs: invalid int value: '5.5'"
    )
    assert cause(old) == "nt3: error: argument --epochs: invalid int value: '5.5'"
    killed = "command python3 died of signal SIGKILL; last lines of stderr:\nloading data"
    assert cause(killed) == "command python3 died of signal SIGKILL; last lines of stderr:"
    assert most_frequent([old, old.replace("'5.5'", "'7.5'")]).count == 2


def test_an_exception_whose_message_spans_lines_is_named_by_its_exception_line() -> None:
    """A Python objective's exception whose message has several lines (or a note) is named by the
    line that names the exception, not by the message's last line ("7x line 49")."""
    try:
        exc = ValueError("shapes do not match:\n  left (3, 4)\nline 49")
        exc.add_note("while fitting fold 2")
        raise exc
    except ValueError as raised:
        error = outcome_from_exception(0, raised).error
    assert error.startswith("Traceback (most recent call last)")
    assert cause(error) == "ValueError: shapes do not match:"
    assert cause(f"objective setup failed:\n{error}") == "objective setup failed: ValueError: shapes do not match:"


def test_an_error_naming_a_file_that_is_not_utf8_fails_its_task_not_the_run(tmp_path: Path) -> None:
    """A file name that is not UTF-8 comes to Python with lone surrogates (``caf\\udce9.txt``); an
    objective that failed naming it ended the whole run (exit 1, "'utf-8' codec can't encode
    character '\\udce9'") and its result was lost. The error is stored with the surrogate escaped."""
    module = tmp_path / "latin1.py"
    module.write_text(
        "import os\n"
        "def run(params):\n"
        "    if params['x'] > 1:\n"
        "        raise FileNotFoundError(os.fsdecode(b'caf\\xe9.txt') + ' is missing')\n"
        "    return {'value': params['x'], 'path': os.fsdecode(b'caf\\xe9.txt')}\n"
    )
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": str(module), "function": "run", "metric": "value"},
        space={"x": {"type": "ordered", "values": [1, 2, 3]}},
        budget={"evaluations": 3},
        task={"timeout": 30, "isolation": "inline"},
    )
    proc = EmewsCommand(tmp_path)("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert [r["status"] for r in rows] == ["ok", "failed", "failed"]
    assert "FileNotFoundError: caf\\udce9.txt is missing" in rows[1]["error"]
    assert json.loads(rows[0]["metrics"])["path"] == "caf\\udce9.txt"  # a metric naming it (the optimizer rank failed)


def test_an_error_line_holding_terminal_controls_is_shown_escaped_everywhere(tmp_path: Path) -> None:
    """An objective's error holding ANSI colours, a carriage return and a NUL was printed raw by the
    run's summary, fail fast, emews results and drawn raw by the report (matplotlib: "Glyph 27
    missing"): a terminal was recoloured and the line overwritten. Each shows the line with them
    escaped, once, as :func:`cause` makes it."""
    module = tmp_path / "controls.py"
    module.write_text("def run(params):\n    raise RuntimeError('bad \\x1b[31mRED\\x1b[0m\\rOVER\\x00nul')\n")
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": str(module), "function": "run", "metric": "value"},
        space={"x": {"type": "ordered", "values": [1, 2, 3, 4, 5]}},
        budget={"evaluations": 5, "fail_fast": 5},
        task={"timeout": 30, "isolation": "inline"},
    )
    shown = "RuntimeError: bad \\x1b[31mRED\\x1b[0m\\rOVER\\x00nul"
    emews = EmewsCommand(tmp_path)
    launch = emews("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180)
    assert f"all failed: {shown}" in launch.stderr, launch.stderr
    results = emews("results", str(tmp_path / "exp"), timeout=180)
    assert f"most frequent failure: 5x {shown}" in results.stdout, results.stderr
    report = emews("report", str(tmp_path / "exp"), timeout=300)
    assert report.returncode == 0 and "Glyph" not in report.stderr, report.stderr
    assert shown in (tmp_path / "exp" / "report.html").read_text(encoding="utf-8")
    for proc in (launch, results, report):
        assert not {"\x1b", "\r", "\x00"} & set(proc.stdout + proc.stderr), proc.stdout + proc.stderr


def test_a_categorical_listing_a_non_utf8_file_name_runs_and_reports(tmp_path: Path) -> None:
    """A categorical listing a file name that is not UTF-8 (``"caf\\udce9.txt"``, as Python decodes
    it): the run was stored, then writing results.csv failed the optimizer rank ("'utf-8' codec
    can't encode character '\\udce9'", MPI_Abort), and emews results and emews report (matplotlib's
    font, the HTML) failed alike. The CSV, the plots and the pages show it as its escape."""
    (tmp_path / "one.py").write_text("def run(params):\n    return 1.0 if params['c'] == 'b' else 0.5\n")
    (tmp_path / "wf.yaml").write_text(
        "optimizer: {name: sweep}\n"
        "objective: {module: one.py, function: run, metric: value}\n"
        'space:\n  c: {type: categorical, values: ["caf\\udce9.txt", "b"]}\n'
        "budget: {evaluations: 2}\n"
        "task: {timeout: 30, isolation: inline}\n"
    )
    emews = EmewsCommand(tmp_path)
    emews("launch", "wf.yaml", "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    exp = tmp_path / "exp"
    assert "0,ok,0.5,caf\\udce9.txt," in (exp / "results.csv").read_text(encoding="utf-8")
    emews("results", str(exp), timeout=180, check=True)
    for fmt in ("html", "pdf"):
        proc = emews("report", str(exp), "--format", fmt, timeout=300, check=True)
        assert "Traceback" not in proc.stderr, proc.stderr
    assert "caf\\udce9.txt" in (exp / "report.html").read_text(encoding="utf-8")
    assert [r["params"] for r in stored_rows(exp)][0] == '{"c":"caf\\udce9.txt"}'


def test_a_python_warning_is_not_the_cause_of_a_command_that_exits_non_zero(tmp_path: Path) -> None:
    """A CANDLE model under ``params: candle`` always warns about the keys its benchmark does not define
    (``RuntimeWarning: These keywords ... are not defined in CANDLE``): one that then exited 3 was
    named by the warning's source line, ``warnings.warn(message, RuntimeWarning)`` ("most frequent
    failure: 1x warnings.warn(...)"), and a warning that says "error" by the warning. A warning is
    never the cause: the exit status names the failure, or the line that names an error."""
    model = tmp_path / "model.py"
    model.write_text(
        "import sys, warnings\n"
        "print('epoch 0 val_loss 0.5')\n"
        "message = \"These keywords used in the configuration file are not defined in CANDLE: ['id']\"\n"
        "warnings.warn(message, RuntimeWarning)\n"
        "warnings.warn('error_bad_lines is deprecated', FutureWarning)\n"
        "if len(sys.argv) > 1:\n"
        "    print('data: error: nt_train2.csv is empty', file=sys.stderr)\n"
        "    warnings.warn(message, RuntimeWarning)\n"
        "sys.exit(3)\n"
    )
    silent = failed_command(tmp_path, {}, command=(PYTHON, str(model)))
    assert "warnings.warn(message, RuntimeWarning)" in silent  # the record keeps stderr's last lines
    assert cause(silent) == f"command {PYTHON} exited with status 3; last lines of stderr:"
    told = failed_command(tmp_path, {}, command=(PYTHON, str(model), "told"))
    assert cause(told) == "data: error: nt_train2.csv is empty"


#: TensorFlow's start on a CPU node (NT3 under candle_lib, 2026-11-29): E lines of its CUDA sources,
#: then training that ends well
TF_ON_A_CPU_NODE = (
    "E0000 00:00:1795937890.790904   20052 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)\n"
    "E0000 00:00:1795937890.8   20052 external/local_xla/xla/stream_executor/cuda/cuda_fft.cc:477] Unable to "
    "register cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered\n"
    "Epoch 6/6\n"
)


def test_tensorflows_cuda_lines_on_a_cpu_node_are_not_a_cause_nor_a_finished_epoch(tmp_path: Path) -> None:
    """The first-day review (rev78): an NT3 resumed at its last epoch trained nothing and wrote no
    training.log; the failure's cause, and the report's "most frequent failure", was TensorFlow's
    ``failed call to cuInit`` line, which every TensorFlow start on a CPU node prints. Those E lines of
    its CUDA sources are never a cause (another E line is), and a program that exited 0 without its
    result file is named by that, not by its last line ("Epoch 6/6")."""
    assert error_line(TF_ON_A_CPU_NODE) is None
    other = "E0000 00:00:1795937890.9   20052 bfc_allocator.cc:485] Allocator error: ran out of memory"
    assert error_line(TF_ON_A_CPU_NODE + other) == other
    script = tmp_path / "model.py"
    script.write_text(f"import sys\nsys.stderr.write({TF_ON_A_CPU_NODE!r})\n")
    ref = CommandRef((PYTHON, str(script)), metric="loss", result="file", result_file="training.log")
    context = TaskContext(0, 1, 7, [], "here", tmp_path / "runs")
    try:
        ref.load().call({}, context)
    except Exception as exc:
        outcome = outcome_from_exception(0, exc)
    assert outcome.status is Status.FAILED
    said = cause(outcome.error)
    assert said.startswith(f"command {PYTHON} exited 0 but wrote no training.log in "), said
