"""``emews check WORKFLOW --try`` (issue 24): the optimizer's first point, evaluated once here with the
objective's real runner, before anything is submitted; real processes throughout (``python -m emews``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from testutil import write_workflow

#: a CANDLE-style model whose parser rejects what it is given (``--lr 0.01`` for an int)
STRICT_MODEL = """
import argparse
parser = argparse.ArgumentParser(prog="nt3_baseline")
parser.add_argument("--lr", type=int)
args = parser.parse_args()
print("loss", args.lr)
"""


@pytest.fixture
def scratch(emews_cmd, tmp_path: Path) -> Path:
    """Where the try's scratch directories go (TMPDIR of the command)."""
    folder = tmp_path / "scratch"
    folder.mkdir()
    emews_cmd.env["TMPDIR"] = str(folder)
    return folder


def check_try(emews_cmd, wf: Path):
    proc = emews_cmd("check", str(wf), "--try", timeout=240)
    lines = {
        line.split(":", 2)[1].strip(): line.split(":", 2)[2].strip()
        for line in proc.stdout.splitlines()
        if line.startswith("try: ") and line.count(":") >= 2
    }
    return proc, lines


def point_of(proc) -> dict:
    line = next(line for line in proc.stdout.splitlines() if line.startswith("try: point "))
    return json.loads(line[len("try: point ") :])


def test_a_working_objective_shows_the_point_and_its_metric_and_leaves_nothing(emews_cmd, tmp_path, scratch) -> None:
    wf = write_workflow(
        tmp_path,
        objective={"module": str(tmp_path / "obj.py"), "metric": "loss"},
        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
    )
    (tmp_path / "obj.py").write_text("def run(p):\n    return {'loss': p['x'] ** 2, 'other': 1}\n")
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    x = point_of(proc)["x"]
    assert -2.0 <= x <= 2.0
    assert proc.stdout.splitlines()[-1].startswith(f"try: ok: loss {x * x:.6g} (in ")
    assert list(scratch.iterdir()) == []  # the scratch directory is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["obj.py", "scratch", "wf.yaml"]  # no experiment


def test_a_failing_python_objective_shows_its_exception_and_names_no_run_dir_it_did_not_use(
    emews_cmd, tmp_path, scratch
) -> None:
    """A Python objective that never used ``ctx.run_dir`` has none: the try said 'run dir (kept)' of the
    scratch root (its store, nothing of the task's); it names no run dir and keeps no scratch."""
    wf = write_workflow(tmp_path, space={"x": {"type": "float", "lower": -2.0, "upper": 2.0},
                                         "mode": {"type": "constant", "value": "raise"}})
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines["failed"] == f"RuntimeError: bad parameters x={point_of(proc)['x']}"
    assert "run dir (kept)" not in lines, proc.stdout
    assert list(scratch.iterdir()) == []
    assert "Traceback" not in proc.stdout  # the line that names the problem, not the traceback


def test_a_failing_python_objective_that_used_its_run_dir_names_it(emews_cmd, tmp_path, scratch) -> None:
    (tmp_path / "model.py").write_text(
        "def run(params, ctx):\n"
        "    (ctx.run_dir / 'partial.txt').write_text('half')\n"
        "    raise RuntimeError('diverged')\n"
    )
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "model.py")})
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    kept = Path(lines["run dir (kept)"])
    assert kept.is_relative_to(scratch) and kept.parts[-3:] == ("runs", "000", "000000")
    assert (kept / "partial.txt").read_text() == "half"


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_failing_python_objective_names_the_file_and_line_that_raised(
    emews_cmd, tmp_path, scratch, isolation
) -> None:
    """The kept run dir of a Python objective holds no traceback: the try names where it was raised, in the
    objective's own file (not the library frame below it, nor emews')."""
    (tmp_path / "model.py").write_text("import json\n\ndef run(params):\n    return json.loads('{' + params['mode'])\n")
    wf = write_workflow(
        tmp_path, objective={"module": str(tmp_path / "model.py")}, task={"timeout": 30, "isolation": isolation}
    )
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines["failed"].startswith("json.decoder.JSONDecodeError: Expecting property name")
    assert lines["raised at"] == f"{tmp_path / 'model.py'}, line 4, in run"
    assert "Traceback" not in proc.stdout


