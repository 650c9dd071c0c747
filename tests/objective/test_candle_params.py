"""``params: candle``: a CANDLE Benchmarks model run unchanged as a command (issue 24, deliverable 1).

The model is NT3 with CANDLE's real parameter handling (``tests/data/candle``: ``default_utils.py``
and ``nt3.py`` as in ECP-CANDLE/Benchmarks; ``parse_args``, ``str2bool``, nargs lists, required
keys), fed the real Supervisor GA file and UPF files (``tests/data/supervisor``).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_command_objective import PYTHON, evaluate
from test_readme import python_block

from emews.core.candle_space import load_candle_json
from emews.objective.command import CommandRef, as_flags
from emews.objective.context import task_run_dir
from testutil import REPO, TESTS, query, stored_rows, wait_until, write_workflow

NT3 = TESTS / "data" / "candle" / "nt3_parse_only.py"
SUPERVISOR = TESTS / "data" / "supervisor"
DEFAULTS = SUPERVISOR / "nt3_default_model.txt"
NT3_GA = SUPERVISOR / "ga" / "nt3_param_space_ga.json"
#: the lines that give a model NT3's own parser (CANDLE's ``initialize_parameters``)
_NT3_IMPORT = f"""
import os
import sys
sys.path.insert(0, {str(NT3.parent)!r})
from nt3_parse_only import initialize_parameters
"""


def _result_model(folder: Path, default_model: Path | None = None) -> Path:
    """``folder/nt3_result.py``: a model that reads its parameters with NT3's parser (from
    ``default_model`` if given) and writes ``learning_rate * epochs`` to result.txt in its output_dir."""
    model = folder / "nt3_result.py"
    given = "" if default_model is None else f"default_model={str(default_model)!r}"
    model.write_text(_NT3_IMPORT + f"""
params = initialize_parameters({given})
with open(os.path.join(params["output_dir"], "result.txt"), "w") as fh:
    fh.write(repr(params["learning_rate"] * params["epochs"]))
