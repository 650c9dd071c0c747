"""Command objectives (issue 12): a CANDLE-style program per evaluation, real processes throughout."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import given, strategies as st

from emews.objective.command import CommandRef, as_flags, parse_result
from emews.objective.context import TaskContext, task_run_dir
from emews.objective.function import outcome_from_exception, outcome_from_return
from emews.core.results import Status
from testutil import TESTS, stored_rows, write_workflow

MODEL = TESTS / "models" / "candle_model.py"
MODEL_SH = TESTS / "models" / "model.sh"
PYTHON = os.environ.get("PYTHON", "python3")


def evaluate(tmp_path: Path, ref: CommandRef, params: dict, task_id: int = 0, seed: int = 7):
    """Run one task as a runner does (load, call, outcome); the outcome and its run dir."""
    context = TaskContext(task_id, 1, seed, [], "here", tmp_path / "runs")
    try:
        outcome = outcome_from_return(task_id, ref.load().call(params, context), ref.metric)
    except Exception as exc:
        outcome = outcome_from_exception(task_id, exc)
    return outcome, task_run_dir(tmp_path / "runs", task_id)


def loss_of(x: float, epochs: int, dense: list[int] = (), use_bn: bool = False) -> float:
    return x * x + epochs / 100 + (len(dense) if use_bn else 0)


def test_flags_are_candle_style_and_the_last_metric_line_of_stdout_is_the_result(tmp_path: Path) -> None:
    ref = CommandRef((PYTHON, str(MODEL)), metric="loss")
    params = {"x": 1.5, "epochs": 20, "dense": [64, 32], "use_bn": True, "activation": "tanh", "mode": "json"}
    outcome, run_dir = evaluate(tmp_path, ref, params)
    assert outcome.status is Status.OK, outcome.error
    assert outcome.value == pytest.approx(loss_of(1.5, 20, [64, 32], True))
    assert outcome.metrics["seen"] == {"x": 1.5, "epochs": 20, "dense": [64, 32], "use_bn": True,
                                       "activation": "tanh"}
    assert outcome.metrics["accuracy"] == 0.5 and outcome.metrics["seed"] == "7"
    assert Path(outcome.metrics["cwd"]) == run_dir  # it ran in the task's run dir
    assert json.loads((run_dir / "params.json").read_text()) == params  # what it ran with is recorded
    assert "epoch 1/1" in (run_dir / "stdout.txt").read_text()


def test_false_and_none_are_left_out_and_placeholders_are_not_repeated_as_flags(tmp_path: Path) -> None:
    ref = CommandRef((PYTHON, str(MODEL), "--epochs", "{epochs}"), metric="loss")
    outcome, _ = evaluate(tmp_path, ref, {"x": -2.0, "epochs": 3, "use_bn": False, "dense": [5], "mode": "stdout"})
    assert outcome.status is Status.OK, outcome.error
    assert outcome.value == pytest.approx(loss_of(-2.0, 3))
    assert CommandRef((PYTHON,)).load().argv({"a": 1, "b": False, "c": None, "d": True, "e": [1, "x"]}, {}) == \
        [PYTHON, "--a", "1", "--d", "--e", "1", "x"]


@pytest.mark.parametrize("name", ["params.json", "params.yaml"])
def test_params_by_file(tmp_path: Path, name: str) -> None:
    ref = CommandRef((PYTHON, str(MODEL), "--params", "{params_file}"), metric="loss", params="file",
                     params_file=name)
    params = {"x": 0.25, "epochs": 7, "mode": "stdout"}
    outcome, run_dir = evaluate(tmp_path, ref, params)
    assert outcome.status is Status.OK, outcome.error
    assert outcome.value == pytest.approx(loss_of(0.25, 7))
    assert (yaml.safe_load if name.endswith("yaml") else json.loads)((run_dir / name).read_text()) == params


@pytest.mark.parametrize("command", [(PYTHON, str(MODEL), "--from-env"), (str(MODEL_SH),)], ids=["python", "shell"])
def test_params_by_environment(tmp_path: Path, command: tuple) -> None:
    ref = CommandRef(command, metric="loss", params="env")
    outcome, _ = evaluate(tmp_path, ref, {"x": 3.0, "epochs": 50, "mode": "stdout"})
    assert outcome.status is Status.OK, outcome.error
    assert outcome.value == pytest.approx(loss_of(3.0, 50))


def test_result_by_file_and_from_a_candle_output_dir(tmp_path: Path) -> None:
    by_file = CommandRef((PYTHON, str(MODEL)), metric="loss", result="file", result_file="result.json")
    outcome, _ = evaluate(tmp_path, by_file, {"x": 2.0, "epochs": 1, "mode": "file"}, task_id=1)
    assert outcome.status is Status.OK and outcome.value == pytest.approx(loss_of(2.0, 1))
    candle = CommandRef((PYTHON, str(MODEL)), metric="loss", result="output_dir")
    outcome, run_dir = evaluate(tmp_path, candle, {"x": 1.0, "epochs": 10, "mode": "candle"}, task_id=2)
    assert outcome.status is Status.OK, outcome.error
    assert outcome.value == pytest.approx(loss_of(1.0, 10))
    assert json.loads((run_dir / "params.json").read_text())["output_dir"] == str(run_dir)


@pytest.mark.parametrize("command", [(PYTHON, str(MODEL)), (str(MODEL_SH),)], ids=["python", "shell"])
def test_a_non_zero_exit_is_a_failure_with_its_status_and_stderr(tmp_path: Path, command: tuple) -> None:
    ref = CommandRef(command, metric="loss", params="env" if command[0].endswith(".sh") else "flags")
    outcome, run_dir = evaluate(tmp_path, ref, {"x": 1.0, "epochs": 1, "mode": "fail"})
    assert outcome.status is Status.FAILED
    status = 4 if command[0].endswith(".sh") else 3
    assert f"exited with status {status}" in outcome.error
    message = "cannot open input" if status == 4 else "fatal: data not found"
    assert message in outcome.error and message in (run_dir / "stderr.txt").read_text()
    assert "Traceback" not in outcome.error


def test_a_signal_death_is_a_crash_and_a_silent_command_a_failure(tmp_path: Path) -> None:
    ref = CommandRef((PYTHON, str(MODEL)), metric="loss")
    crashed, _ = evaluate(tmp_path, ref, {"mode": "segv"}, task_id=1)
    assert crashed.status is Status.CRASHED and "SIGSEGV" in crashed.error
    silent, _ = evaluate(tmp_path, ref, {"mode": "noresult"}, task_id=2)
    assert silent.status is Status.FAILED
    assert "reported no 'loss'" in silent.error and "training done" in silent.error
    missing, _ = evaluate(tmp_path, CommandRef(("/no/such/program",)), {}, task_id=3)
    assert missing.status is Status.FAILED and "/no/such/program" in missing.error


def test_a_model_script_that_exits_0_without_its_result_file_says_what_the_model_said(tmp_path: Path) -> None:
    """The EMEWS template's model script reports its model's failure on stdout and exits 0 (``set +e``):
    the failure names the model's error and the file not written, not "reported no 'f' in output.txt"."""
    project = TESTS / "data" / "emews"
    ref = CommandRef(("bash", str(project / "scripts" / "run_model.sh"), "{params}", "{run_dir}/output.txt", "1",
                      str(project), "{run_dir}"), metric="f", result="file", result_file="output.txt")
    outcome, run_dir = evaluate(tmp_path, ref, {"params": "oops"})
    assert outcome.status is Status.FAILED
    first, rest = outcome.error.split("\n", 1)
    assert first == "ValueError: could not convert string to float: 'oops'"
    assert f"command bash exited 0 but wrote no output.txt in {run_dir}; last lines of stderr:" in rest
    assert "---> Error in" in (run_dir / "stdout.txt").read_text()


