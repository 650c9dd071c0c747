"""Hostile and sloppy input: one line naming the file and key, exit 2, checked before anything is created."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emews.cli import main
from emews.config.workflow import load_workflow
from emews.core.errors import ConfigError
from emews.core.candle_space import CANDLE_TYPES
from testutil import FAULTY, TESTS, pbt_workflow, write_workflow

SUPERVISOR_GA = TESTS / "data" / "supervisor" / "ga"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _refused(capsys: pytest.CaptureFixture, workflow: Path, *extra: str) -> str:
    """Run check and launch; both must exit 2 with one line and leave no experiment dir. Returns the line."""
    exp = workflow.parent / "exp-should-not-exist"
    lines = []
    for command in (
        ["check", str(workflow), *extra],
        ["launch", str(workflow), "--workers", "1", "--exp-dir", str(exp), *extra],
    ):
        code = main(command)
        err = capsys.readouterr().err
        assert code == 2, err
        assert "Traceback" not in err
        assert len(err.splitlines()) == 1, err
        assert err.startswith("emews: error: "), err
        lines.append(err.strip())
    assert not exp.exists()
    assert not (workflow.parent / "experiments").exists()
    assert lines[0] == lines[1]
    return lines[0]


HEAD = f"optimizer: {{name: random}}\nobjective: {{module: {FAULTY}}}\nbudget: {{evaluations: 20}}\n"
X1 = "space:\n  x1: {type: float, lower: 0, upper: 1}\n"


def _bomb(depth: int = 9) -> str:
    parts = ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    parts += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, depth)]
    return "[" + ", ".join(parts) + "]"


# 3a: alias bombs wherever they sit
BOMBS = {
    "isolation": HEAD + X1 + f"task: {{isolation: {_bomb()}}}\n",
    "values": HEAD + f"space:\n  x1: {{type: categorical, values: {_bomb()}}}\n",
    "constant": HEAD + X1 + f"  c: {{type: constant, value: {_bomb()}}}\n",
    "seed": HEAD.replace("{name: random}", f"{{name: random, options: {{seed: {_bomb()}}}}}") + X1,
}


@pytest.mark.parametrize("where", list(BOMBS))
def test_alias_bomb_is_refused(where: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS[where])
    line = _refused(capsys, path)
    assert str(path) in line and "aliases" in line


def test_a_file_over_the_size_limit_is_refused_unparsed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(HEAD + X1 + "description: |\n" + ("  " + "x" * 100 + "\n") * 50_000)
    line = _refused(capsys, path)
    assert str(path) in line and "larger than the limit of 4 MiB" in line


def test_non_utf8_workflow_names_file_and_offset(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "latin1.yaml"
    text = HEAD + X1 + 'description: "caf'
    path.write_bytes(text.encode() + b'\xe9"\n')
    line = _refused(capsys, path)
    assert str(path) in line and f"byte 0xe9 at offset {len(text)}" in line


def test_a_nul_byte_is_one_line_naming_the_file_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Finding 13 of reliability-2026-11-26: a second line ``in "<unicode string>", position N``."""
    path = tmp_path / "nul.yaml"
    path.write_bytes((HEAD + X1 + 'description: "a').encode() + b'\x00b"\n')
    line = _refused(capsys, path)
    assert f"{path}: malformed YAML: line 6, column 16: unacceptable character #x0000" in line, line


def test_non_utf8_space_file_names_the_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "s.json").write_bytes(b"\xff\xfe[]")
    path = write_workflow(tmp_path, space={"file": "s.json"})
    line = _refused(capsys, path)
    assert str(tmp_path / "s.json") in line and "not UTF-8" in line and "offset 0" in line


def test_an_r_parameter_set_as_space_file_says_to_write_it_in_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Supervisor's mlrMBO parameter sets are R (``makeParamSet``): "is not valid JSON" said nothing of that."""
    (tmp_path / "nt3_nightly.R").write_text(
        'param.set <- makeParamSet(makeDiscreteParam("epochs", values = c(2, 4)))\n'
    )
    path = write_workflow(tmp_path, space={"file": "nt3_nightly.R"})
    line = _refused(capsys, path)
    assert "nt3_nightly.R is an R parameter set, which emews does not read: write its parameters as the" in line, line
    assert "not valid JSON" not in line