""")
    return model
UPF_FILES = sorted((SUPERVISOR / "upf").glob("*.txt"))
DOCS = REPO / "docs" / "coming-from-candle.md"


def candle_ref(*extra: str) -> CommandRef:
    return CommandRef((PYTHON, str(NT3), *extra), metric="val_loss", params="candle", defaults=str(DEFAULTS))


def as_candle_reads(value):
    """What CANDLE's model should see for a point's value: a string of numbers is a list (Supervisor's rule)."""
    if isinstance(value, str) and len(value.split()) > 1:
        return [int(v) for v in value.split()]
    return value


def parsed(outcome) -> tuple[dict, list[str]]:
    assert outcome.status.value == "ok", outcome.error
    return outcome.metrics["parsed"], outcome.metrics["argv"]


def test_every_nt3_ga_point_is_parsed_by_candles_own_parser(tmp_path: Path) -> None:
    space = load_candle_json(NT3_GA)
    rng = random.Random(3)
    ref = candle_ref()
    for task_id in range(12):
        point = space.sample(rng)
        params, argv = parsed(evaluate(tmp_path, ref, point, task_id=task_id)[0])
        for key, value in point.items():  # keys NT3 does not define (clipnorm, nesterov, ...) ride in the file
            assert params[key] == as_candle_reads(value), key
        assert params["pool"] == [1, 10] and params["classes"] == 2  # the defaults, not re-passed as flags
        assert "--pool" not in argv and "--nesterov" not in argv and "--clipnorm" not in argv
        assert argv[0] == "--config_file"


def _shape(value: Any) -> tuple:
    """What CANDLE's parser does with a value depends on this only (its type, a string's words and
    leading minus, a list's element types), not on the value itself."""
    if isinstance(value, str):
        return "str", len(value.split()) > 1, value.startswith("-"), value == ""
    if isinstance(value, list):
        return ("list", *sorted({type(v).__name__ for v in value}))
    return type(value).__name__, isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0


def one_line_per_shape(lines: list[dict]) -> list[dict]:
    """The first line of each shape (keys and the shape of each value): the other lines (cp1's 25
    differ in study names only) take the same path through the parser, a process each for nothing."""
    seen: dict[tuple, dict] = {}
    for line in lines:
        seen.setdefault(tuple(sorted((key, _shape(value)) for key, value in line.items())), line)
    return list(seen.values())


@pytest.mark.parametrize("path", UPF_FILES, ids=lambda p: p.name)
def test_every_shape_of_upf_line_is_parsed_by_candles_own_parser(tmp_path: Path, path: Path) -> None:
    lines = one_line_per_shape([json.loads(line) for line in path.read_text().splitlines() if line.strip()])
    ref = candle_ref("--run_id", "{id}") if all("id" in line for line in lines) else candle_ref()
    for task_id, line in enumerate(lines):
        params, argv = parsed(evaluate(tmp_path, ref, line, task_id=task_id)[0])
        assert "--id" not in argv  # bookkeeping, never a model flag
        for key, value in line.items():
            if key != "id":
                assert params[key.lower()] == value, key
        if "id" in line:
            assert params["run_id"] == line["id"]  # the {id} placeholder still works


def test_candle_flags_booleans_lists_and_negative_numbers(tmp_path: Path) -> None:
    point = {
        "add_noise": True,
        "noise_gaussian": False,
        "shuffle": True,
        "train_bool": False,
        "dense": "300 -20",
        "conv": [64, 32, 1],
        "learning_rate": -1e-05,
        "std_dev": -0.5,
        "activation": "-rf",
        "id": "x",
        "replicate": 2,
    }
    params, argv = parsed(evaluate(tmp_path, candle_ref(), point)[0])
    assert params["add_noise"] is True and params["noise_gaussian"] is False  # through the file, as its defaults
    assert (
        params["shuffle"] is True and params["train_bool"] is False
    )  # not hidden by CANDLE's own defaults (False, True)
    assert argv[argv.index("--train_bool") + 1] == "False"  # as flags, str2bool's True/False
    assert "--add_noise" not in argv and "--dense" not in argv  # the model's own options: the file alone
    assert params["dense"] == [300, -20] and params["conv"] == [64, 32, 1]
    assert params["learning_rate"] == -1e-05 and params["std_dev"] == -0.5 and params["activation"] == "-rf"
    assert "--id" not in argv and "--replicate" not in argv
    config_file = Path(argv[1])
    assert config_file.parent.name == "000000"  # in the task's run dir
    config = config_file.read_text()
    assert config.startswith("[Global_Params]\n")
    assert "pool = [1, 10]\n" in config and "id = 'x'\n" in config  # defaults and the point, as CANDLE reads them


def test_candle_needs_the_model_defaults(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(
        tmp_path,
        objective={"command": [PYTHON, str(NT3)], "metric": "val_loss", "params": "candle"},
        space={"epochs": {"type": "int", "lower": 1, "upper": 3}},
    )
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{wf}: objective.defaults: " in proc.stderr and "params: candle" in proc.stderr


def test_under_launch_the_nt3_ga_and_a_upf_run_unchanged(emews_cmd, tmp_path: Path) -> None:
    ga = write_workflow(
        tmp_path,
        "ga",
        optimizer={"name": "ga", "options": {"seed": 1}},
        objective={"command": [PYTHON, str(NT3)], "metric": "val_loss", "params": "candle", "defaults": str(DEFAULTS)},
        space={"file": str(NT3_GA)},
        budget={"evaluations": 6},
        task={"timeout": 120},
    )
    proc = emews_cmd("launch", str(ga), "--workers", "2", "--exp-dir", "ga", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "ga")
    assert len(rows) == 6 and {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows]
    for r in rows:
        p = json.loads(r["params"])
        assert r["objective"] == pytest.approx(
            p["learning_rate"] * sum(as_candle_reads(p["dense"])) + p["epochs"] / 1000
        )
    upf = SUPERVISOR / "upf" / "templates-upf3.txt"
    sweep = write_workflow(
        tmp_path,
        "upf",
        optimizer={"name": "sweep", "options": {"file": str(upf)}},
        objective={
            "command": [PYTHON, str(NT3), "--run_id", "{id}"],
            "metric": "val_loss",
            "params": "candle",
            "defaults": str(DEFAULTS),
        },
        space={},
        budget={"evaluations": 7},
        task={"timeout": 120},
    )
    proc = emews_cmd("launch", str(sweep), "--workers", "2", "--exp-dir", "upf", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "upf")
    assert len(rows) == 7 and {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows]


def test_the_in_process_wrapper_route_runs_the_ga_file(emews_cmd, tmp_path: Path) -> None:
    """docs/coming-from-candle.md's `model_runner` route, its code as the page shows it: the model's
    own parameters, the point over them, and, as Supervisor's model_runner does, what CANDLE writes
    in its working directory (output_dir '.', save/ckpt.log) in each task's run dir, not the launch
    directory where concurrent tasks overwrite each other."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "nt3_baseline_keras2.py").write_text(_NT3_IMPORT + f"""

class History:
    def __init__(self, history):
        self.history = history

def run(gParameters):  # what NT3's run writes: CSVLogger's training.log in output_dir, the checkpoint log in save/
    loss = gParameters["learning_rate"] * sum(gParameters["dense"]) + gParameters["epochs"] / 1000
    os.makedirs("save", exist_ok=True)
    with open("save/ckpt.log", "a") as fh:
        fh.write("ckpt\\n")
    with open(os.path.join(gParameters["output_dir"], "training.log"), "w") as fh:
        fh.write(repr(loss))
    with open("candle_output_dir.txt", "w") as fh:  # where CANDLE's library (candle_lib) would root its output
        fh.write(os.environ.get("CANDLE_OUTPUT_DIR", ""))
    return History({{"val_loss": [loss]}})
""")
    block = python_block("candle_point", DOCS.read_text())
    source, found = re.subn(r"sys\.path\[:0\] = \[.*\]", f"sys.path[:0] = [{str(model)!r}]", block, count=1)
    assert found == 1, block
    (tmp_path / "nt3_runner.py").write_text(source)
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "ga", "options": {"seed": 2}},
        objective={"module": "nt3_runner.py", "metric": "val_loss"},
        space={"file": str(NT3_GA)},
        budget={"evaluations": 4},
        task={"timeout": 120},
    )
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}, [r["error"] for r in rows]
    assert not (tmp_path / "training.log").exists() and not (tmp_path / "save").exists()
    for r in rows:
        p = json.loads(r["params"])
        assert r["objective"] == pytest.approx(
            p["learning_rate"] * sum(as_candle_reads(p["dense"])) + p["epochs"] / 1000
        )
        run_dir = task_run_dir(tmp_path / "exp" / "runs", r["id"])
        assert float((run_dir / "training.log").read_text()) == pytest.approx(r["objective"])
        assert (run_dir / "save" / "ckpt.log").read_text() == "ckpt\n"
        assert (run_dir / "candle_output_dir.txt").read_text() == str(run_dir)


def test_a_candle_models_result_txt_in_its_output_dir_is_read(tmp_path: Path) -> None:
    """``result: output_dir`` with ``params: candle``: CANDLE's parser makes any output_dir but '.'
    into OUTPUT_DIR/EXP000/RUN000; the model's result.txt must still be the one read."""
    model = _result_model(tmp_path)
    ref = CommandRef(
        (PYTHON, str(model)), metric="val_loss", params="candle", defaults=str(DEFAULTS), result="output_dir"
    )
    outcome, run_dir = evaluate(tmp_path, ref, {"learning_rate": 0.5, "epochs": 3})
    assert outcome.status.value == "ok", outcome.error
    assert outcome.value == pytest.approx(1.5)
    assert (run_dir / "result.txt").is_file() and not (run_dir / "EXP000").exists()


@pytest.mark.parametrize(
    ("extra", "nested"), [((), "EXP000/RUN000"), (("--experiment_id", "nt3", "--run_id={task_id}"), "nt3/4")]
)
def test_a_candle_models_result_txt_is_read_where_candle_puts_output_dir_given_as_a_flag(
    tmp_path: Path, extra: tuple, nested: str
) -> None:
    """``result: output_dir`` with the default ``params: flags``: ``--output_dir RUN_DIR`` is read by
    CANDLE's parser as ``RUN_DIR/EXPERIMENT_ID/RUN_ID`` (``EXP000/RUN000`` by default, the ids
    the command's flags give otherwise), where the model writes its result.txt."""
    model = _result_model(tmp_path)
    ref = CommandRef((PYTHON, str(model), *extra), metric="val_loss", result="output_dir")
    outcome, run_dir = evaluate(tmp_path, ref, {"learning_rate": 0.5, "epochs": 3}, task_id=4)
    assert outcome.status.value == "ok", outcome.error
    assert outcome.value == pytest.approx(1.5)
    assert (run_dir / nested / "result.txt").is_file()
    (run_dir / nested / "result.txt").write_text("7.0")  # an earlier attempt's result is not read
    model.write_text("pass")
    outcome, _ = evaluate(tmp_path, ref, {"learning_rate": 0.5, "epochs": 3}, task_id=4)
    assert outcome.status.value == "failed" and "exited 0 but wrote no result.txt" in outcome.error


def test_ids_set_only_in_the_models_defaults_file_are_hidden_by_candle_and_not_read(tmp_path: Path) -> None:
    """``experiment_id``/``run_id`` in the model's own default model file only: CANDLE's parser
    (``args_overwrite_config``) overwrites them with its flags' defaults ``EXP000``/``RUN000``, in
    ``common/default_utils.py`` and candle_lib's ``parsing_utils.py`` alike, so the model writes
    ``RUN_DIR/EXP000/RUN000/result.txt``, where emews reads it (not ``RUN_DIR/E7/R3``)."""
    defaults = tmp_path / "my_default_model.txt"
    defaults.write_text(DEFAULTS.read_text() + "experiment_id = 'E7'\nrun_id = 'R3'\n")
    model = _result_model(tmp_path, defaults)
    ref = CommandRef((PYTHON, str(model)), metric="val_loss", result="output_dir")
    outcome, run_dir = evaluate(tmp_path, ref, {"learning_rate": 0.5, "epochs": 3}, task_id=4)
    assert outcome.status.value == "ok", outcome.error
    assert outcome.value == pytest.approx(1.5)
    assert (run_dir / "EXP000" / "RUN000" / "result.txt").is_file() and not (run_dir / "E7").exists()


def test_the_docs_recipe_reads_an_unchanged_keras_models_training_log(tmp_path: Path) -> None:
    """NT3 as it is prints no ``val_loss X`` line, only Keras' progress; its CSVLogger writes
    ``{output_dir}/training.log``, Keras' CSV (the last row: the last epoch, what Supervisor's
    model_runner returns). The recipe's ``result_file: training.log`` reads the metric there."""
    model = tmp_path / "nt3_keras_like.py"
    model.write_text(_NT3_IMPORT + f"""

params = initialize_parameters()
with open(os.path.join(params["output_dir"], "training.log"), "w") as log:
    log.write("epoch,accuracy,loss,lr,val_accuracy,val_loss\\n")
    for epoch in range(params["epochs"]):
        val_loss = params["learning_rate"] * (epoch + 1)
        print(f"2/2 [====] - 0s 9ms/step - loss: 0.5 - accuracy: 0.75 - val_loss: {{val_loss:.4f}} - val_accuracy: 0.5")
        log.write(f"{{epoch}},0.75,0.5,0.001,0.5,{{val_loss}}\\n")
""")
    recipe = next(b for b in re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S) if "nt3_baseline_keras2" in b)
    objective = yaml.safe_load(recipe)["objective"]
    objective.update(command=[PYTHON, str(model)], defaults=str(DEFAULTS))
    outcome, run_dir = evaluate(
        tmp_path,
        CommandRef(**{**objective, "command": tuple(objective["command"])}),
        {"learning_rate": 0.25, "epochs": 3},
    )
    assert outcome.status.value == "ok", outcome.error
    assert outcome.value == pytest.approx(0.75)  # the last epoch's val_loss
    assert outcome.metrics["val_accuracy"] == 0.5 and outcome.metrics["epoch"] == 2


P3B3_MODEL = """
import os
import sys
sys.path.insert(0, {candle!r})
import candle

# Pilot3/P3B3/p3b3.py's definitions of the three (ECP-CANDLE/Benchmarks): nargs, where the default
# model file and Supervisor's mlrMBO set (p3b3_param.R: makeIntegerParam) give single numbers
additional_definitions = [
    {{"name": "filter_sets", "nargs": "+", "type": int}},
    {{"name": "filter_sizes", "nargs": "+", "type": int}},
    {{"name": "num_filters", "nargs": "+", "type": int}},
    {{"name": "feature_names", "nargs": "+", "type": str}},
]


class BenchmarkP3B3(candle.Benchmark):
    def set_locals(self):
        self.required = set(["filter_sets", "filter_sizes", "num_filters"])
        self.additional_definitions = additional_definitions


here = os.path.dirname(os.path.realpath(__file__))
params = candle.finalize_parameters(BenchmarkP3B3(here, "p3b3_default_model.txt", "keras", prog="p3b3", desc="p3b3"))
# p3b3_baseline_keras2.py's use of them
run_filter_sizes = [params["filter_sizes"] + k for k in range(params["filter_sets"])]
print("val_loss", sum(run_filter_sizes) * params["num_filters"] * len(params["feature_names"]))
"""


def test_a_model_whose_nargs_options_default_to_single_numbers_gets_single_numbers(tmp_path: Path) -> None:
    """P3B3 reads filter_sets, filter_sizes and num_filters as numbers (``range(filter_sets)``), as its
    default model file gives them; passed as flags, argparse's nargs made them lists and every task
    failed (TypeError) where Supervisor's model_runner, which sets the values after parsing, runs."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "p3b3_baseline.py").write_text(P3B3_MODEL.format(candle=str(NT3.parent)))
    defaults = model / "p3b3_default_model.txt"
    defaults.write_text(
        "[Global_Params]\nfilter_sets = 3\nfilter_sizes = 3\nnum_filters = 100\nfeature_names = ['expression']\n"
    )
    ref = CommandRef(
        (PYTHON, str(model / "p3b3_baseline.py")), metric="val_loss", params="candle", defaults=str(defaults)
    )
    outcome, _ = evaluate(
        tmp_path, ref, {"filter_sets": 2, "filter_sizes": 4, "num_filters": 10, "feature_names": "mirna"}
    )
    assert outcome.status.value == "ok", outcome.error
    assert outcome.value == (4 + 5) * 10


def test_a_string_for_a_boolean_or_a_number_is_read_as_the_default_types_it(tmp_path: Path) -> None:
    """Supervisor's cp1 UPF files give Uno's boolean ``residual`` as the string "0": as a flag,
    CANDLE's str2bool read it False; through the file a string "0" is true. The default's type decides."""
    point = {"add_noise": "0", "noise_correlated": "true", "epochs": "3", "learning_rate": "0.5"}
    params, argv = parsed(evaluate(tmp_path, candle_ref(), point)[0])
    assert params["add_noise"] is False and params["noise_correlated"] is True
    assert params["epochs"] == 3 and params["learning_rate"] == 0.5


def candle_reads(config_file: Path) -> dict:
    """What CANDLE's own parser (NT3's ``initialize_parameters``) makes of ``config_file``."""
    proc = subprocess.run(
        [PYTHON, str(NT3), "--config_file", str(config_file)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])["parsed"]


def test_arithmetic_in_the_default_model_reaches_the_model_as_candle_evaluates_it(tmp_path: Path) -> None:
    """CANDLE ``eval``s each value of its default model file: ``batch_size = 2**4`` is 16. emews
    read such a value as the text '2**4' and wrote it quoted into the task's file, so the model got
    the string (and NT3's ``sum(dense)`` a TypeError); now the model gets what CANDLE reading the
    user's file itself gets."""
    defaults = tmp_path / "nt3_default_model.txt"
    defaults.write_text(
        DEFAULTS.read_text()
        .replace("batch_size = 20", "batch_size = 2**4")
        .replace("dense = [200,20]", "dense = [2**5, 64//4]")
        .replace("epochs = 400", "epochs = 4*100")
    )
    own = candle_reads(defaults)
    assert own["batch_size"] == 16 and own["dense"] == [32, 16] and own["epochs"] == 400
    ref = CommandRef((PYTHON, str(NT3)), metric="val_loss", params="candle", defaults=str(defaults))
    params, _ = parsed(evaluate(tmp_path, ref, {"learning_rate": 0.5})[0])
    assert {k: params[k] for k in ("batch_size", "dense", "epochs")} == {"batch_size": 16, "dense": [32, 16], "epochs": 400}
    assert params["learning_rate"] == 0.5


def test_a_default_that_needs_running_code_is_refused_by_check(emews_cmd, tmp_path: Path) -> None:
    """CANDLE runs ``seed = __import__('os').getpid()`` as code; emews neither runs it nor passes its
    text on as if it were the value: check names the file, section and key."""
    defaults = tmp_path / "nt3_default_model.txt"
    defaults.write_text(DEFAULTS.read_text() + "rng_seed = __import__('os').getpid()\n")
    wf = write_workflow(
        tmp_path,
        objective={"command": [PYTHON, str(NT3)], "metric": "val_loss", "params": "candle", "defaults": str(defaults)},
        space={"epochs": {"type": "int", "lower": 1, "upper": 3}},
    )
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") <= 1, proc.stderr
    assert f"{defaults}: [Global_Params] rng_seed = __import__('os').getpid(): " in proc.stderr, proc.stderr
    assert "write the value itself" in proc.stderr


@pytest.mark.parametrize(
    ("values", "says"),
    [(["2**4", "2**5"], "write its value: 16"), (["[20, 10]", "[30]"], "a YAML list ([20, 10]) or Supervisor's string of numbers ('20 10')")],
)
def test_an_expression_as_text_in_the_space_is_refused_by_check(emews_cmd, tmp_path: Path, values, says) -> None:
    """YAML reads ``values: [2**4, 2**5]`` as the strings '2**4' and '2**5' (and a quoted list as its
    text): the model got that text (CANDLE evaluates only its default model file's values), and
    check said ok. Now check names the parameter and the value to write instead."""
    name = "batch_size" if "2**4" in values else "dense"
    wf = write_workflow(
        tmp_path,
        objective={"command": [PYTHON, str(NT3)], "metric": "val_loss", "params": "candle", "defaults": str(DEFAULTS)},
        space={name: {"type": "ordered", "values": values}},
        budget={"evaluations": 2},
    )
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") <= 1, proc.stderr
    assert f"{wf}: space.{name}: {values[0]!r} is a Python expression as text" in proc.stderr, proc.stderr
    assert says in proc.stderr, proc.stderr


def test_the_values_check_suggests_reach_candles_parser_as_meant(emews_cmd, tmp_path: Path) -> None:
    """A YAML list and Supervisor's string of numbers, the forms the refusal above names, pass check
    and reach CANDLE's parser as the list; a word, a number as text and a negative number stay as before."""
    ref = candle_ref()
    for task_id, dense in enumerate([[20, 10], "20 10"]):
        params, _ = parsed(evaluate(tmp_path, ref, {"dense": dense, "batch_size": 16, "activation": "tanh", "epochs": "3", "std_dev": "-0.5"}, task_id=task_id)[0])
        assert params["dense"] == [20, 10] and params["batch_size"] == 16 and params["activation"] == "tanh"
        assert params["epochs"] == 3 and params["std_dev"] == -0.5
    wf = write_workflow(
        tmp_path,
        objective={"command": [PYTHON, str(NT3)], "metric": "val_loss", "params": "candle", "defaults": str(DEFAULTS)},
        space={"dense": {"type": "categorical", "values": [[20, 10], "20 10"]}, "activation": {"type": "constant", "value": "tanh"},
               "std_dev": {"type": "ordered", "values": ["-0.5", "0.5"]}},
        budget={"evaluations": 2},
    )
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 0, proc.stderr


def test_an_expression_as_text_in_a_upf_line_is_refused_by_check(emews_cmd, tmp_path: Path) -> None:
    """A UPF line's ``"batch_size": "2**4"`` (or ``"dense": "[20, 10]"``) reached the model as that
    text (Supervisor's ``model_runner`` evaluates nothing, CANDLE only its default model file), and
    check said ok where the same value in the space is refused. Now check names the file, the line,
    the key and the value to write, in JSON; the real UPF lines around them pass, and the file with
    the values written as suggested passes check and reaches CANDLE's parser as meant."""
    real = (SUPERVISOR / "upf" / "upf-test-upf-1.txt").read_text()  # Supervisor's workflows/upf/test/upf-1.txt
    upf = tmp_path / "upf-1.txt"
    upf.write_text(real + '{"id": "RUN003", "epochs": 1, "batch_size": "2**4"}\n'
                   '{"id": "RUN004", "epochs": 1, "dense": "[20, 10]", "activation": "tanh"}\n')
    objective = {"command": [PYTHON, str(NT3), "--run_id", "{id}"], "metric": "val_loss", "params": "candle",
                 "defaults": str(DEFAULTS)}
    wf = write_workflow(tmp_path, objective=objective, optimizer={"name": "sweep", "options": {"file": str(upf)}},
                        space={}, budget={"evaluations": 5})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2, proc.stderr
    assert f"{wf}: optimizer.options.file: {upf}:4: batch_size: '2**4' is a Python expression as text" in lines[0]
    assert lines[0].endswith("write its value: 16"), lines[0]
    assert f"{upf}:5: dense: '[20, 10]' is a Python expression as text" in lines[1], lines[1]
    assert "a JSON list ([20, 10]) or Supervisor's string of numbers (\"20 10\")" in lines[1], lines[1]
    assert emews_cmd("launch", str(wf), "--exp-dir", str(tmp_path / "exp")).returncode == 2
    assert not (tmp_path / "exp").exists()

    upf.write_text(real + '{"id": "RUN003", "epochs": 1, "batch_size": 16}\n'
                   '{"id": "RUN004", "epochs": 1, "dense": "20 10", "activation": "tanh"}\n')
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 0, proc.stderr
    ref = candle_ref()
    params, _ = parsed(evaluate(tmp_path, ref, {"epochs": 1, "batch_size": 16, "dense": "20 10"})[0])
    assert params["batch_size"] == 16 and params["dense"] == [20, 10]


def test_booleans_as_bare_flags_for_a_candle_default_model_are_refused_by_check(emews_cmd, tmp_path: Path) -> None:
    """``params: flags`` passes True as a bare ``--restart`` and leaves False out; CANDLE's parser
    (``type=str2bool``) refuses the bare flag, so with NT3's default model (``restart = True``) every
    task failed, and a space's False silently kept the model's own default. check now refuses it and
    points to ``params: candle``, with which the same workflow passes check and the booleans reach the
    parser as given."""
    bare = subprocess.run([PYTHON, str(NT3), *as_flags({"restart": True})], capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and "argument --restart: expected one argument" in bare.stderr, bare.stderr
    objective = {"command": [PYTHON, str(NT3)], "metric": "val_loss", "defaults": str(DEFAULTS)}
    no_true = tmp_path / "my_default_model.txt"
    no_true.write_text(DEFAULTS.read_text().replace("restart = True", "restart = False"))
    cases = [
        ({}, {"epochs": {"type": "int", "lower": 1, "upper": 3}}, "restart"),  # NT3's own restart = True
        ({"defaults": str(no_true)}, {"add_noise": {"type": "categorical", "values": [True, False]}}, "add_noise"),
    ]
    for i, (over, space, name) in enumerate(cases):
        wf = write_workflow(tmp_path, f"wf{i}", objective={**objective, **over}, space=space, budget={"evaluations": 2})
        proc = emews_cmd("check", str(wf))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") <= 1, proc.stderr
        assert f"{wf}: objective.params: {name} is a boolean, which params: flags passes as a bare --{name}" in proc.stderr
        assert "(allowed: params: candle" in proc.stderr, proc.stderr
        wf.write_text(wf.read_text().replace("metric: val_loss", "metric: val_loss\n  params: candle"))
        assert emews_cmd("check", str(wf)).returncode == 0
    for task_id, value in enumerate([True, False]):
        params, argv = parsed(evaluate(tmp_path, candle_ref(), {"add_noise": value, "restart": value}, task_id=task_id)[0])
        assert params["add_noise"] is value and params["restart"] is value


KERAS = TESTS / "data" / "keras"
#: the last epoch's losses in each recorded output of Keras' fit (tests/data/keras/README.md)
KERAS_LAST = {
    "tf_keras-2.21-verbose1.txt": (3.1552, 2.5218),
    "tf_keras-2.21-verbose2.txt": (3.6296, 2.5618),
    "keras-3.15-verbose1.txt": (1.8572, 1.1971),
    "keras-3.15-verbose2.txt": (3.1739, 2.1376),
}


@pytest.mark.parametrize("name", sorted(KERAS_LAST))
def test_a_keras_models_last_epoch_is_read_from_what_fit_prints(tmp_path: Path, name: str) -> None:
    """CANDLE's P1B1 (and P1B2, TC1) has no CSVLogger and prints no ``val_loss X`` line: its
    val_loss is only in Keras' epoch lines (``... - val_loss: 0.0367 - val_xent: ...``), and the
    docs' recipe failed every task with 'reported no val_loss'. The model here parses with CANDLE's
    parser, then prints what Keras' fit printed (recorded, byte for byte): the last epoch's value
    is the result, as Supervisor's model_runner takes ``history['val_loss'][-1]``."""
    model = tmp_path / "p1b1_like.py"
    model.write_text(f"""
import sys
sys.path.insert(0, {str(NT3.parent)!r})
from nt3_parse_only import initialize_parameters

initialize_parameters()
sys.stdout.buffer.write(open({str(KERAS / name)!r}, "rb").read())
print("Evaluation on test data: {{'mse': 0.03, 'r2_score': -0.02}}")  # P1B1's last lines, as it prints them
print("1/1 [==============================] - ETA: 0s1/1 [==============================] - 0s 37ms/step")
""")
    val_loss, loss = KERAS_LAST[name]
    for metric, expected in (("val_loss", val_loss), ("loss", loss)):
        ref = CommandRef((PYTHON, str(model)), metric=metric, params="candle", defaults=str(DEFAULTS))
        outcome, _ = evaluate(tmp_path, ref, {"learning_rate": 0.5})
        assert outcome.status.value == "ok", outcome.error
        assert outcome.value == pytest.approx(expected)


def test_a_bare_boolean_flag_refused_by_candles_parser_says_to_use_params_candle(tmp_path: Path) -> None:
    """Without ``defaults:`` check cannot tell a CANDLE model from a store_true one: the task fails
    with CANDLE's own refusal, and its first line (the cause fail fast and the summary show) now
    says why and what reads it."""
    outcome, _ = evaluate(tmp_path, CommandRef((PYTHON, str(NT3)), metric="val_loss"), {"add_noise": True, "epochs": 2})
    assert outcome.status.value == "failed"
    first = outcome.error.splitlines()[0]
    assert "argument --add_noise: expected one argument" in first, outcome.error
    assert "bare --add_noise" in first and "params: candle" in first, first
    outcome, _ = evaluate(tmp_path, CommandRef((PYTHON, str(NT3)), metric="val_loss"), {"epochs": "x"}, task_id=1)
    assert outcome.status.value == "failed" and "params: candle" not in outcome.error  # other refusals as they are


LIB_MODEL = TESTS / "models" / "candle_lib_model.py"


def test_a_candle_lib_model_checkpoints_in_its_run_dir_and_resume_restarts_each_from_its_own(
    emews_cmd, tmp_path: Path
) -> None:
    """A model on CANDLE's library (candle_lib: NT3's ``CandleCkptKeras``) writes its output dir and
    its checkpoints under ``$CANDLE_OUTPUT_DIR`` (else ``$CANDLE_DATA_DIR``, which it needs for its
    data) ``/MODEL/OUTPUT_DIR/EXP/RUN``: one folder outside the experiment for every run of the
    model, so ``result_file: training.log`` found nothing in the run dir, and a second experiment
    (every task of a GA, which passes no ``--run_id``) restarted from another run's checkpoints
    (NT3 under emews: 'restarting from epoch: 40', trained nothing, every task failed). emews
    now sets ``CANDLE_OUTPUT_DIR`` to each task's run dir, as Supervisor's ``model.sh`` does, and
    reads the result file where the library puts it: a SIGTERM mid-training, then ``emews
    resume``, continues each trial from its own newest checkpoint (every epoch trained once), and
    a new experiment trains from scratch."""
    shared = tmp_path / "candle_data"  # the user's CANDLE_DATA_DIR, where the model's data would be
    shared.mkdir()
    emews_cmd.env["CANDLE_DATA_DIR"] = str(shared)
    emews_cmd.env.pop("CANDLE_OUTPUT_DIR", None)
    defaults = tmp_path / "lib_default_model.txt"
    defaults.write_text("[Global_Params]\nmodel_name = 'lib'\noutput_dir = '.'\nepochs = 5\n"
                        "ckpt_restart_mode = 'off'\nckpt_save_interval = 0\n")
    events, gate = tmp_path / "events.txt", tmp_path / "gate"
    upf = tmp_path / "upf.txt"
    upf.write_text('{"id": "RUN000", "epochs": 5}\n{"id": "RUN001", "epochs": 5}\n')
    wf = write_workflow(
        tmp_path,
        objective={"command": [PYTHON, str(LIB_MODEL), "--run_id", "{id}"], "metric": "val_loss",
                   "params": "candle", "defaults": str(defaults), "result": "file", "result_file": "training.log"},
        optimizer={"name": "sweep", "options": {"file": str(upf)}},
        space={"ckpt_restart_mode": {"type": "constant", "value": "auto"},  # NT3's defaults: off, 0
               "ckpt_save_interval": {"type": "constant", "value": 1},
               "events": {"type": "constant", "value": str(events)},
               "gate": {"type": "constant", "value": str(gate)},
               "hold_after": {"type": "constant", "value": 2}},
        budget={"evaluations": 2},
        task={"timeout": 300, "isolation": "process"},
    )

    def trained() -> list[str]:
        return events.read_text().split("\n")[:-1] if events.exists() else []

    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: {"RUN000 2", "RUN001 2"} <= set(trained()), timeout=180), trained()
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=180) == 128 + signal.SIGTERM, job.stderr.read()
    gate.touch()
    proc = emews_cmd("resume", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert [(r["status"], r["objective"]) for r in rows] == [("ok", 0.2), ("ok", 0.2)], [r["error"] for r in rows]
    assert sorted(trained()) == sorted(f"RUN00{t} {e}" for t in (0, 1) for e in range(1, 6))  # each epoch once
    for task_id in (0, 1):
        run_dir = task_run_dir(tmp_path / "exp" / "runs", task_id)
        assert "restarting from ckpt: initial_epoch: 2" in (run_dir / "stdout.txt").read_text()
        assert (run_dir / "lib" / "EXP000" / f"RUN00{task_id}" / "ckpts" / "last").resolve().name == "005"
    assert list(shared.iterdir()) == []  # nothing of the run outside the experiment

    events.unlink()
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "again", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert {r["status"] for r in stored_rows(tmp_path / "again")} == {"ok"}
    assert sorted(trained()) == sorted(f"RUN00{t} {e}" for t in (0, 1) for e in range(1, 6))  # from scratch


def _files(root: Path) -> dict[str, str]:
    """Every file and link under ``root``: a file's text, a link's target."""
    return {str(p.relative_to(root)): os.readlink(p) if p.is_symlink() else p.read_text()
            for p in sorted(root.rglob("*")) if p.is_symlink() or p.is_file()}


def _stopped_candle_lib_run(emews_cmd, tmp_path: Path, stop: str):
    """Two trials of a model on candle_lib that checkpoints as ``CandleCkpt`` does (P1B1's PyTorch
    model, with ``CandleCkptPyTorch``), its result CANDLE's ``ckpts/last/ckpt-info.json`` (P1B1
    reports no metric of its own; ``best_metric_last`` is there), launched and stopped (SIGTERM, or
    every process SIGKILLed) after each saved epoch 2 of 5; the experiment, what was trained
    (``RUN_ID EPOCH``, sorted) and the gate that lets them train on. The objective is
    docs/coming-from-candle.md's recipe for P1B1's PyTorch model, the laid-out model in its place."""
    recipe = next(b for b in re.findall(r"```yaml\n(.*?)```", DOCS.read_text(), re.S) if "p1b1_baseline_pytorch" in b)
    objective = yaml.safe_load(recipe)["objective"]
    emews_cmd.env["CANDLE_DATA_DIR"] = str(tmp_path / "candle_data")
    emews_cmd.env.pop("CANDLE_OUTPUT_DIR", None)
    (tmp_path / "candle_data").mkdir()
    defaults = tmp_path / "lib_default_model.txt"
    defaults.write_text("[Global_Params]\nmodel_name = 'p1b1'\nepochs = 5\n"
                        "ckpt_restart_mode = 'off'\nckpt_save_interval = 0\n")
    events, gate = tmp_path / "events.txt", tmp_path / "gate"
    upf = tmp_path / "upf.txt"
    upf.write_text('{"id": "RUN000"}\n{"id": "RUN001"}\n')
    wf = write_workflow(
        tmp_path,
        objective={**objective, "command": [PYTHON, str(LIB_MODEL), "--run_id", "{id}"], "defaults": str(defaults)},
        optimizer={"name": "sweep", "options": {"file": str(upf)}},
        space={"ckpt_restart_mode": {"type": "constant", "value": "auto"},
               "ckpt_save_interval": {"type": "constant", "value": 1},
               "events": {"type": "constant", "value": str(events)},
               "gate": {"type": "constant", "value": str(gate)},
               "hold_after": {"type": "constant", "value": 2}},
        task={"timeout": 300, "isolation": "process"},
    )

    def trained() -> list[str]:
        return sorted(events.read_text().split("\n")[:-1]) if events.exists() else []

    exp = tmp_path / "exp"
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert wait_until(lambda: {"RUN000 2", "RUN001 2"} <= set(trained()), timeout=180), trained()
    # recorded as running (after half a second: one killed sooner is not run again, its point goes
    # to a new task: a CANDLE epoch takes longer than that)
    assert wait_until(lambda: (exp / "results.db").exists() and query(exp, "SELECT count(*) FROM tasks") == [(2,)],
                      timeout=60)
    if stop == "SIGTERM":
        job.send_signal(signal.SIGTERM)
        assert job.wait(timeout=180) == 128 + signal.SIGTERM, job.stderr.read()
    else:
        emews_cmd.kill_all()
        job.communicate(timeout=60)
    return exp, trained, gate


def _resumed_from_epoch_2(emews_cmd, exp: Path, trained) -> None:
    """``emews resume EXP`` ran both trials on from their epoch 2 to 5: each result is epoch 5's."""
    proc = emews_cmd("resume", exp.name, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(exp)
    assert [(r["status"], r["objective"]) for r in rows] == [("ok", 0.2), ("ok", 0.2)], [r["error"] for r in rows]
    assert trained() == sorted(f"RUN00{t} {e}" for t in (0, 1) for e in range(3, 6)), trained()
    for task_id in (0, 1):
        run_dir = task_run_dir(exp / "runs", task_id)
        assert (run_dir / "stdout.txt").read_text().count("restarting from ckpt: initial_epoch: 2") == 1
        last = run_dir / "p1b1" / "Output" / "EXP000" / f"RUN00{task_id}" / "ckpts" / "last"
        assert last.resolve() == last.parent.resolve() / "epochs" / "005"  # its own


@pytest.mark.parametrize("stop", ["SIGTERM", "kill -9"])
def test_a_candle_checkpoint_that_is_the_result_file_is_restarted_from_by_emews_resume(
    emews_cmd, tmp_path: Path, stop: str
) -> None:
    """Resumed, each trial restarts from its own newest CANDLE checkpoint. emews deleted the
    earlier attempt's result file before the task ran again, through the ``ckpts/last`` link, so
    the checkpoint lost its ckpt-info.json and every trial failed in CANDLE's ``restart_json``
    ('model exists but not json!'); now an earlier result file is left in place and only one the
    command writes is read."""
    exp, trained, gate = _stopped_candle_lib_run(emews_cmd, tmp_path, stop)
    (tmp_path / "events.txt").unlink()
    gate.touch()
    _resumed_from_epoch_2(emews_cmd, exp, trained)


def _files(root: Path) -> dict[str, str]:
    """Every file and link under ``root``: a file's text, a link's target."""
    return {str(p.relative_to(root)): os.readlink(p) if p.is_symlink() else p.read_text()
            for p in sorted(root.rglob("*")) if p.is_symlink() or p.is_file()}


def test_a_copied_experiment_resumed_restarts_from_its_own_candle_checkpoints(emews_cmd, tmp_path: Path) -> None:
    """A copy (``cp -a``) of a stopped experiment held CANDLE's absolute ``ckpts/last`` links into
    the original: resumed after the original had finished, each task restarted from the original's
    epoch 5 (trained nothing) and its result was refused as outside the run dir. Now those links
    are re-pointed into the copy before its task runs: it restarts from its own epoch 2, and every
    file of the original stays as it was."""
    exp, trained, gate = _stopped_candle_lib_run(emews_cmd, tmp_path, "SIGTERM")
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(exp), str(copy)], check=True)
    (tmp_path / "events.txt").unlink()
    gate.touch()
    _resumed_from_epoch_2(emews_cmd, exp, trained)
    original = _files(exp / "runs")
    (tmp_path / "events.txt").unlink()
    _resumed_from_epoch_2(emews_cmd, copy, trained)
    assert _files(exp / "runs") == original