def test_a_second_attempt_reads_only_its_own_output(tmp_path: Path) -> None:
    ref = CommandRef((PYTHON, str(MODEL)), metric="loss")
    first, run_dir = evaluate(tmp_path, ref, {"x": 1.0, "mode": "stdout"})
    assert first.status is Status.OK
    again, _ = evaluate(tmp_path, ref, {"mode": "noresult"})  # same task id: same run dir
    assert again.status is Status.FAILED
    assert (run_dir / "stdout.txt").read_text().count("loss 1.01") == 1


numbers = st.floats(allow_nan=False, allow_infinity=False, width=64)


@given(value=numbers, noise=st.lists(st.text(alphabet="abc :=0123456789.\n{}", max_size=20), max_size=5),
       form=st.sampled_from(["{m} {v!r}", "{m}: {v!r}", "{m}={v!r}", '{{"{m}": {v!r}}}']))
def test_the_last_reporting_line_wins(value: float, noise: list[str], form: str) -> None:
    text = "\n".join(["val_loss 99", *noise, form.format(m="val_loss", v=value), "done"])
    assert parse_result(text, "val_loss", bare_number=False)["val_loss"] == value


def test_flags_round_trip_through_argparse() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float)
    parser.add_argument("--dense", type=int, nargs="+")
    parser.add_argument("--shuffle", action="store_true")
    parser.add_argument("--act")
    ns = parser.parse_args(as_flags({"lr": 1e-5, "dense": [128, 64], "shuffle": True, "act": "a b"}))
    assert (ns.lr, ns.dense, ns.shuffle, ns.act) == (1e-5, [128, 64], True, "a b")
    assert not math.isnan(ns.lr)


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_command_objectives_under_mpiexec(emews_cmd, tmp_path: Path, isolation: str) -> None:
    """`emews launch` with a relative model path: every way of ending is recorded, a hang is killed
    with its grandchild (a session of its own), and nothing outlives the job."""
    (tmp_path / "model.py").write_text(MODEL.read_text())
    modes = ["stdout", "json", "file", "fail", "noresult", "hang"]
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"},
        objective={"command": [PYTHON, "model.py", "--epochs", "{epochs}"], "metric": "loss",
                   "result": "stdout"},
        space={"mode": {"type": "categorical", "values": modes}, "x": {"type": "constant", "value": 2.0},
               "epochs": {"type": "constant", "value": 30}},
        budget={"evaluations": len(modes)}, task={"timeout": 10, "isolation": isolation})
    proc = emews_cmd("launch", str(wf), "--workers", "3", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = {json.loads(r["params"])["mode"]: r for r in stored_rows(tmp_path / "exp")}
    assert {m: r["status"] for m, r in rows.items()} == {
        "stdout": "ok", "json": "ok", "file": "failed", "fail": "failed", "noresult": "failed", "hang": "timeout"}
    assert rows["stdout"]["objective"] == pytest.approx(loss_of(2.0, 30))
    assert rows["json"]["objective"] == pytest.approx(loss_of(2.0, 30))
    assert "exited with status 3" in rows["fail"]["error"] and "fatal: data not found" in rows["fail"]["error"]
    assert "reported no 'loss'" in rows["noresult"]["error"]
    hang_dir = task_run_dir(tmp_path / "exp" / "runs", rows["hang"]["id"])
    assert (hang_dir / "hanging").is_file()  # it did start, and its grandchild with it
    assert emews_cmd.leftovers_after_exit() == []


def test_a_shell_model_under_mpiexec(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "model.sh").write_text(MODEL_SH.read_text())
    (tmp_path / "model.sh").chmod(0o755)
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep", "options": {"levels": 3}},
        objective={"command": ["./model.sh"], "metric": "loss", "params": "env"},
        space={"x": {"type": "float", "lower": -1.0, "upper": 1.0}, "epochs": {"type": "int", "lower": 10, "upper": 30},
               "mode": {"type": "constant", "value": "stdout"}},
        budget={"evaluations": 9}, task={"timeout": 60, "isolation": "process"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == 9 and {r["status"] for r in rows} == {"ok"}
    for r in rows:
        p = json.loads(r["params"])
        assert r["objective"] == pytest.approx(loss_of(p["x"], p["epochs"]))
    assert emews_cmd.leftovers_after_exit() == []


@pytest.mark.parametrize("objective, key, words", [
    ({"command": [PYTHON, "m.py", "--e", "{epochz}"]}, "objective.command", "{epochz} names no parameter"),
    ({"command": ["no-such-program-here"]}, "objective.command", "not found on PATH"),
    ({"command": [PYTHON], "module": "m.py"}, "objective", "either module"),
    ({"command": [PYTHON], "params": "argv"}, "objective.params", "'flags', 'env', 'file' or 'candle'"),
    ({"command": [PYTHON], "params_file": "p.txt"}, "objective.params_file", ".json, .yaml or .yml"),
    ({"module": "m.py", "result": "stdout"}, "objective.result", "only a command objective"),
    ({"command": [PYTHON], "defaults": "missing_default_model.txt"}, "objective.defaults", "does not exist"),
    ({"command": [PYTHON, True]}, "objective.command.1", "must be text"),
    ({"command": []}, "objective.command", "at least 1 item"),
])
def test_bad_command_objectives_are_one_clear_message(emews_cmd, tmp_path: Path, objective: dict, key: str,
                                                      words: str) -> None:
    (tmp_path / "m.py").write_text("def run(p):\n    return 0.0\n")
    wf = write_workflow(tmp_path, objective={"metric": "loss", **objective},
                        space={"epochs": {"type": "int", "lower": 1, "upper": 3}})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2
    assert f"{wf}: {key}: " in proc.stderr and words in proc.stderr and "Traceback" not in proc.stderr


def test_numbers_in_the_command_are_arguments(tmp_path: Path) -> None:
    from emews.config.workflow import load_workflow

    wf = write_workflow(tmp_path, objective={"command": [PYTHON, str(MODEL), "--epochs", 5, "--x", 0.5],
                                             "metric": "loss"},
                        space={"mode": {"type": "constant", "value": "stdout"}})
    ref = load_workflow(str(wf)).objective
    assert ref.command[2:] == ("--epochs", "5", "--x", "0.5")
    outcome, _ = evaluate(tmp_path, ref, {"mode": "stdout"})
    assert outcome.status is Status.OK and outcome.value == pytest.approx(loss_of(0.5, 5))


# --- the run dir is the command's only playground (reliability round 3, finding 2) ---

LEAVING = [("result_file", "../../../results.db"), ("result_file", "ABSOLUTE"), ("result_file", "a/../../x.json"),
           ("params_file", "../../../workflow.yaml"), ("params_file", "ABSOLUTE")]


@pytest.mark.parametrize("key, name", LEAVING)
def test_files_named_outside_the_run_dir_are_refused_at_check_and_launch(emews_cmd, tmp_path: Path, key: str,
                                                                         name: str) -> None:
    victim = tmp_path / ("victim.yaml" if key == "params_file" else "victim.txt")
    victim.write_text("precious\n")
    name = str(victim) if name == "ABSOLUTE" else name
    wf = write_workflow(tmp_path, objective={"command": [PYTHON, str(MODEL)], "metric": "loss", key: name,
                                             **({"result": "file"} if key == "result_file" else {"params": "file"})},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}}, budget={"evaluations": 2})
    for verb in (("check", str(wf)), ("launch", str(wf), "--workers", "1", "--exp-dir", "exp")):
        proc = emews_cmd(*verb)
        assert proc.returncode == 2, (verb, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr
        assert f"{wf}: objective.{key}: " in lines[0] and "inside the task's run dir" in lines[0]
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "exp").exists()