def test_a_failing_argparse_command_shows_argparses_error_line_and_its_run_dir(emews_cmd, tmp_path, scratch) -> None:
    (tmp_path / "nt3_baseline.py").write_text(STRICT_MODEL)
    wf = write_workflow(
        tmp_path,
        objective={"command": ["python3", "nt3_baseline.py"], "metric": "loss"},
        space={"lr": {"type": "categorical", "values": [0.01]}},
    )
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines["failed"] == "nt3_baseline: error: argument --lr: invalid int value: '0.01'"
    run_dir = Path(lines["run dir (kept)"])
    assert "usage: nt3_baseline" in (run_dir / "stderr.txt").read_text()  # the command's own output, kept


def test_a_relative_path_inside_a_shell_string_fails_the_try_with_its_cause(emews_cmd, tmp_path, scratch) -> None:
    """The command runs in the task's run dir, as in a job: a path only the launch folder has fails here too."""
    wf = write_workflow(
        tmp_path,
        objective={"command": ["sh", "-c", "exec python3 ./missing_model.py"]},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
    )
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "can't open file" in lines["failed"] and "missing_model.py" in lines["failed"]


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_point_that_runs_past_the_task_timeout_says_it_timed_out(emews_cmd, tmp_path, scratch, isolation) -> None:
    wf = write_workflow(
        tmp_path,
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}, "mode": {"type": "constant", "value": "hang"}},
        task={"timeout": 1, "isolation": isolation},
    )
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines["timeout"].startswith("ran past the task timeout of 1 s")
    assert emews_cmd.leftovers_after_exit() == []


@pytest.mark.parametrize("isolation", ["process", "inline"])
@pytest.mark.parametrize(
    ("raised", "named"),
    [("RuntimeError('no GPU found')", "RuntimeError: no GPU found"), ("SystemExit(4)", "SystemExit: 4")],
)
def test_a_setup_that_raises_is_named_by_its_exception(emews_cmd, tmp_path, scratch, isolation, raised, named) -> None:
    """``setup()`` failing (no GPU, no data: a common first failure) names its exception, not only
    the heading "objective setup failed:" above the traceback; a ``sys.exit()`` there too (it ended
    an inline worker, and the job with it)."""
    (tmp_path / "obj.py").write_text(f"def setup():\n    raise {raised}\n\n\ndef run(p):\n    return 1.0\n")
    wf = write_workflow(
        tmp_path,
        objective={"module": str(tmp_path / "obj.py")},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
        task={"isolation": isolation},
    )
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines["failed"] == f"objective setup failed: {named}"


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_setup_that_hangs_is_given_up_on(emews_cmd, tmp_path, scratch, isolation) -> None:
    """A setup that never returns held its worker for good (inline) or 300 s (process) whatever the
    task timeout; it is bounded by EMEWS_SETUP_TIMEOUT (or the task timeout if longer)."""
    (tmp_path / "obj.py").write_text(
        "import time\n\n\ndef setup():\n    time.sleep(3600)\n\n\ndef run(p):\n    return 1.0\n"
    )
    wf = write_workflow(
        tmp_path,
        objective={"module": str(tmp_path / "obj.py")},
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
        task={"isolation": isolation, "timeout": 1},
    )
    emews_cmd.env["EMEWS_SETUP_TIMEOUT"] = "2"
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines["failed"].startswith("objective setup did not finish within 2 s"), lines
    assert emews_cmd.leftovers_after_exit() == []


OPTIMIZERS = {
    "random": {"name": "random", "options": {"seed": 3}},
    "ga": {"name": "ga", "options": {"population": 6, "generations": 2, "seed": 3}},
    "bayes": {"name": "bayes", "options": {"n_initial_points": 3, "seed": 3}},
    "mbo": {"name": "mbo", "options": {"n_initial": 4, "seed": 3}},
}


