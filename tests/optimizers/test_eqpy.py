"""An EQ/Py ME run unchanged as the ``eqpy`` optimizer, its model a bash script, under real mpiexec.

The ME is EQ/Py's own DEAP GA example (``tests/data/emews/python/algorithm.py``, ga0) and the
model the EMEWS project template's bash script (see ``tests/data/emews/README.md``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from testutil import TESTS, EmewsCommand
from testutil import stored_rows as stored

pytest.importorskip("deap")

PROJECT = TESTS / "data" / "emews"
#: the Swift/T app call ``"bash" shfile param_line output_file trial emews_root instance_dir``
MODEL = ("bash scripts/run_model.sh {params} {run_dir}/output.txt 1 "
         '"$EMEWS_PROJECT_ROOT" {run_dir}')


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the EMEWS project, ``EMEWS_PROJECT_ROOT`` its folder (as ``run_*.sh`` exports it)."""
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root)
    return root


def emews_in(project: Path) -> EmewsCommand:
    command = EmewsCommand(project)
    command.env["EMEWS_PROJECT_ROOT"] = str(project)
    return command


def workflow(project: Path, name: str = "ga0.yaml", budget: int = 100, **options: object) -> str:
    options = {"me": "python/algorithm.py", "settings": "data/settings.json", **options}
    (project / name).write_text(yaml.safe_dump({
        "optimizer": {"name": "eqpy", "options": options},
        "objective": {"command": ["bash", "-c", MODEL], "metric": "f", "result": "file",
                      "result_file": "output.txt"},
        "budget": {"evaluations": budget},
    }))
    return name


def stored_rows(exp: Path) -> list[dict]:
    """The stored results, each with its parameter string as ``params``."""
    return [{**row, "params": json.loads(row["params"])["params"]} for row in stored(exp)]


def final_population(exp: Path) -> list[tuple[str, float]]:
    """The ME's last words: ``FINAL``, its population (``x,y;x,y;...``) and their fitnesses."""
    lines = (exp / "eqpy_final.txt").read_text().splitlines()
    assert lines[0] == "FINAL"
    return list(zip(lines[1].split(";"), map(float, lines[2].split(";")), strict=True))