def planted(run_dir: Path, name: str, target: Path) -> None:
    """A symlink ``name`` in the run dir pointing out of it, as an earlier attempt may leave one."""
    (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / name).symlink_to(target)


def test_a_params_file_linked_out_of_the_run_dir_is_not_written(tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("precious\n")
    run_dir = task_run_dir(tmp_path / "runs", 0)
    planted(run_dir, "in.json", victim)
    ref = CommandRef((PYTHON, str(MODEL), "--params", "{params_file}"), metric="loss", params="file",
                     params_file="in.json")
    outcome, _ = evaluate(tmp_path, ref, {"x": 1.0, "mode": "stdout"})
    assert outcome.status is Status.FAILED
    assert "in.json" in outcome.error and "outside the run dir" in outcome.error
    assert victim.read_text() == "precious\n"


def test_a_result_file_behind_a_link_out_of_the_run_dir_is_neither_deleted_nor_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "result.json").write_text('{"loss": 0.0001}')
    run_dir = task_run_dir(tmp_path / "runs", 0)
    planted(run_dir, "out", outside)  # a linked folder: unlinking out/result.json would delete the target
    ref = CommandRef((PYTHON, str(MODEL)), metric="loss", result="file", result_file="out/result.json")
    outcome, _ = evaluate(tmp_path, ref, {"x": 1.0, "mode": "noresult"})
    assert outcome.status is Status.FAILED and "outside the run dir" in outcome.error
    assert (outside / "result.json").read_text() == '{"loss": 0.0001}'
    # a link the command itself leaves as its result is not read either
    forged = CommandRef(("sh", "-c", f"ln -s {outside / 'result.json'} result.json"), metric="loss",
                        result="file", result_file="result.json")
    outcome, _ = evaluate(tmp_path, forged, {}, task_id=1)
    assert outcome.status is Status.FAILED and "outside the run dir" in outcome.error