def _first_try(emews_cmd, folder: Path, optimizer: dict) -> tuple:
    """``emews check --try`` of ``optimizer`` (write_workflow's objective) over a float ``x`` in
    [-2, 2], an int ``k`` in 1..4 and ``mode`` ok (12 evaluations), which passes: (proc, lines)."""
    wf = write_workflow(
        folder,
        optimizer=optimizer,
        budget={"evaluations": 12},
        space={
            "x": {"type": "float", "lower": -2.0, "upper": 2.0},
            "k": {"type": "int", "lower": 1, "upper": 4},
            "mode": {"type": "constant", "value": "ok"},
        },
    )
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, lines


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_each_kind_of_optimizer_gives_its_first_point(emews_cmd, tmp_path, scratch, name) -> None:
    proc, lines = _first_try(emews_cmd, tmp_path, OPTIMIZERS[name])
    point = point_of(proc)
    assert -2.0 <= point["x"] <= 2.0 and point["k"] in (1, 2, 3, 4) and point["mode"] == "ok"
    assert lines["ok"].startswith(f"value {point['x'] ** 2:.6g}")


SEEDED = {
    "bayes": {"name": "bayes", "options": {"n_initial_points": 3}},
    "hyperspace": {"name": "hyperspace", "options": {"n_initial_points": 3}},
    "mbo": {"name": "mbo", "options": {"n_initial": 4}},
    "nevergrad": {"name": "emews.contrib.nevergrad:NevergradOptimizer", "options": {}},
}


@pytest.mark.parametrize("seed", [-1, 2**32, 5_000_000_000])
@pytest.mark.parametrize("name", sorted(SEEDED))
def test_any_whole_number_seeds_each_optimizer(emews_cmd, tmp_path, scratch, name, seed) -> None:
    """A seed the workflow takes (any integer, as the optimizer's or the workflow's) started the job and
    then ended it: 'the optimizer raised ValueError: Seed must be between 0 and 2**32 - 1' (bayes,
    hyperspace, Nevergrad), 'R error: supplied seed is not a valid integer' (mbo), exit 1."""
    optimizer = {**SEEDED[name], "options": {**SEEDED[name]["options"], "seed": seed}}
    proc, lines = _first_try(emews_cmd, tmp_path, optimizer)
    assert "ok" in lines


@pytest.mark.parametrize("workflow", ["asha", "ddp", "digits", "ensemble", "pbt"])
def test_the_built_in_training_workflows_pass_their_own_first_try(emews_cmd, tmp_path, scratch, workflow) -> None:
    """What a user runs first: ``emews check pbt --try`` failed (its first point, lr 0.38 with
    momentum 0.9, diverged: "objective returned NaN")."""
    proc, lines = check_try(emews_cmd, workflow)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok" in lines


def test_a_file_sweep_tries_the_files_first_line(emews_cmd, tmp_path, scratch) -> None:
    (tmp_path / "points.txt").write_text('{"x": 0.5, "mode": "ok", "id": "RUN000"}\n{"x": 1.5, "mode": "raise"}\n')
    wf = write_workflow(tmp_path, optimizer={"name": "sweep", "options": {"file": "points.txt"}}, space={})
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert point_of(proc) == {"x": 0.5, "mode": "ok", "id": "RUN000"} and lines["ok"].startswith("value 0.25")


def test_an_optimizer_that_cannot_start_is_named_with_exit_1(emews_cmd, tmp_path, scratch) -> None:
    (tmp_path / "broken.py").write_text(
        "from emews.core.optimizer import Optimizer\n\n\nclass Broken(Optimizer):\n"
        "    def run(self, evaluator):\n        import cmaes_not_installed\n"
    )
    wf = write_workflow(tmp_path, optimizer={"name": "broken.py:Broken"})
    proc, _ = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        proc.stderr.strip().splitlines()[-1]
        == "emews: the optimizer raised ModuleNotFoundError: No module named 'cmaes_not_installed'"
    )
    assert list(scratch.iterdir()) == []


