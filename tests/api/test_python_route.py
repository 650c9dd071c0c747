"""emews from Python (issue 25 points 2 and 3): ``emews.run`` runs a search the way ``emews launch``
runs a workflow file (a real ``mpiexec`` underneath), ``emews.load`` reads it back as DataFrames
and figures, read only, and the command line resumes what Python started.

The notebook stand-in is a script run as a notebook runs its cells, in a fresh interpreter whose
output is not a terminal (the job's output comes through ``sys.stdout``/``sys.stderr``); the
objective lives in ``model.py``, as ``%%writefile model.py`` leaves it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from testutil import EmewsCommand, query, read_only, wait_until, write_workflow

import emews
from emews.core.errors import ConfigError

MODEL = '''
import emews


def train(params, ctx):
    """A training run with a known curve: loss(step) = 10 lr + 1/step + units/1000."""
    state, start = ctx.restore(default=({"trained": 0}, 0))
    metrics = {}
    for step in range(start + 1, params["epochs"] + 1):
        loss = 10 * params["lr"] + 1.0 / step + params["units"] / 1000
        metrics = {"loss": loss, "acc": 1 - loss / 10, "batches": 4 * step}
        if ctx.report(step=step, metrics=metrics, checkpoint={"trained": step}).stop:
            break
    return metrics
'''

NOTEBOOK = """
import json
import pandas as pd
import emews

exp = emews.run("model.py:train",
                space={"lr": emews.Float(0.001, 0.1, log=True), "units": {"type": "int", "lower": 8, "upper": 64},
                       "act": emews.Categorical(("relu", "tanh")), "epochs": emews.Constant(3)},
                optimizer="random", budget=6, workers=2, metric="loss", seed=1, exp_dir="exp",
                trial_scheduler={"name": "asha", "options": {"max_t": 3, "grace_period": 1, "reduction_factor": 3}},
                task={"timeout": 120})
results = exp.results
best = exp.best(2)
figure = exp.plot("curves")
figure.savefig("curves.png")
print(json.dumps({"path": str(exp.path), "rows": len(results), "best": best["id"].tolist(),
                  "figure": type(figure).__name__, "reports": len(exp.reports)}))
"""


def run_script(cwd: Path, source: str, *, stdin: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``source`` in a fresh interpreter in ``cwd``: as ``notebook.py``, or fed on stdin (no
    ``__file__``: a notebook's or an interactive session's ``__main__``)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if stdin:
        return subprocess.run(
            [sys.executable, "-"], input=source, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
        )
    (cwd / "notebook.py").write_text(source)
    return subprocess.run(
        [sys.executable, "notebook.py"], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: (size, modification time in ns). Not SQLite's ``-shm`` index,
    where every reader of a WAL database (the ``sqlite3`` shell too) takes its read locks."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith("-shm")
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A training search run from the notebook stand-in: ``emews.run`` then ``emews.load``."""
    cwd = tmp_path_factory.mktemp("notebook")
    (cwd / "model.py").write_text(MODEL)
    proc = run_script(cwd, NOTEBOOK)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return cwd / "exp", proc


def test_the_notebook_runs_a_search_and_shows_its_progress(trained) -> None:
    exp_dir, proc = trained
    told = json.loads(proc.stdout.strip().splitlines()[-1])
    assert told == {
        "path": str(exp_dir),
        "rows": 6,
        "best": told["best"],
        "figure": "Figure",
        "reports": told["reports"],
    }
    assert len(told["best"]) == 2 and told["reports"] >= 6
    assert f"experiment {exp_dir}: 2 workers" in proc.stderr  # what emews launch prints, relayed
    assert "6/6 evaluations: 6 ok" in proc.stderr and "Traceback" not in proc.stderr
    assert (exp_dir.parent / "curves.png").stat().st_size > 0