def test_a_retry_does_not_write_through_a_link_the_first_attempt_left(emews_cmd, tmp_path: Path) -> None:
    """Under `emews launch`: attempt 1 plants `in.json -> victim` and dies of SIGKILL; the retry
    refuses to write the parameters through it, and says so."""
    victim = tmp_path / "victim.json"
    victim.write_text("precious\n")
    script = f"if [ -e first ]; then echo loss 1; else touch first; ln -sf {victim} in.json; kill -KILL $$; fi"
    wf = write_workflow(tmp_path, optimizer={"name": "sweep"},
                        objective={"command": ["sh", "-c", script], "metric": "loss", "params": "file",
                                   "params_file": "in.json"},
                        space={"x": {"type": "constant", "value": 1.0}}, budget={"evaluations": 1},
                        task={"timeout": 60, "isolation": "process", "retries": 1})
    proc = emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    [row] = stored_rows(tmp_path / "exp")
    assert row["status"] == "failed" and "outside the run dir" in row["error"]
    assert victim.read_text() == "precious\n"
    assert (task_run_dir(tmp_path / "exp" / "runs", row["id"]) / "first").is_file()  # attempt 1 did run


# --- values in a shell's command string, and values that look like options (finding 12) ---

HOSTILE = ["$(touch PWNED)", "x;echo loss 0.0001", "a b", "it's \"quoted\" `touch PWNED` \\ $HOME", ""]