def test_a_configuration_error_is_exit_2_and_nothing_runs(emews_cmd, tmp_path, scratch) -> None:
    wf = write_workflow(tmp_path, budget={"evaluations": 10, "fail_fast": -1})
    proc, _ = check_try(emews_cmd, wf)
    assert proc.returncode == 2 and "budget.fail_fast" in proc.stderr and "try:" not in proc.stdout
    assert list(scratch.iterdir()) == [] and sorted(os.listdir(tmp_path)) == ["scratch", "wf.yaml"]


def test_the_raising_frame_tells_emews_from_a_sibling_folder_and_sees_through_symlinks(tmp_path: Path) -> None:
    """``try: raised at:`` names the user's innermost frame. Paths were compared as text prefixes: a
    user's ``.../emews-models/obj.py`` beside the emews package counted as emews (the emews frame was
    named), and emews reached through a symlinked home (``/home`` -> ``/gpfs``) counted as the user's."""
    import emews
    from emews.job.first_try import raising_frame

    package = Path(emews.__file__).resolve().parent
    linked = tmp_path / "home"
    linked.symlink_to(package.parent)

    def traceback_of(*frames: Path) -> str:
        lines = [f'  File "{path}", line {n}, in f{n}\n    x' for n, path in enumerate(frames, 1)]
        return "Traceback (most recent call last):\n" + "\n".join(lines) + "\nKeyError: 'nope'\n"

    sibling = package.parent / "emews-models" / "obj.py"
    assert raising_frame(traceback_of(sibling, package / "core" / "space.py")) == f"{sibling}, line 1, in f1"
    user = tmp_path / "obj.py"
    through_link = linked / package.name / "objective" / "function.py"
    assert raising_frame(traceback_of(user, through_link)) == f"{user}, line 1, in f1"


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_the_try_runs_with_the_sites_environment_as_its_workers_do(emews_cmd, tmp_path, scratch, isolation) -> None:
    """``--site`` names the site whose workers get ``environment.vars`` (``CANDLE_DATA_DIR`` of a CANDLE
    model): ``emews check --try --site mine`` ran the point without them and failed (or passed) where
    ``emews launch --site mine`` did the opposite. The try runs with the site's variables, as its
    workers do."""
    import yaml

    data = tmp_path / "data"
    data.mkdir()
    (data / "nt_train2.csv").write_text("0.25\n")
    (tmp_path / "model.py").write_text(
        "import os\nprint('val_loss', open(os.path.join(os.environ['CANDLE_DATA_DIR'], 'nt_train2.csv')).read())\n"
    )
    (tmp_path / "site-configs").mkdir()
    (tmp_path / "site-configs" / "mine.yaml").write_text(
        yaml.safe_dump({"extends": "local", "environment": {"vars": {"CANDLE_DATA_DIR": str(data)}}})
    )
    objective = (
        {"command": ["python3", "model.py"], "metric": "val_loss"}
        if isolation == "process"
        else {"module": str(tmp_path / "obj.py"), "metric": "val_loss"}
    )
    (tmp_path / "obj.py").write_text(
        "import os\ndef run(p):\n"
        "    return float(open(os.path.join(os.environ['CANDLE_DATA_DIR'], 'nt_train2.csv')).read())\n"
    )
    wf = write_workflow(
        tmp_path,
        objective=objective,
        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}},
        task={"isolation": isolation},
        budget={"evaluations": 1},
    )
    assert "CANDLE_DATA_DIR" not in emews_cmd.env
    proc = emews_cmd("check", str(wf), "--site", "mine", "--try", timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("try: ok: val_loss 0.25 (in "), proc.stdout
    launched = emews_cmd("launch", str(wf), "--site", "mine", "--workers", "1", "--exp-dir", "exp", timeout=240)
    assert launched.returncode == 0, launched.stderr
    assert "1/1 evaluations: 1 ok" in launched.stdout + launched.stderr


def test_check_with_a_batch_site_refuses_tasks_wider_than_its_job(emews_cmd, tmp_path) -> None:
    """``emews check wf.yaml --site SLURM_SITE`` said ok for ``task.ranks: 4`` on a site of 3 workers,
    then ``emews launch`` with that site refused it (exit 2): the check now refuses it the same way."""
    site = Path(__file__).resolve().parents[1] / "site" / "slurm-loopback.yaml"  # 3 workers per job
    wf = write_workflow(tmp_path, task={"ranks": 4})
    checked = emews_cmd("check", str(wf), "--site", str(site), timeout=120)
    launched = emews_cmd("launch", str(wf), "--site", str(site), "--dry-run", timeout=120)
    assert launched.returncode == 2 and "task.ranks" in launched.stderr, launched.stderr
    assert (checked.returncode, checked.stderr) == (2, launched.stderr), checked.stdout
    assert "ok" not in checked.stdout


#: P1B1's PyTorch model on candle_lib with TensorFlow 2.21 and a torch that brings triton: TensorFlow's
#: start-up log on stderr (its oneDNN line says "round-off errors"), then a segmentation fault
TF_THEN_SIGSEGV = """
import os, signal, sys
sys.stderr.write("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n"
                 "I0000 00:00:1795937890.790904   20052 port.cc:153] oneDNN custom operations are on. You may see "
                 "slightly different numerical results due to floating-point round-off errors from different "
                 "computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.\\n"
                 "I0000 00:00:1795937890.791615   20052 cudart_stub.cc:31] Could not find cuda drivers on your "
                 "machine, GPU will not be used.\\n")
sys.stderr.flush()
os.kill(os.getpid(), signal.SIGSEGV)
"""


def test_a_crash_after_tensorflows_log_is_named_by_its_signal(emews_cmd, tmp_path, scratch) -> None:
    """``try: crashed:`` named TensorFlow's informational oneDNN line (its "errors") as the cause of
    P1B1's segmentation fault; Abseil's I and W lines are never a cause, and the signal is named."""
    (tmp_path / "p1b1_baseline_pytorch.py").write_text(TF_THEN_SIGSEGV)
    wf = write_workflow(
        tmp_path,
        objective={"command": ["python3", "p1b1_baseline_pytorch.py"], "metric": "best_metric_last"},
        space={"latent_dim": {"type": "categorical", "values": [2]}},
    )
    proc, lines = check_try(emews_cmd, wf)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines["crashed"] == "command python3 died of signal SIGSEGV; last lines of stderr:", lines


@pytest.mark.parametrize(
    ("script", "cause", "ended"),
    [
        ("echo epoch 1 done; exit 3", "failed: epoch 1 done", "try: command sh exited with status 3"),
        ("echo epoch 1 done; kill -9 $$", "crashed: command sh died of signal SIGKILL; last lines of stdout:",
         "try:   epoch 1 done"),
    ],
)
def test_a_command_that_names_no_error_shows_its_exit_and_where_its_output_is(
    emews_cmd, tmp_path, scratch, script: str, cause: str, ended: str
) -> None:
    """A command that exits non-zero (or is killed) without printing an error line: the try said only
    ``try: failed: LAST LINE`` (no exit status), or a cause ending ``last lines of stdout:`` with nothing
    after it; it now says how the command ended, quotes what it wrote and names its stdout and stderr."""
    wf = write_workflow(tmp_path, objective={"command": ["sh", "-c", script], "metric": "loss"},
                        space={"x": {"type": "float", "lower": 0.0, "upper": 1.0}})
    proc = emews_cmd("check", str(wf), "--try", timeout=240)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[out.index(f"try: {cause}") + 1] == ended, out
    (run_dir,) = [line.split(": ", 2)[2] for line in out if line.startswith("try: run dir (kept): ")]
    assert f"try: stdout: {run_dir}/stdout.txt (13 bytes)" in out, out
    assert f"try: stderr: {run_dir}/stderr.txt (empty)" in out, out
    assert (Path(run_dir) / "stdout.txt").read_text() == "epoch 1 done\n"
