"""Real CANDLE Supervisor files run unchanged (issue 12): GA parameter JSONs and UPF points files.

The files in ``tests/data/supervisor`` are verbatim copies (see the README there for origin and licence).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from emews.optimizers.sweep import read_points_file
from emews.core.space import Categorical
from emews.core.candle_space import load_candle_json
from emews.config.workflow import load_workflow
from testutil import TESTS, stored_rows, write_workflow

DATA = TESTS / "data" / "supervisor"
GA_FILES = sorted((DATA / "ga").glob("*.json"))
UPF_FILES = sorted((DATA / "upf").glob("*.txt"))
#: an objective that sees a UPF line as the model would: it records what it got (keys, types)
ECHO = "import json\ndef run(p):\n    return {'value': float(len(json.dumps(p, sort_keys=True))), 'seen': json.dumps(p, sort_keys=True)}\n"


def upf_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_shipped_upfs_include_lines_with_different_keys() -> None:
    mixed = [f.name for f in UPF_FILES if len({frozenset(line) for line in upf_lines(f)}) > 1]
    assert len(UPF_FILES) >= 7 and len(mixed) >= 3  # the kind that could not run at all before


@pytest.mark.parametrize("path", UPF_FILES, ids=lambda p: p.name)
def test_every_upf_loads_with_no_space(tmp_path: Path, path: Path, monkeypatch) -> None:
    (tmp_path / "obj.py").write_text(ECHO)
    wf = write_workflow(tmp_path, optimizer={"name": "sweep", "options": {"file": str(path)}},
                        objective={"module": "obj.py"}, space={}, budget={"evaluations": 1000})
    monkeypatch.chdir(tmp_path)
    workflow = load_workflow(str(wf))
    assert workflow.space.open
    points = list(read_points_file(path, workflow.space))
    assert points == upf_lines(path)  # values and types exactly as written, keys as written


@pytest.mark.parametrize("name", ["templates-upf3.txt", "cp1-upf.txt", "upf-test-upf-lc.txt"])
def test_a_upf_run_evaluates_each_line_exactly_once(emews_cmd, tmp_path: Path, name: str) -> None:
    """Lines with different keys run as written; the model's defaults fill what a line leaves out."""
    path = DATA / "upf" / name
    lines = upf_lines(path)
    (tmp_path / "obj.py").write_text(ECHO)
    (tmp_path / "default_model.txt").write_text("[Global_Params]\nepochs = 5\nactivation = 'relu'\n"
                                                "batch_size = 32\nmodel_name = 'nt3'\n")
    wf = write_workflow(tmp_path, optimizer={"name": "sweep", "options": {"file": str(path)}},
                        objective={"module": "obj.py", "defaults": "default_model.txt"}, space={},
                        budget={"evaluations": len(lines)}, task={"timeout": 60, "isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "3", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert {r["status"] for r in rows} == {"ok"}
    as_stored = Counter(json.dumps(json.loads(r["params"]), sort_keys=True) for r in rows)
    assert as_stored == Counter(json.dumps(line, sort_keys=True) for line in lines)
    defaults = {"epochs": 5, "activation": "relu", "batch_size": 32, "model_name": "nt3"}
    for r in rows:
        assert json.loads(json.loads(r["metrics"])["seen"]) == {**defaults, **json.loads(r["params"])}
    header = (tmp_path / "exp" / "results.csv").read_text().splitlines()[0].split(",")
    assert {f"p:{k}" for line in lines for k in line} <= set(header)


def test_a_space_given_with_a_upf_checks_and_types_what_it_lists(emews_cmd, tmp_path: Path) -> None:
    path = DATA / "upf" / "templates-upf3.txt"
    (tmp_path / "obj.py").write_text(ECHO)
    ok = write_workflow(tmp_path, "ok", optimizer={"name": "sweep", "options": {"file": str(path)}},
                        objective={"module": "obj.py"}, space={"epochs": {"type": "float", "lower": 1, "upper": 50}})
    workflow = load_workflow(str(ok))
    first = next(iter(read_points_file(path, workflow.space)))
    assert first == {"id": "hpset_01", "epochs": 15.0, "activation": "tanh"} and type(first["epochs"]) is float
    bad = write_workflow(tmp_path, "bad", optimizer={"name": "sweep", "options": {"file": str(path)}},
                         objective={"module": "obj.py"}, space={"epochs": {"type": "int", "lower": 1, "upper": 20}})
    proc = emews_cmd("launch", str(bad), "--workers", "2", "--exp-dir", "exp")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{path}:2: epochs: value 30 is outside" in proc.stderr  # the whole file, before anything starts
    assert not (tmp_path / "exp").exists()


def test_a_bad_line_is_found_before_anything_starts(emews_cmd, tmp_path: Path) -> None:
    lines = upf_lines(DATA / "upf" / "upf-test-upf-1.txt")
    points = tmp_path / "points.txt"
    points.write_text("".join(json.dumps(line) + "\n" for line in lines * 10) + "{\"id\": \"RUN999\", epochs: 1}\n")
    (tmp_path / "obj.py").write_text(ECHO)
    wf = write_workflow(tmp_path, optimizer={"name": "sweep", "options": {"file": "points.txt"}},
                        objective={"module": "obj.py"}, space={})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp")
    assert proc.returncode == 2 and f"{points}:31: not a JSON object" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "exp").exists()


def test_a_relative_points_file_is_found_from_any_folder_and_stored_absolute(emews_cmd, tmp_path: Path) -> None:
    folder = tmp_path / "wfdir"
    folder.mkdir()
    (folder / "upf-1.txt").write_text((DATA / "upf" / "upf-test-upf-1.txt").read_text())
    (folder / "obj.py").write_text(ECHO)
    wf = write_workflow(folder, optimizer={"name": "sweep", "options": {"file": "upf-1.txt"}},
                        objective={"module": "obj.py"}, space={}, budget={"evaluations": 3})
    proc = emews_cmd("launch", str(wf.relative_to(tmp_path)), "--workers", "2", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    stored = (tmp_path / "exp" / "workflow.yaml").read_text()
    assert str(folder / "upf-1.txt") in stored
    assert sorted(json.loads(r["params"])["id"] for r in stored_rows(tmp_path / "exp")) == ["RUN000", "RUN001", "RUN002"]


def test_no_space_is_an_error_for_other_optimizers(emews_cmd, tmp_path: Path) -> None:
    wf = write_workflow(tmp_path, space={})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 2 and f"{wf}: space: needs at least one parameter" in proc.stderr
    assert "points file" in proc.stderr


@pytest.mark.parametrize("path", GA_FILES, ids=lambda p: p.name)
def test_every_ga_file_loads(emews_cmd, tmp_path: Path, path: Path) -> None:
    wf = write_workflow(tmp_path, optimizer={"name": "ga", "options": {"seed": 1, "population": 4}},
                        space={"file": str(path)})
    proc = emews_cmd("check", str(wf))
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(path.read_text())
    assert list(load_candle_json(path).dimensions) == [e["name"] for e in entries]


def test_a_ga_run_over_a_real_file_gives_params_of_the_promised_types(emews_cmd, tmp_path: Path) -> None:
    path = DATA / "ga" / "combo_param_space_ga.json"
    (tmp_path / "obj.py").write_text(ECHO)
    wf = write_workflow(tmp_path, optimizer={"name": "ga", "options": {"seed": 3, "population": 6, "generations": 2}},
                        objective={"module": "obj.py"}, space={"file": str(path)}, budget={"evaluations": 18},
                        task={"timeout": 60, "isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=240)
    assert proc.returncode == 0, proc.stderr
    entries = {e["name"]: e for e in json.loads(path.read_text())}
    space = load_candle_json(path)
    rows = stored_rows(tmp_path / "exp")
    assert rows and {r["status"] for r in rows} == {"ok"}
    for r in rows:
        seen = json.loads(json.loads(r["metrics"])["seen"])
        assert set(seen) == set(entries)
        for name, value in seen.items():
            kind, dim = entries[name]["type"], space[name]
            if kind == "logical":
                assert type(value) is bool
            elif kind == "int":
                assert type(value) is int and dim.lower <= value <= dim.upper
            elif kind == "float":
                assert type(value) is float and dim.lower <= value <= dim.upper
            elif kind == "constant":
                assert value == entries[name]["value"] and type(value) is type(entries[name]["value"])
            else:
                assert isinstance(dim, Categorical) and value in dim.values
                caster = {"int": int, "float": float, "string": str}.get(entries[name].get("element_type"))
                assert caster is None or type(value) is caster


def test_ordered_sigma_is_a_gaussian_step_on_the_index_as_in_supervisor() -> None:
    """combo's batch_size (sigma 1): steps follow round(clip(i + N(0, sigma))), not always one step."""
    import math
    import random

    dim = load_candle_json(DATA / "ga" / "combo_param_space_ga.json")["batch_size"]
    assert dim.sigma == 1 and dim.to_spec()["sigma"] == 1
    rng, n, start = random.Random(5), 20000, dim.index(128)
    steps = Counter(dim.index(dim.mutate(128, rng)) - start for _ in range(n))
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    last = len(dim.values) - 1
    for k in range(-start, last - start + 1):
        lo = -math.inf if k == -start else (k - 0.5)
        hi = math.inf if k == last - start else (k + 0.5)
        expected = cdf(hi / dim.sigma) - cdf(lo / dim.sigma)
        assert abs(steps[k] / n - expected) < 0.015, (k, steps[k] / n, expected)
    assert steps[0] > 0 and steps[2] > 0  # unlike a one-step neighbour move


def test_element_type_logical_gives_booleans_as_supervisor_does(tmp_path: Path) -> None:
    path = tmp_path / "logical.json"
    path.write_text('[{"name": "shuffle", "type": "categorical", "element_type": "logical", "values": ["true", "False"]},'
                    ' {"name": "bn", "type": "ordered", "element_type": "logical", "values": [0, 1]}]')
    space = load_candle_json(path)
    assert space["shuffle"].values == (True, False) and space["bn"].values == (False, True)
    path.write_text('[{"name": "s", "type": "categorical", "element_type": "logical", "values": ["maybe"]}]')
    with pytest.raises(ValueError, match="'maybe' is not of element_type logical"):
        load_candle_json(path)


def test_a_upf_line_id_reaches_a_command_model_as_its_label(emews_cmd, tmp_path: Path) -> None:
    upf = DATA / "upf" / "upf-test-upf-1.txt"
    (tmp_path / "model.sh").write_text('#!/bin/sh\nmkdir -p "$EMEWS_RUN_DIR/../by-id" && '
                                       'ln -s "$EMEWS_RUN_DIR" "$EMEWS_RUN_DIR/../by-id/$1"\necho "value $3"\n')
    (tmp_path / "model.sh").chmod(0o755)
    wf = write_workflow(tmp_path, optimizer={"name": "sweep", "options": {"file": str(upf)}},
                        objective={"command": ["./model.sh", "{id}", "--epochs", "{epochs}"]}, space={},
                        budget={"evaluations": 3}, task={"timeout": 60, "isolation": "inline"})
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--exp-dir", "exp", timeout=180)
    assert proc.returncode == 0, proc.stderr
    rows = {json.loads(r["params"])["id"]: r for r in stored_rows(tmp_path / "exp")}
    assert {k: r["objective"] for k, r in rows.items()} == {"RUN000": 1.0, "RUN001": 2.0, "RUN002": 3.0}
    labels = sorted(p.name for p in (tmp_path / "exp" / "runs" / "000" / "by-id").iterdir())
    assert labels == ["RUN000", "RUN001", "RUN002"]


def test_check_of_a_upf_sweep_says_its_points_and_the_keys_they_set(emews_cmd, tmp_path: Path) -> None:
    """``emews check`` of a UPF sweep (no space) said "0 parameters": it now says what will run, the
    file's points and the keys they set (those only some lines set, apart), and of a grid its points."""
    (tmp_path / "obj.py").write_text(ECHO)
    (tmp_path / "upf-1.txt").write_text((DATA / "upf" / "upf-test-upf-1.txt").read_text())
    (tmp_path / "upf3.txt").write_text((DATA / "upf" / "templates-upf3.txt").read_text())
    said = {}
    for name in ("upf-1.txt", "upf3.txt"):
        wf = write_workflow(tmp_path, name.split(".")[0], optimizer={"name": "sweep", "options": {"file": name}},
                            objective={"module": "obj.py"}, space={}, budget={})
        proc = emews_cmd("check", str(wf))
        assert proc.returncode == 0, proc.stderr
        said[name] = proc.stdout.splitlines()[0].partition(" — ")[2]
    assert said["upf-1.txt"] == f"optimizer sweep, 3 points from {tmp_path / 'upf-1.txt'} (setting id, epochs), budget 3"
    assert said["upf3.txt"] == (f"optimizer sweep, 7 points from {tmp_path / 'upf3.txt'} "
                                "(setting id, epochs; some also activation, batch_size), budget 7")
    grid = write_workflow(tmp_path, "grid", optimizer={"name": "sweep", "options": {"levels": 3}},
                          space={"x": {"type": "float", "lower": 0, "upper": 1},
                                 "c": {"type": "categorical", "values": ["a", "b"]}}, budget={})
    proc = emews_cmd("check", str(grid))
    assert proc.returncode == 0 and "optimizer sweep, 2 parameters on a grid of 6 points, budget 6" in proc.stdout, proc
