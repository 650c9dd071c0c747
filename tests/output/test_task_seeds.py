"""Each task's ``ctx.seed`` is in results.csv (a ``seed`` column) and ``emews.load(EXP).results``, and
``emews check EXP/workflow.yaml --try --task N`` evaluates task N again as it ran: its point, its seed."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import emews
from testutil import write_workflow

SEEDED = '''
import json, os, random
import emews

def run(params):
    ctx = emews.current_task()
    with open(os.environ["SEEDED_LOG"], "a") as fh:
        fh.write(json.dumps({"task": ctx.task_id, "seed": ctx.seed, "x": params["x"]}) + "\\n")
    return params["x"] ** 2 + random.Random(ctx.seed).random()   # a noisy evaluation: the seed matters
'''


def test_the_seed_of_each_task_is_recorded_and_one_task_reruns_as_it_ran(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "seeded.py").write_text(SEEDED)
    log = tmp_path / "log.jsonl"
    emews_cmd.env["SEEDED_LOG"] = str(log)
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "seeded.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}},
                        optimizer={"name": "random", "options": {"seed": 7}}, budget={"evaluations": 4})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    exp = emews_cmd.cwd / "exp"
    seen = {e["task"]: e for e in map(json.loads, log.read_text().splitlines())}
    rows = list(csv.DictReader((exp / "results.csv").open()))
    assert [int(r["seed"]) for r in rows] == [seen[int(r["id"])]["seed"] for r in rows]  # the seed ctx.seed was
    assert len({r["seed"] for r in rows}) == 4
    frame = emews.load(exp).results
    assert frame["seed"].tolist() == [seen[i]["seed"] for i in range(4)]

    log.unlink()
    again = emews_cmd("check", str(exp / "workflow.yaml"), "--try", "--task", "2", timeout=240)
    assert again.returncode == 0, again.stderr
    (rerun,) = map(json.loads, log.read_text().splitlines())
    assert rerun == seen[2]                                     # task 2: its id, its seed, its point
    assert f"task 2 again, as it ran: ctx.seed {seen[2]['seed']}" in again.stdout
    assert f"{float(rows[2]['objective']):.6g}" in again.stdout  # the same result


def test_a_task_to_rerun_is_checked_before_anything_runs(emews_cmd, tmp_path: Path) -> None:
    (tmp_path / "seeded.py").write_text(SEEDED)
    emews_cmd.env["SEEDED_LOG"] = str(tmp_path / "log.jsonl")
    wf = write_workflow(tmp_path, objective={"module": str(tmp_path / "seeded.py"), "function": "run"},
                        space={"x": {"type": "float", "lower": -2.0, "upper": 2.0}}, budget={"evaluations": 2})
    assert emews_cmd("launch", str(wf), "--workers", "1", "--exp-dir", "exp", timeout=240).returncode == 0
    exp_wf = emews_cmd.cwd / "exp" / "workflow.yaml"
    cases = {
        ("check", str(exp_wf), "--task", "1"): "--task ID needs --try",
        ("check", str(exp_wf), "--try", "--task", "5"): "has no task 5 (its tasks are 0 to 1",
        ("check", str(wf), "--try", "--task", "0"): "is not the workflow.yaml of an experiment",
        ("check", str(exp_wf), "--try", "--task", "0", "--set", "seed=99"): "another ctx.seed",
    }
    for args, said in cases.items():
        proc = emews_cmd(*args, timeout=120)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert said in proc.stderr and "--task" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        assert "try:" not in proc.stdout