@pytest.mark.parametrize("form", ["{act}", '"{act}"', "'{act}'", "--activation={act}"])
@pytest.mark.parametrize("shell", [("sh", "-c"), ("bash", "-lc"), ("bash", "-e", "-o", "pipefail", "-c")],
                         ids=["sh-c", "bash-lc", "bash-o-c"])
def test_values_in_a_shell_string_are_one_literal_word(tmp_path: Path, form: str, shell: tuple) -> None:
    option = "" if form.startswith("--") else "--activation "
    script = f"{PYTHON} {MODEL} --x {{x}} {option}{form} --mode json"
    ref = CommandRef((*shell, script), metric="loss")
    for task_id, value in enumerate(HOSTILE):
        outcome, run_dir = evaluate(tmp_path, ref, {"x": -0.5, "act": value}, task_id=task_id)
        assert outcome.status is Status.OK, (value, outcome.error)
        assert outcome.value == pytest.approx(loss_of(-0.5, 1))  # not forged
        assert outcome.metrics["seen"]["activation"] == value
        assert not (run_dir / "PWNED").exists()


def test_a_shell_string_passes_its_other_arguments_as_argv(tmp_path: Path) -> None:
    ref = CommandRef(("sh", "-c", 'echo "loss $1"', "{act}", "{x}"), metric="loss")
    assert ref.load().argv({"act": "a b", "x": 2}, {}) == ["sh", "-c", 'echo "loss $1"', "a b", "2"]


def test_under_launch_a_shell_string_runs_the_model_with_quoted_values(emews_cmd, tmp_path: Path) -> None:
    """The documented `[sh, -c, "python3 model.py --lr {lr}"]` form: model.py (relative to the
    workflow) is found from the run dir, and no value runs as code or forges the metric."""
    (tmp_path / "model.py").write_text(MODEL.read_text())
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"},
        objective={"command": ["sh", "-c", f"{PYTHON} model.py --x {{x}} --activation {{act}} --mode json"],
                   "metric": "loss"},
        space={"act": {"type": "categorical", "values": HOSTILE[:4]}, "x": {"type": "constant", "value": 2.0}},
        budget={"evaluations": 4}, task={"timeout": 60, "isolation": "process"})
    assert emews_cmd("check", str(wf)).returncode == 0
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert sorted(json.loads(r["params"])["act"] for r in rows) == sorted(HOSTILE[:4])
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["objective"] == pytest.approx(loss_of(2.0, 1))
    assert not list(tmp_path.rglob("PWNED"))


