"""Worker counts, launcher lines, node-local rank and GPU binding."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from emews.core.errors import ConfigError
from emews.site import bind_gpus, load_site, local_rank
from emews.site.gpus import LOCAL_RANK_VARS

CMD = ["python3", "-m", "emews", "run", "/x"]


def test_local_launch_uses_the_mpiexec_next_to_sys_executable(in_tmp: Path) -> None:
    site = load_site("local")
    line = site.launch_command(5, CMD)
    assert line == [str(Path(sys.executable).parent / "mpiexec"), "-n", "5", *CMD]
    assert site.total_workers(None) == 2
    assert site.total_workers(7) == 7


def test_hpc_total_workers_default_and_limits(in_tmp: Path) -> None:
    site = load_site("frontier", overrides=["scheduler.nodes=3"])
    assert site.total_workers(None) == 23          # 3 nodes x 8 slots, less the optimizer's
    assert site.total_workers(21) == 21             # fewer on request
    with pytest.raises(ConfigError) as info:
        site.total_workers(24)                      # 25 ranks > 3 x 8 slots
    assert info.value.key == "workers" and "1..23" in info.value.allowed
    with pytest.raises(ConfigError):
        site.total_workers(0)


def test_gpu_slots_must_fit_the_node(in_tmp: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_site("summit", overrides=["launcher.workers_per_node=6"]).total_workers(None)
    assert info.value.key == "launcher.workers_per_node"
    assert "1..5" in info.value.allowed
    with pytest.raises(ConfigError) as info:
        load_site("polaris", overrides=["node.gpus_per_worker=2"]).total_workers(None)
    assert "1..1" in info.value.allowed              # 2 slots x 2 GPUs = 4
    local = load_site("local", overrides=["node.gpus=2", "node.gpus_per_worker=1"])
    assert local.total_workers(2) == 2
    with pytest.raises(ConfigError):
        local.total_workers(3)


@pytest.mark.parametrize(("override", "said"), [
    ("node.gpus=2", "--set: node.gpus: 4 rank slots per node (3 workers + 1 for the optimizer) x 1 GPU need "
                    "4 GPUs; a node has 2 (allowed: at least 4)"),
    ("node.gpus_per_worker=2", "--set: node.gpus_per_worker: 4 rank slots per node (3 workers + 1 for the "
                               "optimizer) x 2 GPUs need 8 GPUs; a node has 4 (allowed: 1..1)"),
    ("launcher.workers_per_node=8", "--set: launcher.workers_per_node: 9 rank slots per node (8 workers + 1 "
                                    "for the optimizer) x 1 GPU need 9 GPUs; a node has 4 (allowed: 1..3)"),
])
def test_a_gpu_slot_error_names_the_set_item_that_gave_the_value(in_tmp: Path, override: str, said: str) -> None:
    """--set node.gpus=2 on polaris was refused as '.../polaris.yaml: launcher.workers_per_node: ...
    a node has 2 (allowed: 1..1)', naming a built-in file the user did not write and a key they did
    not set; the error now names the --set item (or the user's own site file) that gave the value."""
    with pytest.raises(ConfigError) as info:
        load_site("polaris", overrides=[override]).total_workers(None)
    assert str(info.value) == said
    (in_tmp / "mine.yaml").write_text("extends: polaris\nnode:\n  gpus: 2\n")
    with pytest.raises(ConfigError) as info:
        load_site(str(in_tmp / "mine.yaml")).total_workers(None)
    assert (info.value.file, info.value.key) == (str(in_tmp / "mine.yaml"), "node.gpus")


def test_launcher_lines_per_type(in_tmp: Path) -> None:
    two = ["scheduler.nodes=2"]
    assert load_site("summit", overrides=two).launch_command(11, CMD) == \
        ["jsrun", "-n", "11", "-r", "6", "-a", "1", "-c", "7", "-g", "1", *CMD]
    assert load_site("polaris", overrides=two).launch_command(7, CMD) == \
        ["mpiexec", "-n", "7", "--ppn", "4", "--depth=8", "--cpu-bind", "depth", *CMD]
    assert load_site("perlmutter", overrides=two).launch_command(7, CMD)[:8] == \
        ["srun", "-N", "2", "-n", "7", "--ntasks-per-node=4", "--gpus-per-task=1",
         "--gpu-bind=closest"]
    aprun = load_site("frontier", overrides=["launcher.type=aprun", "launcher.args=[]"])
    assert aprun.launch_command(8, CMD) == ["aprun", "-n", "8", "-N", "8", *CMD]
    none = load_site("local", overrides=["launcher.type=none", "launcher.command=null"])
    assert none.launch_command(1, CMD) == CMD


def test_local_rank_reads_the_launchers_variables() -> None:
    assert local_rank({}) == 0
    for var in LOCAL_RANK_VARS:
        assert local_rank({var: "3"}) == 3
    assert local_rank({"MPI_LOCALRANKID": "1", "SLURM_LOCALID": "5"}) == 1
    assert local_rank({"SLURM_LOCALID": "x", "PALS_LOCAL_RANKID": "2"}) == 2


def test_env_binding_gives_each_slot_its_gpus(in_tmp: Path) -> None:
    """Frontier: rank r (cores 8r+1..8r+7 with srun -c 7) gets its nearest GCD, as the OLCF guide's
    ``--gpu-bind=map_gpu:4,5,2,3,6,7,0,1`` does; before the fix rank 0 got GCD 0, on the far NUMA domain."""
    site = load_site("frontier")
    seen, gcds = [], []
    for rank in range(8):
        env: dict[str, str] = {}
        ids = bind_gpus(site, rank, environ=env)
        assert ids == [rank] and list(env) == ["ROCR_VISIBLE_DEVICES"]
        seen += ids
        gcds.append(env["ROCR_VISIBLE_DEVICES"])
    assert sorted(seen) == list(range(8))
    assert gcds == ["4", "5", "2", "3", "6", "7", "0", "1"]
    two = load_site("polaris", overrides=["node.gpus_per_worker=2", "launcher.workers_per_node=1"])
    env = {}
    assert bind_gpus(two.to_dict(), 1, environ=env) == [2, 3]
    assert env == {"CUDA_VISIBLE_DEVICES": "1,0"}  # slots 2 and 3 are GPUs 1 and 0 (reverse order)


def test_polaris_gives_each_local_rank_its_nearest_gpu_as_alcf_does(in_tmp: Path) -> None:
    """ALCF's set_affinity_gpu_polaris.sh: ``gpu=$((num_gpus - 1 - PMI_LOCAL_RANK % num_gpus))``
    (the GPUs are in reverse order of the cores' NUMA domains); before the fix local rank 0 (cores
    0-7 with --depth=8 --cpu-bind depth) got GPU 0, the one farthest from its cores."""
    site = load_site("polaris")
    for rank in range(4):
        env: dict[str, str] = {}
        assert bind_gpus(site, rank, environ=env) == [rank]
        assert env == {"CUDA_VISIBLE_DEVICES": str(4 - 1 - rank % 4)}


def test_aurora_binds_tiles_through_ze_affinity_mask(in_tmp: Path) -> None:
    site = load_site("aurora")
    masks = []
    for rank in range(12):
        env = {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}  # ALCF's default environment (FLAT: test_level_zero_hierarchy)
        assert bind_gpus(site, rank, environ=env) == [rank]
        masks.append(env["ZE_AFFINITY_MASK"])
    assert masks == [f"{g}.{t}" for g in range(6) for t in range(2)]


def test_launcher_binding_reads_what_the_launcher_set(in_tmp: Path) -> None:
    site = load_site("summit")
    env = {"CUDA_VISIBLE_DEVICES": "4"}
    assert bind_gpus(site, 0, environ=env) == [4]
    assert env == {"CUDA_VISIBLE_DEVICES": "4"}
    assert bind_gpus(site, 0, environ={}) == []


def test_local_binding_skips_the_optimizer_rank(in_tmp: Path) -> None:
    assert bind_gpus(load_site("local"), 1, environ={}) == []   # no GPUs configured
    site = load_site("local", overrides=["node.gpus=2", "node.gpus_per_worker=1"])
    env: dict[str, str] = {}
    assert bind_gpus(site, 0, environ=env) == [] and env == {}
    assert bind_gpus(site, 1, environ=env) == [0] and env["CUDA_VISIBLE_DEVICES"] == "0"
    assert bind_gpus(site, 2, environ=env) == [1] and env["CUDA_VISIBLE_DEVICES"] == "1"
    with pytest.raises(ConfigError):
        bind_gpus(site, 3, environ=env)


def test_bind_gpus_sets_os_environ_by_default(in_tmp: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    monkeypatch.delenv("ROCR_VISIBLE_DEVICES", raising=False)
    assert bind_gpus(load_site("frontier"), 5) == [5]
    assert os.environ["ROCR_VISIBLE_DEVICES"] == "7"  # slot 5: GCD 7, nearest cores 41-47


def test_a_teams_launch_line_names_its_hosts_per_launcher(in_tmp: Path) -> None:
    """``ctx.launch``: the site's launcher over the team's nodes, ``{ranks}`` filled in per call."""
    hosts = ("nid1", "nid1", "nid2")
    frontier = load_site("frontier").launcher.team_line(hosts, local=False)
    assert frontier == ["srun", "--overlap", "-N", "2", "-n", "{ranks}", "--nodelist=nid1,nid2",
                        "--cpus-per-task=7"]
    perlmutter = load_site("perlmutter").launcher.team_line(hosts, local=False, gpus_per_rank=1,
                                                            gpu_binding="launcher")
    assert "--overlap" in perlmutter and not [a for a in perlmutter if a.startswith("--gpu")]  # the job's GPUs
    polaris = load_site("polaris").launcher.team_line(hosts, local=False)
    assert polaris[1:5] == ["-n", "{ranks}", "--hosts", "nid1,nid2"] and "--cpu-bind" in polaris
    summit = load_site("summit").launcher.team_line(hosts, local=False, gpus_per_rank=1)
    assert summit == ["jsrun", "-n", "{ranks}", "-a", "1", "-g", "1"]
    local = load_site("local").launcher.team_line(("vm",), local=True)
    assert local == [str(Path(sys.executable).parent / "mpiexec"), "-n", "{ranks}"]


def test_a_teams_launch_line_gives_each_launched_rank_one_members_gpus(in_tmp: Path) -> None:
    """``ctx.launch``'s ranks run through emews.core.launched_gpus with the team's GPU shares per host
    (block placement: world rank r is node-local rank r % ranks-per-node); on aurora they inherited
    team rank 0's one tile, on perlmutter every GPU."""
    import json

    aurora = load_site("aurora", ["scheduler.account=A"])
    line = aurora.team_launch_line((11, 12, 13), ("n0", "n1", "n1"))
    assert line[-5:-2] == (sys.executable, "-m", "emews.core.launched_gpus")
    assert json.loads(line[-2])["env_var"] == "ZE_AFFINITY_MASK"  # spelled as the hierarchy there says
    # with the cores of the member's slot in aurora's --cpu-bind list: slot 11's are 93-100 (socket 1)
    assert json.loads(line[-1]) == {"n0": [{"gpus": ["5.1"], "cores": list(range(93, 101))}],
                                    "n1": [{"gpus": ["0.0"], "cores": list(range(1, 9))},
                                           {"gpus": ["0.1"], "cores": list(range(9, 17))}]}
    two = load_site("perlmutter", ["scheduler.account=A", "node.gpus_per_worker=2", "launcher.workers_per_node=1"])
    line = two.team_launch_line((1, 2), ("n0", "n1"))
    assert json.loads(line[-2])["env_var"] == "CUDA_VISIBLE_DEVICES"
    assert json.loads(line[-1]) == {"n0": [{"gpus": ["2", "3"], "cores": []}], "n1": [{"gpus": ["0", "1"], "cores": []}]}
    assert load_site("local").team_launch_line((1, 2), ("vm", "vm")) == (str(Path(sys.executable).parent / "mpiexec"), "-n", "{ranks}")
    summit = load_site("summit", ["scheduler.account=A"]).team_launch_line((1, 2), ("n0", "n0"))
    assert "emews.core.launched_gpus" not in summit  # jsrun's resource sets have GPUs of their own


def test_a_launched_rank_takes_its_hosts_member_in_turn() -> None:
    from emews.core.launched_gpus import Member, member_of

    members = {"n0": [{"gpus": ["1"], "cores": []}, {"gpus": ["2"], "cores": [5]}]}
    assert [member_of(members, "n0", i) for i in range(3)] == [Member(["1"], []), Member(["2"], [5]), Member(["1"], [])]
    assert member_of(members, "n9", 0) is None


def _aurora_cores(arg: str) -> list[set[int]]:
    """The cores of each rank in ``--cpu-bind=list:A-B:C-D...`` (PALS mpiexec)."""
    ranks = []
    for item in arg.removeprefix("--cpu-bind=list:").split(":"):
        cores: set[int] = set()
        for part in item.split(","):
            low, _, high = part.partition("-")
            cores |= set(range(int(low), int(high or low) + 1))
        ranks.append(cores)
    return ranks


def test_aurora_binds_each_local_rank_to_cores_of_its_tiles_socket(in_tmp: Path) -> None:
    """ALCF's Aurora guide: 12 ranks per node need ``--cpu-bind=list:1-8:...:93-100``; with
    ``--depth=8 --cpu-bind depth`` local rank 6 (tile 3.0, socket 1) ran on cores 49-51 and 53-57, of
    both sockets (the guide's own output); cores 0 and 52 are the system's since March 2025."""
    site = load_site("aurora", ["scheduler.account=A"])
    line = site.launch_command(12, CMD)
    binds = [a for a in line if a.startswith("--cpu-bind")]
    assert len(binds) == 1 and binds[0].startswith("--cpu-bind=list:"), line
    cores = _aurora_cores(binds[0])
    assert len(cores) == 12
    socket1 = set(range(52, 104))
    for rank, ranks_cores in enumerate(cores):
        env = {"ZE_FLAT_DEVICE_HIERARCHY": "COMPOSITE"}
        bind_gpus(site, rank, environ=env)
        gpu = int(env["ZE_AFFINITY_MASK"].split(".")[0])
        want = socket1 if gpu >= 3 else set(range(52))
        assert ranks_cores <= want - {0, 52}, (rank, env, sorted(ranks_cores))


def test_launcher_binding_that_left_every_gpu_visible_gives_each_rank_its_own(in_tmp: Path) -> None:
    """Found on the loopback Slurm with 4 GPUs (no ``Cores=`` in gres.conf, no task CPU binding):
    the perlmutter line's ``srun --gpus-per-task=1 --gpu-bind=closest`` left every task
    ``CUDA_VISIBLE_DEVICES=0,1,2,3``, so every worker reported 4 GPUs and computed on GPU 0; a
    rank now keeps its own slot's share of what the launcher left visible."""
    site = load_site("perlmutter", ["scheduler.account=A"])
    seen = []
    for rank in range(4):
        env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
        seen.append(bind_gpus(site, rank, environ=env))
        assert env == {"CUDA_VISIBLE_DEVICES": str(rank)}
    assert seen == [[0], [1], [2], [3]]
    two = load_site("perlmutter", ["scheduler.account=A", "node.gpus_per_worker=2", "launcher.workers_per_node=1"])
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert bind_gpus(two, 1, environ=env) == [2, 3] and env == {"CUDA_VISIBLE_DEVICES": "2,3"}
    env = {"CUDA_VISIBLE_DEVICES": "1"}  # what the launcher bound is kept as it is
    assert bind_gpus(site, 3, environ=env) == [1] and env == {"CUDA_VISIBLE_DEVICES": "1"}


def test_aurora_numbers_the_gpus_in_pci_order_as_gpu_tile_compact_does(in_tmp: Path) -> None:
    """ALCF's gpu_tile_compact.sh exports ``ZE_ENABLE_PCI_ID_DEVICE_ORDER=1`` with each rank's
    ``ZE_AFFINITY_MASK``; the site said it did what that script does, and left the device order to
    the driver, so mask ``3.0`` need not be the socket-1 GPU the CPU binding puts rank 6 next to."""
    site = load_site("aurora", ["scheduler.account=A"])
    script = site.render_batch_script(Path("/exp"), site.total_workers(None), CMD)
    assert "export ZE_ENABLE_PCI_ID_DEVICE_ORDER=1\n" in script
