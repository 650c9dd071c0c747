"""Finding, merging, overriding and validating site files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emews.core.errors import ConfigError
from emews.site import ENV_OVERRIDES, available_sites, load_site
from emews.site.loader import builtin_site_dir

BUILTIN = ["aurora", "frontier", "local", "perlmutter", "polaris", "summit"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_builtin_sites_all_load(in_tmp: Path) -> None:
    assert set(BUILTIN) <= set(available_sites())
    for name in BUILTIN:
        site = load_site(name)
        assert site.name == name
        assert site.is_local == (name == "local")
    assert (builtin_site_dir() / "__init__.py").is_file()


def test_unknown_site_lists_the_available_ones(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("sumit")
    err = info.value
    assert err.key == "site" and "sumit" in err.message
    for name in BUILTIN:
        assert name in err.allowed


def test_unknown_key_names_file_key_and_allowed_keys(in_tmp: Path) -> None:
    path = write(in_tmp / "bad.yaml", "scheduler:\n  type: slurm\n  qeueu: debug\n")
    with pytest.raises(ConfigError) as info:
        load_site(str(path))
    err = info.value
    assert err.file == str(path)
    assert err.key == "scheduler.qeueu"
    assert "unknown key" in err.message
    assert "queue" in err.allowed and "walltime" in err.allowed


def test_unknown_top_level_key(in_tmp: Path) -> None:
    path = write(in_tmp / "bad.yaml", "schedular: {}\n")
    with pytest.raises(ConfigError) as info:
        load_site(str(path))
    assert info.value.key == "schedular"
    assert "scheduler" in info.value.allowed and "launcher" in info.value.allowed


@pytest.mark.parametrize("key,value,choices", [
    ("scheduler.type", "sge", ["lsf", "slurm", "pbs", "local"]),
    ("launcher.type", "mpirun", ["jsrun", "srun", "mpiexec", "aprun", "none"]),
    ("node.gpu_binding", "magic", ["launcher", "env"]),
    ("node.gpu_env", "GPU", ["CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"]),
])
def test_bad_choice_lists_the_choices(in_tmp: Path, key: str, value: str,
                                      choices: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("local", overrides=[f"{key}={value}"])
    err = info.value
    assert err.key == key and value in err.message
    assert err.file == "--set"
    for choice in choices:
        assert choice in err.allowed


@pytest.mark.parametrize("walltime", ["1h", "25:61", "0:00", "99"])
def test_malformed_walltime(in_tmp: Path, walltime: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("frontier", overrides=[f"scheduler.walltime={walltime}"])
    assert info.value.key == "scheduler.walltime"
    assert "HH:MM" in info.value.allowed


def test_unquoted_walltime_in_yaml_is_read_as_time(in_tmp: Path) -> None:
    path = write(in_tmp / "s.yaml", "scheduler:\n  type: slurm\n  walltime: 1:30:00\n")
    assert load_site(str(path)).config.scheduler.walltime == "01:30:00"
    path = write(in_tmp / "t.yaml", "scheduler:\n  type: lsf\n  walltime: 2:05\n")
    assert load_site(str(path)).config.scheduler.walltime == "02:05:00"


def test_malformed_yaml_names_file_and_line(in_tmp: Path) -> None:
    path = write(in_tmp / "broken.yaml", "scheduler:\n  type: slurm\n  nodes: [1,\n")
    with pytest.raises(ConfigError) as info:
        load_site(str(path))
    assert info.value.file == str(path)
    assert "line" in info.value.message


def test_gpus_per_worker_above_node_gpus(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("polaris", overrides=["node.gpus_per_worker=5"])
    assert info.value.key == "node.gpus_per_worker"
    assert "0..4" in info.value.allowed


def test_launcher_binding_needs_a_launcher_that_binds(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("polaris", overrides=["node.gpu_binding=launcher"])
    assert info.value.key == "node.gpu_binding"
    assert "env" in info.value.allowed


def test_jsrun_needs_launcher_binding(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("summit", overrides=["node.gpu_binding=env"])
    assert info.value.key == "node.gpu_binding" and info.value.allowed == "launcher"


def test_missing_site_path(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("nowhere/site.yaml")
    assert "does not exist" in info.value.message


def test_extends_overlays_a_base_deeply(in_tmp: Path) -> None:
    write(in_tmp / "site-configs" / "mysummit.yaml",
          "extends: summit\nscheduler:\n  queue: debug\n  directives: ['-alloc_flags gpumps']\n"
          "environment:\n  vars: {FOO: bar}\n")
    site = load_site("mysummit")
    sched = site.config.scheduler
    assert site.name == "mysummit"
    assert (sched.type, sched.queue, sched.walltime) == ("lsf", "debug", "01:00:00")
    assert sched.directives == ["-alloc_flags gpumps"]
    assert site.config.environment.vars == {"OMP_NUM_THREADS": "1", "FOO": "bar"}
    assert site.config.node.gpus == 6


def test_user_site_dir_shadows_builtin_and_may_extend_it(in_tmp: Path) -> None:
    write(in_tmp / "site-configs" / "frontier.yaml",
          "extends: frontier\nscheduler:\n  account: CSC999\n")
    site = load_site("frontier")
    assert site.config.scheduler.account == "CSC999"
    assert site.config.node.gpu_env == "ROCR_VISIBLE_DEVICES"


def test_extends_by_relative_path_and_cycles(in_tmp: Path) -> None:
    write(in_tmp / "a" / "base.yaml", "scheduler: {type: pbs, queue: q1}\n")
    child = write(in_tmp / "a" / "child.yaml", "extends: base.yaml\nscheduler: {nodes: 3}\n")
    site = load_site(str(child))
    assert (site.config.scheduler.type, site.config.scheduler.nodes) == ("pbs", 3)
    write(in_tmp / "c" / "x.yaml", "extends: y.yaml\n")
    write(in_tmp / "c" / "y.yaml", "extends: x.yaml\n")
    with pytest.raises(ConfigError) as info:
        load_site(str(in_tmp / "c" / "x.yaml"))
    assert "cycle" in info.value.message


def test_extends_unknown_base_names_the_file(in_tmp: Path) -> None:
    path = write(in_tmp / "s.yaml", "extends: nosuchsite\n")
    with pytest.raises(ConfigError) as info:
        load_site(str(path))
    assert info.value.file == str(path) and info.value.key == "extends"
    assert "summit" in info.value.allowed


def test_errors_blame_the_base_file_for_its_keys(in_tmp: Path) -> None:
    base = write(in_tmp / "base.yaml", "launcher: {type: srun, wrkers_per_node: 2}\n")
    child = write(in_tmp / "child.yaml", "extends: base.yaml\n")
    with pytest.raises(ConfigError) as info:
        load_site(str(child))
    assert info.value.file == str(base)


def test_precedence_set_over_env_over_yaml(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_site("polaris").config.scheduler.queue == "debug"
    monkeypatch.setenv("EMEWS_QUEUE", "prod")
    monkeypatch.setenv("EMEWS_ACCOUNT", "ENVPROJ")
    site = load_site("polaris")
    assert (site.config.scheduler.queue, site.config.scheduler.account) == ("prod", "ENVPROJ")
    site = load_site("polaris", overrides=["scheduler.queue=preemptable"])
    assert site.config.scheduler.queue == "preemptable"
    assert site.config.scheduler.account == "ENVPROJ"


def test_every_env_override_reaches_its_key(in_tmp: Path) -> None:
    values = {"EMEWS_ACCOUNT": "P1", "EMEWS_QUEUE": "q", "EMEWS_WALLTIME": "0:30",
              "EMEWS_NODES": "4", "EMEWS_WORKERS_PER_NODE": "2", "EMEWS_GPUS_PER_WORKER": "2"}
    assert set(values) == set(ENV_OVERRIDES)
    data = load_site("frontier", environ=values).to_dict()
    got = {var: data[key.split(".")[0]][key.split(".")[1]] for var, key in ENV_OVERRIDES.items()}
    assert got == {"EMEWS_ACCOUNT": "P1", "EMEWS_QUEUE": "q", "EMEWS_WALLTIME": "00:30:00",
                   "EMEWS_NODES": 4, "EMEWS_WORKERS_PER_NODE": 2, "EMEWS_GPUS_PER_WORKER": 2}


def test_bad_env_value_names_the_variable(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("frontier", environ={"EMEWS_NODES": "many"})
    assert info.value.file == "$EMEWS_NODES" and info.value.key == "scheduler.nodes"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(yaml_nodes=st.integers(1, 50), env_nodes=st.one_of(st.none(), st.integers(1, 50)),
       set_nodes=st.one_of(st.none(), st.integers(1, 50)))
def test_nodes_precedence_property(in_tmp: Path, yaml_nodes: int, env_nodes: int | None,
                                   set_nodes: int | None) -> None:
    path = write(in_tmp / "p.yaml", f"scheduler: {{type: slurm, nodes: {yaml_nodes}}}\n")
    environ = {} if env_nodes is None else {"EMEWS_NODES": str(env_nodes)}
    overrides = [] if set_nodes is None else [f"scheduler.nodes={set_nodes}"]
    expected = next(v for v in (set_nodes, env_nodes, yaml_nodes) if v is not None)
    assert load_site(str(path), overrides, environ).config.scheduler.nodes == expected


@given(st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True),
                       st.text(st.characters(codec="ascii", exclude_categories=["Cc"]),
                               max_size=12), max_size=4))
def test_set_values_are_typed_like_yaml(values: dict[str, str]) -> None:
    quoted = {k: "'" + v.replace("'", "''") + "'" for k, v in values.items()}  # YAML quoting
    overrides = [f"environment.vars.{k}={q}" for k, q in quoted.items()]
    got = load_site("local", overrides, environ={}).config.environment.vars
    assert got == values


@pytest.mark.parametrize("item", ["scheduler.nodes", "=3", "scheduler..nodes=2",
                                  "scheduler.nodes.x=1", "scheduler.nodes=0",
                                  "scheduler.foo=1", "launcher.workers_per_node=two"])
def test_bad_set_items(in_tmp: Path, item: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("frontier", overrides=[item])
    assert info.value.file.startswith("--set")


def test_to_dict_round_trips_through_site_yaml(in_tmp: Path) -> None:
    for name in BUILTIN:
        site = load_site(name, overrides=["scheduler.account=ABC123", "scheduler.nodes=2"])
        path = in_tmp / f"{name}-resolved.yaml"
        path.write_text(yaml.safe_dump(site.to_dict(), sort_keys=False))
        again = load_site(str(path), environ={})
        assert again.to_dict() == site.to_dict()
        assert again.name == name


@pytest.mark.parametrize("body,key,allowed", [
    ('scheduler: {type: slurm, queue: "gpu debug"}', "scheduler.queue", "not starting with -"),
    ('scheduler: {type: pbs, job_name: "-N x"}', "scheduler.job_name", "not starting with -"),
    ('environment: {vars: {"1X": "v"}}', "environment.vars", "shell variable name"),
    ('scheduler: {type: slurm, directives: ["--exclusive\\ntouch x"]}', "scheduler.directives",
     "one line"),
    ('name: "my\\nsite"', "name", "one line"),
])
def test_values_that_would_reach_job_sh_unchecked_name_the_site_file(
        in_tmp: Path, body: str, key: str, allowed: str) -> None:
    (in_tmp / "bad.yaml").write_text(body + "\n")
    with pytest.raises(ConfigError) as info:
        load_site("bad.yaml", environ={})
    assert (info.value.file, info.value.key) == ("bad.yaml", key)
    assert allowed in info.value.allowed


@pytest.mark.parametrize("body,key", [
    ("scheduler: {type: slurm, nodes: true}", "scheduler.nodes"),
    ("launcher: {type: srun, workers_per_node: true}", "launcher.workers_per_node"),
    ("node: {gpus: true}", "node.gpus"),
    ("node: {gpus: 4, gpus_per_worker: true}", "node.gpus_per_worker"),
    ("node: {cores: false}", "node.cores"),
])
def test_a_boolean_for_a_count_is_refused(in_tmp: Path, body: str, key: str) -> None:
    """``nodes: true`` was read as 1 node (pydantic's lax int takes a bool), as were ``gpus: true``
    and the other counts: a wrong type must be an error naming the key, as in a workflow file."""
    (in_tmp / "bad.yaml").write_text(body + "\n")
    with pytest.raises(ConfigError) as info:
        load_site("bad.yaml", environ={})
    assert (info.value.file, info.value.key) == ("bad.yaml", key)
    assert "whole number" in info.value.message and "bool" in info.value.message


@pytest.mark.parametrize("value", ["[1, 2]", "{x: 1}"])
def test_an_environment_value_that_is_not_a_scalar_is_refused(in_tmp: Path, value: str) -> None:
    """``vars: {A: [1, 2]}`` exported ``A='[1, 2]'`` (Python's repr of the list) to every rank."""
    (in_tmp / "bad.yaml").write_text(f"environment: {{vars: {{A: {value}}}}}\n")
    with pytest.raises(ConfigError) as info:
        load_site("bad.yaml", environ={})
    assert (info.value.file, info.value.key) == ("bad.yaml", "environment.vars")
    assert "A" in info.value.message and "text, a number or a boolean" in info.value.allowed


def test_scalar_environment_values_are_exported_as_text(in_tmp: Path) -> None:
    (in_tmp / "ok.yaml").write_text("environment: {vars: {A: 1, B: 1.5, C: true, D: null, E: x}}\n")
    assert load_site("ok.yaml", environ={}).environment_vars() == {"A": "1", "B": "1.5", "C": "true", "D": "", "E": "x"}


def test_a_site_that_extends_its_own_name_says_so(in_tmp: Path) -> None:
    """``site-configs/my.yaml`` with ``extends: my`` said "unknown site 'my'; did you mean 'my'?"."""
    write(in_tmp / "site-configs" / "my.yaml", "extends: my\n")
    with pytest.raises(ConfigError) as info:
        load_site("my", environ={})
    assert info.value.key == "extends" and info.value.file.endswith("my.yaml")
    assert "did you mean" not in info.value.message and "own name" in info.value.message


@pytest.mark.parametrize("base", ["frontier", "polaris"])
def test_a_site_that_changes_the_gpu_count_drops_the_bases_gpu_names(in_tmp: Path, base: str) -> None:
    """frontier and polaris name their GPUs in nearest-first order (node.gpu_ids); a site extending
    one with another GPU count (``node: {gpus: 0}``, ``--set node.gpus=2``) describes another node,
    and failed with "node.gpu_ids: lists 8 ids for 0 gpus"."""
    write(in_tmp / "site-configs" / "variant.yaml", f"extends: {base}\nnode: {{gpus: 0, gpus_per_worker: 0}}\n")
    node = load_site("variant", environ={}).config.node
    assert (node.gpus, node.gpu_ids) == (0, None)
    node = load_site(base, ["node.gpus=2", "launcher.workers_per_node=1"], environ={}).config.node
    assert (node.gpus, node.gpu_ids, node.device_names()) == (2, None, ["0", "1"])
    node = load_site(base, ["node.gpu_ids=[b, a]", "node.gpus=2", "launcher.workers_per_node=1"], environ={}).config.node
    assert node.device_names() == ["b", "a"]
    write(in_tmp / "site-configs" / "same.yaml", f"extends: {base}\nnode: {{gpus_per_worker: 1}}\n")
    assert load_site("same", environ={}).config.node.gpu_ids == load_site(base, environ={}).config.node.gpu_ids
    gpus = load_site(base, environ={}).config.node.gpus  # the same count given again keeps the names (review)
    assert load_site(base, [f"node.gpus={gpus}"], environ={}).config.node.gpu_ids == \
        load_site(base, environ={}).config.node.gpu_ids
    write(in_tmp / "site-configs" / "again.yaml", f"extends: {base}\nnode: {{gpus: {gpus}}}\n")
    assert load_site("again", environ={}).config.node.gpu_ids == load_site(base, environ={}).config.node.gpu_ids


def test_a_date_in_environment_vars_is_its_text(in_tmp: Path) -> None:
    """YAML reads ``2024-01-01`` as a date: it is exported as written (refused as "not one value" once
    lists were refused there); a list is still refused."""
    write(in_tmp / "site-configs" / "dated.yaml", "extends: local\nenvironment:\n  vars: {RUN_DATE: 2024-01-01}\n")
    assert load_site("dated", environ={}).config.environment.vars["RUN_DATE"] == "2024-01-01"
    with pytest.raises(ConfigError, match="RUN_DATE must be one value"):
        load_site("local", ["environment.vars.RUN_DATE=[1, 2]"], environ={})