def test_results_are_typed_and_agree_with_results_csv(trained) -> None:
    exp_dir, _ = trained
    exp = emews.load(exp_dir)
    results, csv = exp.results, pd.read_csv(exp_dir / "results.csv")
    assert list(results.columns) == list(csv.columns)
    assert len(results) == len(csv) == 6
    kinds = results.dtypes
    assert kinds["id"] == "int64" and kinds["rank"] == "int64" and kinds["objective"] == "float64"
    assert kinds["p:units"] == "int64" and kinds["p:epochs"] == "int64" and kinds["p:lr"] == "float64"
    assert kinds["m:acc"] == "float64" and kinds["m:batches"] == "int64" and kinds["t:step"] == "int64"
    assert pd.api.types.is_string_dtype(kinds["p:act"]) and pd.api.types.is_string_dtype(kinds["status"])
    for column in ("submitted", "started", "finished"):
        assert isinstance(kinds[column], pd.DatetimeTZDtype) and str(kinds[column].tz) == "UTC"
        pd.testing.assert_series_equal(
            results[column], pd.to_datetime(csv[column], utc=True).astype(kinds[column]), check_names=False
        )
    for column in csv.columns:
        if column in ("submitted", "started", "finished"):
            continue
        missing = csv[column].isna()
        assert results[column].isna().tolist() == missing.tolist(), column  # an empty cell is missing
        assert results[column][~missing].tolist() == csv[column][~missing].tolist(), column  # the same values
    assert results["error"].isna().all() and set(results["status"]) == {"ok"}
    assert results.loc[0, "p:units"] == csv.loc[0, "p:units"] and isinstance(results["p:units"].tolist()[0], int)


def test_best_reports_checkpoints_summary_and_plots(trained) -> None:
    exp_dir, _ = trained
    exp = emews.load(exp_dir)
    csv = pd.read_csv(exp_dir / "results.csv")
    best = exp.best(2)
    assert best["id"].tolist() == csv.sort_values(["objective", "id"])["id"].head(2).tolist()
    assert best["objective"].is_monotonic_increasing and exp.best()["id"].tolist() == best["id"].head(1).tolist()

    reports = exp.reports
    assert list(reports.columns) == ["trial", "step", "time", "loss", "acc", "batches"]
    assert reports["trial"].dtype == "int64" and reports["step"].dtype == "int64"
    assert reports["batches"].dtype == "int64" and isinstance(reports["time"].dtype, pd.DatetimeTZDtype)
    stored = {
        (t, s): json.loads(m) for t, s, m in query(exp_dir, "SELECT trial, step, metrics FROM reports ORDER BY seq")
    }
    assert sorted(stored) == list(zip(reports["trial"], reports["step"], strict=True))  # one row per trial, step
    for row in reports.itertuples(index=False):
        assert stored[(row.trial, row.step)] == {"loss": row.loss, "acc": row.acc, "batches": row.batches}
    last = reports.sort_values("step").groupby("trial").tail(1).set_index("trial")["loss"]
    ok = csv.set_index("id")["objective"]
    assert all(last[trial] == pytest.approx(ok[trial]) for trial in ok.index)  # each trial returned its last report

    checkpoints = exp.checkpoints
    assert list(checkpoints.columns) == ["trial", "step", "metric", "size", "path"] and len(checkpoints) >= 1
    assert checkpoints["trial"].dtype == "int64" and all(Path(p).is_file() for p in checkpoints["path"])

    summary = exp.summary
    assert summary["completed"] == 6 and summary["runs"] == 1 and summary["exit_status"] == 0

    from matplotlib.figure import Figure

    curves = exp.plot("curves")
    assert isinstance(curves, Figure) and any(ax.get_lines() for ax in curves.axes)
    figures = exp.plot()
    assert {"trajectory", "curves"} <= set(figures) and all(isinstance(f, Figure) for f in figures.values())
    assert set(figures) <= set(exp.plot_names)
    with pytest.raises(ConfigError, match="unknown plot 'curvs'; did you mean 'curves'"):
        exp.plot("curvs")