def test_files_named_in_a_shell_string_are_made_absolute(tmp_path: Path) -> None:
    from emews.config.workflow import load_workflow

    (tmp_path / "model.py").write_text("")
    wf = write_workflow(tmp_path, objective={
        "command": ["bash", "-lc", "cd /tmp && python3 model.py --in 'model.py' \"model.py\" model.pyc;model.py"],
        "metric": "loss"})
    script = load_workflow(str(wf)).objective.command[2]
    model = tmp_path / "model.py"
    assert script == f"cd /tmp && python3 {model} --in 'model.py' \"model.py\" model.pyc;{model}"


def test_flags_that_look_like_options_reach_a_strict_argparse_model_as_values(tmp_path: Path) -> None:
    script = tmp_path / "strict.py"
    script.write_text(
        "import argparse, json\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--lr', type=float, required=True)\n"
        "p.add_argument('--act', required=True)\n"
        "p.add_argument('--dense', type=float, nargs='+', required=True)\n"
        "print(json.dumps({'loss': 0.0, 'seen': vars(p.parse_args())}))\n")
    ref = CommandRef((PYTHON, str(script)), metric="loss")
    cases = [(-1e-05, "-rf", [-1e-05, 2.0]), (-0.5, "--output_dir=/etc", [-0.5, -3.0]), (1e-05, "relu", [1e-300])]
    for task_id, (lr, act, dense) in enumerate(cases):
        outcome, _ = evaluate(tmp_path, ref, {"lr": lr, "act": act, "dense": dense}, task_id=task_id)
        assert outcome.status is Status.OK, outcome.error
        assert outcome.metrics["seen"] == {"lr": lr, "act": act, "dense": dense}


@pytest.mark.parametrize("form", ["argv", "sh-c"])
def test_a_negative_number_in_a_placeholder_reaches_a_strict_argparse_model_as_a_value(tmp_path: Path,
                                                                                      form: str) -> None:
    """The documented ``--lr {lr}`` (an argv item or the string ``sh -c`` runs) gave -1e-05 as
    ``-1e-05``, which argparse takes for an option: the task failed "expected one argument" (finding 12,
    flags fixed, placeholders not). A negative number goes as argparse reads one, ``-0.00001``."""
    script = tmp_path / "strict.py"
    script.write_text(
        "import argparse, json\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--lr', type=float, required=True)\n"
        "p.add_argument('--n', type=float, required=True)\n"
        "print(json.dumps({'loss': 0.0, 'seen': vars(p.parse_args())}))\n")
    command = ((PYTHON, str(script), "--lr", "{lr}", "--n", "{n}") if form == "argv"
               else ("sh", "-c", f"{PYTHON} {script} --lr {{lr}} --n {{n}}"))
    ref = CommandRef(command, metric="loss")
    for task_id, (lr, n) in enumerate([(-1e-05, -1e20), (-0.5, -3.0), (-2.5e-300, 1e-05)]):
        outcome, _ = evaluate(tmp_path, ref, {"lr": lr, "n": n}, task_id=task_id)
        assert outcome.status is Status.OK, outcome.error
        assert outcome.metrics["seen"] == {"lr": lr, "n": n}


def test_flags_with_option_like_values_use_the_equals_form() -> None:
    assert as_flags({"lr": -1e-05, "act": "-rf", "n": 3, "dense": [-1e-05, 5]}) == \
        ["--lr=-1e-05", "--act=-rf", "--n", "3", "--dense", "-0.00001", "5"]


def test_a_list_item_that_looks_like_an_option_fails_the_task_clearly(tmp_path: Path) -> None:
    outcome, _ = evaluate(tmp_path, CommandRef((PYTHON, str(MODEL)), metric="loss"), {"names": ["a", "-rf"]})
    assert outcome.status is Status.FAILED
    assert "names" in outcome.error and "'-rf'" in outcome.error and "Traceback" not in outcome.error