DUPLICATES = {
    "budget": (
        HEAD + X1 + "budget: {evaluations: 999999}\n",
        "line 6, column 1: duplicate key 'budget'",
        "first given on line 3",
    ),
    "parameter": (
        HEAD + X1 + "  x1: {type: int, lower: 5, upper: 9}\n",
        "line 6, column 3: duplicate key 'x1'",
        "first given on line 5",
    ),
    "timeout": (HEAD + X1 + "task: {timeout: 10, timeout: 20}\n", "duplicate key 'timeout'", "first given on line 6"),
}


@pytest.mark.parametrize("case", list(DUPLICATES))
def test_duplicate_yaml_keys_are_refused(case: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text, what, first = DUPLICATES[case]
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    line = _refused(capsys, path)
    assert what in line and first in line, line


# (--set KEY=VALUE, key in the message, text in the message)
BAD_VALUES = {
    "budget true": ("budget.evaluations=true", "budget.evaluations", "whole number"),
    "budget string": ("budget.evaluations='100'", "budget.evaluations", "whole number"),
    "budget fraction": ("budget.evaluations=10.5", "budget.evaluations", "whole number"),
    "seed true": ("seed=true", "seed", "whole number"),
    "timeout inf": ("task.timeout=.inf", "task.timeout", "finite"),
    "timeout overflow": ("task.timeout=1e400", "task.timeout", "finite"),
    "timeout nan": ("task.timeout=.nan", "task.timeout", "finite"),
    "timeout zero": ("task.timeout=0", "task.timeout", "must be > 0, not 0"),
    "timeout true": ("task.timeout=true", "task.timeout", "number"),
    "memory negative": ("task.memory_limit=-5", "task.memory_limit", "more than 0"),
    "memory zero": ("task.memory_limit=0", "task.memory_limit", "more than 0"),
    "memory zero bytes": ("task.memory_limit=0MB", "task.memory_limit", "more than 0"),
    "memory words": ("task.memory_limit=lots", "task.memory_limit", "2GB"),
    "memory inline": ("task.isolation=inline", "task.memory_limit", "memory_limit needs isolation: process"),
    "durability": ("store.durability=fast", "store.durability", "'normal', 'full' or 'off'"),
    # a pool's heartbeat sleeps a third of the lease: 1e12 s passed check, then its select overflowed
    "lease past a week": ("store.lease=1e12", "store.lease", "must be <= 604800, not 1000000000000.0"),
    "lease true": ("store.lease=true", "store.lease", "number"),
    "lease inf": ("store.lease=.inf", "store.lease", "finite"),
}


@pytest.mark.parametrize("case", list(BAD_VALUES))
def test_bad_values_are_refused(case: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    item, key, text = BAD_VALUES[case]
    path = write_workflow(tmp_path, task={"timeout": 30, "isolation": "process", "memory_limit": "1GB"})
    line = _refused(capsys, path, "--set", item)
    given = item.split("=", 1)[0]  # a value --set gave is blamed on --set, one the file holds on the file
    source = "--set" if key == given or key.startswith(given + ".") else str(path)
    assert f"{source}: {key}" in line and text in line, line


@pytest.mark.parametrize("ranks", [2, "optimizer"])
def test_inline_multi_rank_tasks_need_a_timeout(
    ranks: int | str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A member blocked in ``ctx.comm`` cannot be interrupted: only ``task.timeout`` ends such a team."""
    path = write_workflow(tmp_path, task={"isolation": "inline", "ranks": ranks})
    line = _refused(capsys, path)
    assert f"{path}: task.timeout: inline multi-rank tasks" in line and "isolation: process" in line, line
    for task in (
        {"isolation": "inline", "ranks": ranks, "timeout": 60},
        {"isolation": "process", "ranks": ranks},
        {"isolation": "inline"},
    ):
        load_workflow(str(write_workflow(tmp_path, task=task)))


@pytest.mark.parametrize(
    "size, said",
    [
        ({"type": "categorical", "values": ["adam", "sgd"]}, "parameter 'optimizer' gave 'adam', not a whole number"),
        ({"type": "int", "lower": 0, "upper": 2}, "parameter 'optimizer' gives 0 ranks: a task needs at least 1"),
    ],
    ids=["NT3's optimizer strings", "int from 0"],
)
def test_a_size_parameter_that_no_job_can_run_is_refused_by_check(
    size: dict, said: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``task.ranks: optimizer`` with NT3's space, where ``optimizer`` is Keras' optimizer name: emews
    check said ok and only emews launch refused it ("gave 'adam', not a whole number of ranks"). A
    parameter whose values are no sizes on any job is refused at check, naming the file and task.ranks
    (and saying that the name is the space's parameter, not the optimizer's sizes)."""
    path = write_workflow(
        tmp_path, task={"ranks": "optimizer"}, space={"x": {"type": "float", "lower": 0, "upper": 1}, "optimizer": size}
    )
    line = _refused(capsys, path)
    assert f"{path}: task.ranks: {said}" in line, line
    if size["type"] == "categorical":
        assert "names the space's parameter of that name" in line, line


NON_FINITE = {
    "categorical nan": {"type": "categorical", "values": [1, "1", float("nan")]},
    "categorical inf": {"type": "categorical", "values": [1.0, float("inf")]},
    "nested inf": {"type": "categorical", "values": [[1, float("-inf")], 2]},
    "ordered nan": {"type": "ordered", "values": [1, float("nan")]},
    "constant nan": {"type": "constant", "value": float("nan")},
    "sigma inf": {"type": "float", "lower": 0, "upper": 1, "sigma": float("inf")},
}


@pytest.mark.parametrize("case", list(NON_FINITE))
def test_nan_and_infinity_are_refused_in_values(case: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = write_workflow(tmp_path, space={"x": {"type": "float", "lower": 0, "upper": 1}, "c": NON_FINITE[case]})
    line = _refused(capsys, path)
    assert f"{path}: space.c" in line and ("nan" in line or "inf" in line or "finite" in line), line


def _entry(**fields: object) -> list[dict[str, object]]:
    return [{"name": "x1", "type": "float", "lower": 0, "upper": 1, **fields}]


CANDLE = {
    "sigma word": (_entry(sigma="wide"), "x1", "sigma must be a number, got 'wide'"),
    "values string": ([{"name": "c", "type": "categorical", "values": "abc"}], "c", "values must be a list"),
    "int bounds": ([{"name": "n", "type": "int", "lower": 0.7, "upper": 3.9}], "n", "lower must be an integer"),
    "name null": ([{"name": None, "type": "int", "lower": 0, "upper": 3}], "[0]", "'name' must be a non-empty"),
    "unknown key": (
        [{"name": "x1", "type": "float", "lowr": 0, "upper": 1}],
        "x1",
        "unknown key 'lowr' for type float; allowed: name, type, comment, description, lower, upper",
    ),
    "missing lower": ([{"name": "x1", "type": "float", "upper": 1}], "x1", "missing key 'lower'"),
    "duplicate name": (_entry() + [{"name": "x1", "type": "int", "lower": 5, "upper": 9}], "x1", "defined twice"),
    "duplicate key": ([{"name": "x1", "type": "int", "lower": 1, "lower": 2, "upper": 3}], "space.file", "twice"),
    "nan bound": (_entry(upper=float("nan")), "x1", "finite"),
    "bad element": (
        [{"name": "b", "type": "ordered", "element_type": "int", "values": [1, "two"]}],
        "b",
        "not of element_type int",
    ),
    # finding 11 of reliability-2026-11-26: "x1: unhashable type: 'list'"
    "type list": (_entry(type=["float"]), "x1", "unknown type ['float']; allowed: int, float, categorical"),
    "type mapping": (_entry(type={"a": 1}), "x1", "unknown type {'a': 1}; allowed: int, float, categorical"),
    "element_type list": (
        [{"name": "b", "type": "ordered", "element_type": ["int"], "values": [1]}],
        "b",
        "unknown element_type ['int']; allowed: int, float",
    ),
}


@pytest.mark.parametrize("case", list(CANDLE))
def test_malformed_candle_json_names_the_json_and_entry(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    entries, key, text = CANDLE[case]
    raw = json.dumps(entries)
    if case == "duplicate key":
        raw = '[{"name": "x1", "type": "int", "lower": 1, "lower": 2, "upper": 3}]'
    (tmp_path / "params.json").write_text(raw)
    path = write_workflow(tmp_path, space={"file": "params.json"})
    line = _refused(capsys, path)
    assert f"{tmp_path / 'params.json'}: {key}" in line and text in line, line


@pytest.mark.parametrize("kind", [{"a": 1}, ["float"], [], {}], ids=["mapping", "list", "empty list", "empty mapping"])
def test_a_mapping_or_list_as_a_parameter_type_is_one_line(
    kind: object, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Finding 11 of reliability-2026-11-26: ``TypeError: unhashable type: 'dict'``, two tracebacks, exit 1."""
    path = write_workflow(tmp_path, space={"x": {"type": kind, "lower": 0, "upper": 1}})
    line = _refused(capsys, path)
    assert f"{path}: space.x.type: invalid value" in line and "(allowed: 'int', 'float', 'categorical'" in line, line


JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


@given(kind=JSON_LIKE.filter(lambda v: v not in CANDLE_TYPES), candle=st.booleans())
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_value_as_a_parameter_type_is_one_line_never_a_traceback(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture, kind: object, candle: bool
) -> None:
    folder = tmp_path_factory.mktemp("kind")
    if candle:
        (folder / "params.json").write_text(json.dumps(_entry(type=kind)))
    path = write_workflow(
        folder, space={"file": "params.json"} if candle else {"x1": {"type": kind, "lower": 0, "upper": 1}}
    )
    code = main(["check", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("emews: error: "), err
    assert (f"{folder / 'params.json'}: x1: unknown type" if candle else f"{path}: space.x1.type") in err, err


def test_numeric_string_sigma_is_converted(tmp_path: Path) -> None:
    (tmp_path / "params.json").write_text(json.dumps(_entry(sigma="0.000495", comment="from tc1")))
    workflow = load_workflow(str(write_workflow(tmp_path, space={"file": "params.json"})))
    assert workflow.to_dict()["space"]["x1"]["sigma"] == 0.000495


PLUGIN = """\
from pathlib import Path

from emews.core.optimizer import Optimizer


class Plug(Optimizer):
    def __init__(self, population: int = 4, rate: float = 0.5, points: Path | None = None,
                 mode: str = "a") -> None:
        if points is not None:
            assert isinstance(points, Path) and points.is_absolute(), points
            points.read_text()

    def run(self, evaluator):
        pass
"""


def _plugin_workflow(folder: Path, **options: object) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "plug.py").write_text(PLUGIN)
    return write_workflow(folder, optimizer={"name": "plug.py:Plug", "options": options})


OPTION_ERRORS: dict[str, tuple[dict[str, object], str, str]] = {
    "int from word": ({"population": "abc"}, "optimizer.options.population", "whole number"),
    "int from bool": ({"population": True}, "optimizer.options.population", "whole number"),
    "int from string": ({"population": "100"}, "optimizer.options.population", "whole number"),
    "float from word": ({"rate": "fast"}, "optimizer.options.rate", "must be a number"),
    "str from int": ({"mode": 3}, "optimizer.options.mode", "must be text"),
    "missing file": ({"points": "nowhere.txt"}, "optimizer.options.points", "nowhere.txt does not exist"),
    "unknown option": ({"popsize": 3}, "optimizer.options.popsize", "(allowed: population, rate, points, mode)"),
}


@pytest.mark.parametrize("case", list(OPTION_ERRORS))
def test_plugin_options_are_checked_against_the_signature(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    options, key, text = OPTION_ERRORS[case]
    path = _plugin_workflow(tmp_path / "wf", **options)
    line = _refused(capsys, path)
    assert f"{path}: {key}" in line and text in line, line


def test_path_options_are_resolved_from_the_workflow_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _plugin_workflow(tmp_path / "wf", points="points.txt", population=3)
    (tmp_path / "wf" / "points.txt").write_text("x=1\n")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    recorded = load_workflow(str(path)).to_dict()["optimizer"]["options"]
    assert recorded == {"points": str(tmp_path / "wf" / "points.txt"), "population": 3}
    # the copy an experiment records loads from anywhere (a batch job cd's into the experiment)
    from emews.config.experiment import create_experiment

    exp = create_experiment(tmp_path / "exp", name="p", workflow=load_workflow(str(path)).to_dict(), site={}, info={})
    monkeypatch.chdir(exp)
    again = load_workflow(str(exp / "workflow.yaml"))
    assert again.to_dict()["optimizer"]["options"] == recorded
    again.make_optimizer()


def test_store_durability_defaults_to_normal(tmp_path: Path) -> None:
    workflow = load_workflow(str(write_workflow(tmp_path)), check_imports=False)
    assert workflow.model.store.durability == "normal"
    full = load_workflow(str(write_workflow(tmp_path, store={"durability": "full"})), check_imports=False)
    assert full.to_dict()["store"] == {"durability": "full"}


def test_memory_limit_is_stored_in_bytes(tmp_path: Path) -> None:
    workflow = load_workflow(str(write_workflow(tmp_path, task={"memory_limit": "512MiB"})), check_imports=False)
    assert workflow.model.task.memory_limit == 512 * 2**20


def test_errors_cut_long_values_short(tmp_path: Path) -> None:
    path = write_workflow(tmp_path, task={"isolation": ["x" * 1000] * 1000})
    with pytest.raises(ConfigError) as err:
        load_workflow(str(path))
    assert len(str(err.value)) - len(str(path)) < 250 and "task.isolation" in str(err.value)


def _write(tmp_path: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = tmp_path / "wf.yaml"
        path.write_text(text)
        return path

    return write


def test_yaml_merge_keys_still_work(tmp_path: Path) -> None:
    text = HEAD + "space:\n  a: &base {type: float, lower: 0, upper: 1}\n  b: {<<: *base, upper: 2}\n"
    workflow = load_workflow(str(_write(tmp_path)(text)), check_imports=False)
    assert workflow.space["b"].upper == 2.0


def test_yaml_dump_load_is_lossless_for_tricky_strings() -> None:
    from emews.config.yamlio import dump_yaml, parse_yaml

    data = {"s": ["1e5", "0x1f", "1:00:00", "yes", "null", "~", ".inf", "1_000", "caf\u00e9"], "f": [1e-5, 1e300]}
    assert parse_yaml(dump_yaml(data), source="x") == data
    assert yaml.safe_load(dump_yaml({"a": 1})) == {"a": 1}


def test_replicates_with_an_exploiting_trial_scheduler_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """PBT's exploit gives a trial another point's parameters, replicate index included: a point's
    replicates would mix points (two rows of one replicate number). Check and launch refuse it."""
    pbt = yaml.safe_load(pbt_workflow(tmp_path, [0.1, 0.9]).read_text())
    refused = write_workflow(tmp_path, name="pbt_replicates", **{**pbt, "replicates": 2, "budget": {"evaluations": 4}})
    line = _refused(capsys, refused)
    assert "pbt_replicates.yaml" in line and "replicates" in line and "trial_scheduler pbt" in line
    asha = {"name": "asha", "options": {"max_t": 9, "grace_period": 1}}
    fine = write_workflow(tmp_path, name="asha", **{**pbt, "replicates": 2, "trial_scheduler": asha})
    assert load_workflow(str(fine)).model.replicates == 2


@pytest.mark.parametrize("text, seconds", [("90s", 90.0), ("1h30m", 5400.0), ("00:02:00", 120.0), ("2h", 7200.0)])
def test_a_task_timeout_may_be_a_duration_as_budget_time_takes_it(text: str, seconds: float, tmp_path: Path) -> None:
    """``task.timeout: 1h`` was refused as 'must be a number' without saying it wants seconds."""
    workflow = load_workflow(str(write_workflow(tmp_path, task={"timeout": text})))
    assert workflow.model.task.timeout == seconds


@pytest.mark.parametrize("text, said", [("1hour", "malformed duration '1hour'"), ("0s", "duration '0s' is zero")])
def test_a_task_timeout_that_is_no_duration_says_what_is_allowed(
    text: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = write_workflow(tmp_path, task={"timeout": text})
    line = _refused(capsys, path)
    assert f"{path}: task.timeout: {said}" in line and "a number of seconds > 0" in line and "1h30m" in line, line


@pytest.mark.parametrize("key", ["space.epochs.upper", "workflow.space.epochs", "space.learning_rate.lower"])
def test_a_set_key_of_a_space_file_says_the_file_holds_the_space(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``--set space.epochs.upper=2`` on Supervisor's P1B1 GA file as the space (to train 2 epochs at
    most on a first try) said 'space.file: expected a mapping such as {type: float, ...}, got
    'p1b1_param_space_ga.json'' and 'also: --set: space.epochs.upper: Unable to extract tag using
    discriminator 'type'' (pydantic's words): one line names the key and the file that holds the space."""
    ga = tmp_path / "p1b1_param_space_ga.json"
    ga.write_text((SUPERVISOR_GA / "p1b1_param_space_ga.json").read_text())
    path = write_workflow(tmp_path, optimizer={"name": "ga"}, space={"file": ga.name})
    line = _refused(capsys, path, "--set", f"{key}=2")
    assert line == (f"emews: error: --set: {key}: the space is read from {ga.name} (space.file): change its "
                    "parameters in that file, or in a copy of it, not with --set (allowed: --set space.file=OTHER_FILE)")


@pytest.mark.parametrize("name", ["../escape", "ABS", "a/b", "..", ".", "", "a\nb"])
def test_a_workflow_name_that_is_not_one_folder_name_is_refused(name: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    """An observation of ``shared/findings/reliability-2026-11.md``: ``name: ../escape`` (or an
    absolute path) put the default experiment directory outside ``experiments/``
    (``experiments/../escape-001``). The name is one folder name, or the run is refused before
    anything is written."""
    name = str(tmp_path / "abs" / "x") if name == "ABS" else name
    path = write_workflow(tmp_path)
    data = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({"name": name, **data}))
    for command in (["check", str(path)], ["launch", str(path), "--workers", "1"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and f"{path}: name:" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


@pytest.mark.parametrize("name", ["nt3 upf", "random-2.v1", "ünï"])
def test_a_workflow_name_that_is_one_folder_name_names_the_experiment(name: str, tmp_path: Path) -> None:
    path = write_workflow(tmp_path)
    path.write_text(yaml.safe_dump({"name": name, **yaml.safe_load(path.read_text())}))
    assert load_workflow(str(path)).name == name


@pytest.mark.parametrize("name", ["", "a\nb", "x\x1b[31m"])
def test_a_parameter_name_that_is_empty_or_holds_control_characters_is_refused(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """3d of ``shared/findings/reliability-2026-11.md``: an empty parameter name and one holding a
    newline were accepted silently (an empty one reaches a command as a bare ``--``, which ends its
    options; a CANDLE JSON's empty name was already refused)."""
    path = write_workflow(tmp_path, space={name: {"type": "float", "lower": 0.0, "upper": 1.0},
                                           "mode": {"type": "constant", "value": "ok"}})
    line = _refused(capsys, path)
    assert f"{path}: space: parameter name {name!r}" in line and "non-empty" in line, line