def test_loading_never_writes(trained) -> None:
    exp_dir, _ = trained
    before = snapshot(exp_dir)
    exp = emews.load(exp_dir)
    exp.results, exp.reports, exp.best(3), exp.checkpoints, exp.summary, exp.plot(), exp.running
    assert snapshot(exp_dir) == before and not (exp_dir / "lease.json").exists()


def test_the_command_line_resumes_what_python_started(trained, tmp_path: Path) -> None:
    exp_dir, _ = trained
    emews_cmd = EmewsCommand(exp_dir.parent)
    proc = emews_cmd("resume", "exp", "--set", "budget.evaluations=8", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "6 earlier evaluations given to the optimizer" in proc.stderr
    exp = emews.load(exp_dir)
    assert exp.results["id"].tolist() == list(range(8)) and set(exp.results["status"]) == {"ok"}
    assert exp.summary["runs"] == 2 and exp.summary["completed"] == 8


SCRIPT = """
import sys
import emews


def objective(params):
    return (params["x"] - 0.25) ** 2 + params["n"] / 100


if __name__ == "__main__":
    exp = emews.run(objective, space={"x": emews.Float(0, 1), "n": emews.Int(1, 9)}, optimizer="random",
                    budget=4, workers=2, exp_dir="exp", seed=2)
    print("best", exp.best()["id"].tolist())
"""


def test_a_function_of_the_script_itself_runs_and_resumes_from_the_command_line(tmp_path: Path) -> None:
    """A function defined in the script that calls ``emews.run`` (``__main__``): the workers import
    the script's file (its ``__main__`` guard keeps them from running the search again)."""
    proc = run_script(tmp_path, SCRIPT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "best [" in proc.stdout and "4/4 evaluations: 4 ok" in proc.stderr
    workflow = emews.load(tmp_path / "exp").workflow
    assert workflow["objective"]["module"] == str(tmp_path / "notebook.py")
    assert workflow["objective"]["function"] == "objective" and workflow["name"] == "objective"
    resumed = EmewsCommand(tmp_path)("resume", "exp", "--set", "budget.evaluations=6", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert len(emews.load(tmp_path / "exp").results) == 6


def test_a_function_the_workers_cannot_import_is_one_clear_message(tmp_path: Path) -> None:
    """A notebook cell's function (``__main__`` without a file), or a script without the guard."""
    cell = textwrap.dedent("""
        import emews
        def train(params):
            return params["x"]
        emews.run(train, space={"x": emews.Float(0, 1)}, budget=2)
    """)
    proc = run_script(tmp_path, cell, stdin=True, timeout=120)
    assert proc.returncode == 1
    assert (
        "emews.run: objective: the function train is defined in a notebook or an interactive session" in proc.stderr
    ), proc.stderr
    assert "%%writefile model.py" in proc.stderr and "objective='model.py:train'" in proc.stderr
    unguarded = SCRIPT[: SCRIPT.index("if __name__")] + textwrap.dedent(
        SCRIPT[SCRIPT.index("if __name__") :].partition("\n")[2]
    )
    proc = run_script(tmp_path, unguarded, timeout=120)
    assert proc.returncode == 1
    assert 'call emews.run under `if __name__ == "__main__":`' in proc.stderr, proc.stderr
    assert not (tmp_path / "exp").exists() and not (tmp_path / "experiments").exists()


def test_emews_run_refuses_what_the_workflow_file_refuses_with_the_same_message(emews_cmd, tmp_path: Path) -> None:
    """The same mistakes as arguments and in a YAML file: the same lines, ``emews.run`` for the file."""
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    space = {"lr": {"type": "float", "lowr": 0.001, "upper": 0.1}, "units": {"type": "integer", "lower": 1}}
    wf = write_workflow(
        tmp_path,
        objective={"module": str(model), "function": "train", "metric": "loss"},
        optimizer={"name": "random"},
        space=space,
        budget={"evaluation": 4},
    )
    cli = emews_cmd("check", str(wf))
    assert cli.returncode == 2
    with pytest.raises(ConfigError) as raised:
        emews.run(
            f"{model}:train",
            space=space,
            optimizer="random",
            budget={"evaluation": 4},
            metric="loss",
            task={"timeout": 30, "isolation": "process"},
        )
    python_lines = str(raised.value).splitlines()
    cli_lines = cli.stderr.strip().removeprefix("emews: error: ").splitlines()
    assert len(python_lines) == len(cli_lines) == 3
    assert [line.replace("emews.run", str(wf)) for line in python_lines] == cli_lines
    with pytest.raises(ConfigError, match="emews.run: optimizer.name: unknown optimizer 'bayse'; did you mean 'bayes'"):
        emews.run(f"{model}:train", space={"lr": emews.Float(0.001, 0.1)}, optimizer="bayse", budget=4)
    with pytest.raises(ConfigError, match="emews.run: tsk: unknown key 'tsk'; did you mean 'task'"):
        emews.run(f"{model}:train", space={"lr": emews.Float(0.001, 0.1)}, budget=4, tsk={"timeout": 3})
    with pytest.raises(ConfigError, match="emews.run: workers: must be a number of worker ranks >= 1"):
        emews.run(f"{model}:train", space={"lr": emews.Float(0.001, 0.1)}, budget=4, workers=0)
    assert not (tmp_path / "experiments").exists()


def test_a_process_that_imported_the_job_modules_may_still_call_run(tmp_path: Path) -> None:
    """The guard asks whether user code is being imported now, not which emews modules a process has
    imported: a session that ran ``emews check --try`` in-process (or imports the job's modules) can
    still start a search."""
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    code = textwrap.dedent(f"""
        import emews, emews.job.first_try, emews.job.mpi_main, emews.runtime.child
        try:
            emews.run({str(model) + ":train"!r}, space={{"lr": emews.Float(0.001, 0.1)}}, budget=4, tsk={{}})
        except emews.ConfigError as exc:
            print("refused:", exc)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "refused: emews.run: tsk: unknown key 'tsk'" in proc.stdout, proc.stdout + proc.stderr


LIVE = '''
import os
import time
from pathlib import Path

import emews


def run(params):
    """Tasks 0 and 1 finish; the others wait until the file named by LIVE_GATE exists."""
    if emews.current_task().task_id >= 2:
        while not Path(os.environ["LIVE_GATE"]).exists():
            time.sleep(0.01)
    return params["x"]
'''


def test_load_reads_a_live_experiment_without_taking_its_lease(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "live.py").write_text(LIVE)
    gate = tmp_path / "gate"
    emews_cmd.env["LIVE_GATE"] = str(gate)
    wf = write_workflow(
        tmp_path,
        objective={"module": str(tmp_path / "live.py")},
        budget={"evaluations": 5},
        space={"x": {"type": "float", "lower": 0, "upper": 1}},
    )
    job = emews_cmd.popen("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    exp_dir = tmp_path / "exp"
    try:
        assert wait_until(lambda: len(read_only(exp_dir, "SELECT id FROM results")) >= 2, timeout=180)
        lease = (exp_dir / "lease.json").read_text()
        exp = emews.load(exp_dir)
        assert exp.running and exp.summary == {}
        live = exp.results
        assert len(live) >= 2 and set(live["id"]) >= {0, 1} and live["p:x"].dtype == "float64"
        assert exp.best()["id"].tolist()[0] in (0, 1) and exp.reports.empty
        assert (exp_dir / "lease.json").read_text() == lease  # never taken, never rewritten
    finally:
        gate.touch()
    assert job.wait(timeout=300) == 0, job.stderr.read()
    done = emews.load(exp_dir)
    assert not done.running and len(done.results) == 5 and done.summary["completed"] == 5


@pytest.mark.parametrize(
    ("objective", "name"),
    [
        ("model.py:train", "train"),
        ("mylab.models:fit", "fit"),
        ("model.py", "model"),
        (["python3", "nt3.py"], "experiment"),
    ],
)
def test_the_default_experiment_name_is_the_functions_as_documented(objective, name) -> None:
    """docs/python.md: ``exp_dir`` defaults to ``experiments/NAME-NNN``, NAME the function's (the README's
    ``emews.run("model.py:train", ...)`` then ``emews.load("experiments/train-001")``); a file alone is
    named by its stem, since its function is always ``run``."""
    from emews.api.arguments import workflow_data

    assert workflow_data(objective, {}, "random", 4, None, None, None, {})["name"] == name


def test_load_tells_an_empty_string_from_null_and_keeps_na_like_text(tmp_path: Path) -> None:
    """A categorical of ``""`` and null (and a metric returning them): results.csv writes both as an
    empty cell (documented), and emews.load(EXP).results, built from the same rows, made both
    missing too, though docs/python.md says it keeps the stored values; "NA", "None", "nan" and
    "null" stay text there (pandas' read_csv makes them missing)."""
    (tmp_path / "tag.py").write_text("def run(p):\n    return {'value': 1.0, 'tag': p['c']}\n")
    values = ["", None, "NA", "None", "nan", "null"]
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": "tag.py", "metric": "value"},
        space={"c": {"type": "categorical", "values": values}},
        budget={"evaluations": len(values)},
        task={"timeout": 30, "isolation": "inline"},
    )
    EmewsCommand(tmp_path)("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    frame = emews.load(tmp_path / "exp").results.sort_values("id")
    for column in ("p:c", "m:tag"):
        got = [None if pd.isna(v) else v for v in frame[column]]
        assert got == values, (column, got)
    csv_rows = (tmp_path / "exp" / "results.csv").read_text().splitlines()[1:3]
    assert [row.split(",")[3:5] for row in csv_rows] == [["", ""], ["", ""]]


def test_load_gives_a_non_utf8_file_name_as_the_objective_received_it_and_the_docs_say_how_to_write_it(
    tmp_path: Path,
) -> None:
    """A categorical listing a file name that is not UTF-8 (``os.fsdecode(b"caf\\xe9.txt")``, a lone
    surrogate): results holds the value the objective received (it opens the file), results.csv its
    ``\\udce9`` escape; the frame's own ``to_csv()`` refused it (UnicodeEncodeError) and docs/python.md
    did not say so: it now shows ``errors="surrogateescape"``, which writes the name's bytes."""
    name = os.fsdecode(b"caf\xe9.txt")
    (tmp_path / name).write_text("")  # the file the objective opens (its bytes: caf\xe9.txt)
    (tmp_path / "opens.py").write_text("import os\ndef run(p):\n    return float(os.path.exists(p['f']))\n")
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": "opens.py"},
        space={"f": {"type": "categorical", "values": [name]}},
        budget={"evaluations": 1},
        task={"timeout": 30, "isolation": "inline"},
    )
    EmewsCommand(tmp_path)("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=180, check=True)
    frame = emews.load(tmp_path / "exp").results
    assert frame["p:f"].tolist() == [name] and frame["objective"].tolist() == [1.0]  # it opened the file
    assert b"caf\\udce9.txt" in (tmp_path / "exp" / "results.csv").read_bytes()
    with pytest.raises(UnicodeEncodeError):
        frame.to_csv(tmp_path / "plain.csv")
    frame.to_csv(tmp_path / "mine.csv", errors="surrogateescape")  # as docs/python.md shows
    assert b"caf\xe9.txt" in (tmp_path / "mine.csv").read_bytes()
    assert 'errors="surrogateescape"' in (Path(__file__).parents[2] / "docs" / "python.md").read_text()