def test_ga0_runs_unchanged_its_batches_as_tasks_of_a_bash_model(project: Path) -> None:
    emews = emews_in(project)
    proc = emews("launch", workflow(project), "--site", "local", "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Settings loaded." in proc.stdout  # the handshake answered with the settings file's path
    rows = stored_rows(project / "exp")
    assert rows and all(r["status"] == "ok" for r in rows), rows
    # the ME's answers came back in its order: every individual of its final population carries the
    # value the bash model computed for its parameter string
    objectives = {(r["params"], r["objective"]) for r in rows}
    for params, fitness in final_population(project / "exp"):
        assert (params, fitness) in objectives
    first = rows[0]
    run_dir = project / "exp" / "runs" / "000" / f"{first['id']:06d}"
    assert float((run_dir / "output.txt").read_text()) == first["objective"]
    assert "Running python3" in (run_dir / "stdout.txt").read_text()  # the template script ran the model
    assert {r["rank"] for r in rows} <= {1, 2}


def test_a_resumed_me_is_replayed_from_the_store(project: Path) -> None:
    """Stopped by the budget mid-ME, then resumed with a larger one: the seeded ME starts again, its
    earlier batches are answered from the store, and it ends as an uninterrupted run does."""
    emews = emews_in(project)
    whole = emews("launch", workflow(project), "--site", "local", "--workers", "2", "--exp-dir", "whole",
                  timeout=300)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    evaluated = len(stored_rows(project / "whole"))
    cut = emews("launch", workflow(project, budget=7), "--site", "local", "--workers", "2", "--exp-dir", "cut",
                timeout=300)
    assert cut.returncode == 0, cut.stdout + cut.stderr
    for said in (cut.stderr, (project / "cut" / "emews.log").read_text()):
        assert "a batch of 3 points does not fit the" in said and "raise budget.evaluations" in said
    assert not (project / "cut" / "eqpy_final.txt").exists()
    before = len(stored_rows(project / "cut"))
    resumed = emews("resume", "cut", "--set", "budget.evaluations=100", timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert len(stored_rows(project / "cut")) == evaluated  # the earlier runs' evaluations were not run again
    assert before < evaluated
    assert final_population(project / "cut") == final_population(project / "whole")


def test_json_batches_of_the_emews_template_and_its_done(project: Path) -> None:
    """The EMEWS template's protocol: a JSON list per batch (``parse_json_list``), ``DONE`` at the end."""
    (project / "python" / "template_me.py").write_text(
        "import json\nimport eqpy\n\n"
        "def run():\n"
        "    eqpy.OUT_put('give me the config')\n"
        "    config = eqpy.IN_get()\n"
        "    eqpy.OUT_put(json.dumps(['0.5,0.5', '1.0,2.0', [3, 4]]))\n"
        "    results = eqpy.IN_get().split(';')\n"
        "    eqpy.OUT_put('DONE')\n"
        "    eqpy.OUT_put(config + ' ' + ';'.join(results))\n"
    )
    emews = emews_in(project)
    name = workflow(project, "json.yaml", me="python/template_me.py", settings=None, reply="cfg.yaml", batch="json")
    proc = emews("launch", name, "--site", "local", "--workers", "2", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = stored_rows(project / "exp")
    assert [r["params"] for r in rows] == ["0.5,0.5", "1.0,2.0", "[3, 4]"]
    assert [r["status"] for r in rows] == ["ok", "ok", "failed"]  # f.py cannot read "[3, 4]"
    done, last = (project / "exp" / "eqpy_final.txt").read_text().splitlines()
    assert done == "DONE"
    assert last == "cfg.yaml " + ";".join([repr(rows[0]["objective"]), repr(rows[1]["objective"]), "nan"])


@pytest.mark.parametrize(
    "options, key, says",
    [
        ({"me": "python/missing.py"}, "optimizer.options.me", "does not exist"),
        ({"reply": "x"}, "optimizer.options.reply", "give one"),
        ({"me": "python/no_run.py"}, "optimizer.options.me", "has no run() function"),
        ({"me": "python/ga0_python2.py"}, "optimizer.options.me", "SyntaxError: Missing parentheses in call to 'print'"),
    ],
)
def test_check_refuses_an_me_that_cannot_run(project: Path, options: dict, key: str, says: str) -> None:
    original = (project / "python" / "algorithm.py").read_text()  # ga0 as EQ-Py has it: Python 2's print
    (project / "python" / "ga0_python2.py").write_text(
        original.replace('print("num_iter: ", num_iter)', 'print "num_iter: ", num_iter'))
    (project / "python" / "no_run.py").write_text("import eqpy\n\ndef start():\n    eqpy.OUT_put('x')\n")
    proc = emews_in(project)("check", workflow(project, **options))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert key in proc.stderr and says in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_an_me_that_exits_is_named_with_what_it_said(project: Path) -> None:
    """ga0's load_settings calls sys.exit(1) when it cannot open the settings file."""
    name = workflow(project, settings=None, reply="missing-settings.json")
    proc = emews_in(project)("launch", name, "--site", "local", "--workers", "1", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 1
    assert "Could not open: 'missing-settings.json'" in proc.stdout
    assert "algorithm.py called sys.exit(1) in run(), after 1 answers" in proc.stderr


def test_check_names_a_placeholder_that_is_not_the_params_string(project: Path) -> None:
    """Points are {"params": STRING}: a command's {param} would reach the model as the text '{param}'."""
    name = workflow(project)
    text = (project / name).read_text().replace("{params}", "{param}")
    (project / name).write_text(text)
    proc = emews_in(project)("check", name)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "objective.command: {param} names no parameter (allowed: {params}, {run_dir}" in proc.stderr


def test_supervisors_ga_me_runs_unchanged_answered_with_its_parameter_tuple(tmp_path: Path) -> None:
    """CANDLE Supervisor's GA (workflows/common/python/deap_ga.py): its "Params" handshake answered
    with workflow.swift's algo_params tuple (reply:), its batches ';'-joined JSON objects."""
    supervisor = TESTS / "data" / "supervisor"
    shutil.copytree(supervisor / "ga_me", tmp_path / "ga_me")
    space = supervisor / "ga" / "nt3_param_space_ga.json"
    (tmp_path / "model.py").write_text(
        "import json, sys\n"
        "p = json.loads(sys.argv[1])\n"
        "print('val_loss', abs(p['learning_rate'] - 0.01) + p['dropout'] + p['epochs'] / 1000)\n"
    )
    # iters, pop, seed, strategy, off_prop, mut_prob, cx_prob, mut_indpb, cx_indpb, tournsize, ga_params_file, init
    reply = f"3,4,1,'simple',0.5,0.8,0.5,0.5,0.5,2,'{space}',''"
    (tmp_path / "ga.yaml").write_text(yaml.safe_dump({
        "optimizer": {"name": "eqpy", "options": {"me": "ga_me/deap_ga.py", "reply": reply}},
        "objective": {"command": ["python3", "model.py", "{params}"], "metric": "val_loss"},
        "budget": {"evaluations": 100},
    }))
    proc = EmewsCommand(tmp_path)("launch", "ga.yaml", "--site", "local", "--workers", "2", "--exp-dir", "exp",
                                  timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert rows and all(r["status"] == "ok" for r in rows)
    names = {p["name"] for p in json.loads(space.read_text())}
    assert all(set(json.loads(r["params"])) == names for r in rows)  # each string one JSON object, whole
    final = (tmp_path / "exp" / "eqpy_final.txt").read_text()  # DONE, best (indented JSON), its fitness, ...
    assert final.startswith("DONE\n{")
    end = final.index("\n}\n") + 2
    best, fitness = json.loads(final[len("DONE\n"):end]), float(final[end + 1:].split("\n", 1)[0])
    assert any(r["objective"] == fitness and json.loads(r["params"]) == best for r in rows)


def test_supervisors_ga_me_points_reach_a_candle_model_under_params_candle(tmp_path: Path) -> None:
    """Supervisor's GA ME with a CANDLE Benchmarks model run unchanged (``params: candle``, as
    Supervisor's ``model.sh`` runs it): each individual, a JSON object as one parameter string, is
    what CANDLE's own parser reads (``tests/data/candle``: NT3's definitions and default model),
    as Supervisor's ``model_runner`` ``json.loads`` it. Before, the model got ``params = '{...}'``
    in its config file and trained on its default model's values: every point the same, silently."""
    supervisor = TESTS / "data" / "supervisor"
    shutil.copytree(supervisor / "ga_me", tmp_path / "ga_me")
    space = supervisor / "ga" / "nt3_param_space_ga.json"
    reply = f"2,3,1,'simple',0.5,0.8,0.5,0.5,0.5,2,'{space}',''"
    (tmp_path / "ga.yaml").write_text(yaml.safe_dump({
        "optimizer": {"name": "eqpy", "options": {"me": "ga_me/deap_ga.py", "reply": reply}},
        "objective": {"command": ["python3", str(TESTS / "data" / "candle" / "nt3_parse_only.py")],
                      "metric": "val_loss", "params": "candle",
                      "defaults": str(supervisor / "nt3_default_model.txt")},
        "budget": {"evaluations": 100},
    }))
    proc = EmewsCommand(tmp_path)("launch", "ga.yaml", "--site", "local", "--workers", "2", "--exp-dir", "exp",
                                  timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = stored(tmp_path / "exp")
    assert len(rows) >= 3 and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    for row in rows:
        individual = json.loads(json.loads(row["params"])["params"])
        parsed = json.loads(row["metrics"])["parsed"]
        for key, value in individual.items():  # "500 100 50" is the list CANDLE reads
            numbers = value.split() if isinstance(value, str) else []
            expected = [int(n) for n in numbers] if len(numbers) > 1 else value
            assert parsed[key] == expected, (key, value, parsed.get(key))


def test_check_says_the_me_makes_the_points(project: Path) -> None:
    """docs/coming-from-emews.md showed ``optimizer eqpy, 0 parameters``: the ME owns its space, and the
    check now says what will run, its points ``{"params": STRING}``."""
    proc = emews_in(project)("check", workflow(project))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == (
        'ga0.yaml: ok — optimizer eqpy, points {"params": STRING} from the ME algorithm.py, budget 100')