def test_under_launch_negative_and_dash_values_reach_the_model(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(
        tmp_path, optimizer={"name": "sweep"},
        objective={"command": [PYTHON, str(MODEL)], "metric": "loss"},
        space={"x": {"type": "categorical", "values": [-1e-05, -0.5]},
               "activation": {"type": "categorical", "values": ["-rf", "--output_dir=/etc"]},
               "mode": {"type": "constant", "value": "json"}},
        budget={"evaluations": 4}, task={"timeout": 60, "isolation": "process"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == 4
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["objective"] == pytest.approx(loss_of(json.loads(r["params"])["x"], 1))


UNRUNNABLE = [
    ("#!/bin/sh\necho loss 0.5\n", 0o644, "is not executable: make it so (chmod +x model.sh)"),
    ("echo loss 0.5\n", 0o755, "has no interpreter line"),
    ("#!/bin/sh\r\necho loss 0.5\r\n", 0o755, "has Windows line endings"),
]


@pytest.mark.parametrize("text, mode, words", UNRUNNABLE)
def test_a_script_that_cannot_be_run_is_refused_by_check_saying_why(emews_cmd, tmp_path: Path, text: str, mode: int,
                                                                    words: str) -> None:
    script = tmp_path / "model.sh"
    script.write_text(text)
    script.chmod(mode)
    wf = write_workflow(tmp_path, objective={"command": [str(script)], "metric": "loss"})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and f"{wf}: objective.command: command program '{script}' {words}" in proc.stderr


@pytest.mark.parametrize("line, words, tried", [
    ("#!/opt/nowhere/bin/python3", "its #! line names the interpreter /opt/nowhere/bin/python3, which does not exist here",
     "cannot run command {script}: its #! line names the interpreter /opt/nowhere/bin/python3, which does not exist here"),
    # env itself runs, and says which program it did not find (its stderr's last line)
    ("#!/usr/bin/env -S python3.99 -u", "its #! line runs 'python3.99' through env, and no python3.99 is on PATH here",
     "/usr/bin/env: ‘python3.99’: No such file or directory"),
])
def test_a_script_whose_interpreter_is_missing_is_named_by_check_and_fails_its_try(emews_cmd, tmp_path: Path,
                                                                                  line: str, words: str,
                                                                                  tried: str) -> None:
    """Found here: a script whose #! names an interpreter that is not there passed emews check
    without a word, and check --try said 'cannot run command .../model.py: No such file or
    directory' of a file that exists. check now warns (the site's module load may bring the
    interpreter, so it is no refusal) and the try names the interpreter."""
    script = tmp_path / "model.py"
    script.write_text(f"{line}\nprint('loss 0.5')\n")
    script.chmod(0o755)
    wf = write_workflow(tmp_path, objective={"command": [str(script)], "metric": "loss"})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        f"emews: warning: {wf}: objective.command: command program '{script}': {words} (fine if the site's "
        f"environment.setup, a module load, provides it; emews check --try runs the command here)\n"
    )
    proc = emews_cmd("check", str(wf), "--try")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    failed = next(line for line in proc.stdout.splitlines() if line.startswith("try: failed: "))
    assert failed == "try: failed: " + tried.format(script=script), failed


def test_a_script_whose_interpreter_is_there_gets_no_warning(emews_cmd, tmp_path: Path) -> None:
    script = tmp_path / "model.py"
    script.write_text("#!/usr/bin/env python3\nprint('loss 0.5')\n")
    script.chmod(0o755)
    wf = write_workflow(tmp_path, objective={"command": [str(script)], "metric": "loss"})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_command_that_prints_another_metric_is_named_by_what_it_printed(emews_cmd, tmp_path: Path) -> None:
    """metric: val_loss, the model prints `loss 0.5`: the one line that names the failure (check
    --try, fail fast, the summary) shows the line the model printed, not an empty 'last lines:'."""
    model = tmp_path / "model.py"
    model.write_text("import sys\nprint('epoch 1 done')\nprint('loss', 0.5 + float(sys.argv[-1]))\n")
    wf = write_workflow(tmp_path, objective={"command": [PYTHON, str(model)], "metric": "val_loss"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 0.4}})
    proc = emews_cmd("check", str(wf), "--try")
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr
    failed = next(line for line in proc.stdout.splitlines() if line.startswith("try: failed: "))
    assert "reported no 'val_loss' in stdout" in failed and "its last line: 'loss 0." in failed
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 1
    stop = proc.stderr.strip().splitlines()[-1]
    assert "the first 5 evaluations all failed: " in stop and "its last line: 'loss 0." in stop
