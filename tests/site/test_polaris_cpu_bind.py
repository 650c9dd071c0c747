"""polaris's core binding for the ranks per node the site runs. ALCF's Polaris node: 32 cores in 4
NUMA domains of 8, one A100 per domain in reverse order (set_affinity_gpu_polaris.sh: cores 0-7
are nearest GPU 3, ..., 24-31 nearest GPU 0). The site kept the guide's 4-rank
``--depth=8 --cpu-bind depth`` whatever ``launcher.workers_per_node`` and ``node.gpus_per_worker``
were: 2 ranks of 2 GPUs put rank 1 (GPUs 1 and 0, domains 2 and 3) on cores 8-15 of domain 1, and
8 ranks without GPUs ran ranks 4-7 on the hyperthreads of cores 0-31 beside ranks 0-3."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from site_helpers import FakeTools, launched_with_binding

import emews.cli
from emews.core.launched_gpus import MODULE, Member, wrapped
from emews.site import bind_gpus, load_site
from emews.site.gpus import gpu_binding


def _cores(option: str, ranks: int) -> list[set[int]]:
    """Each local rank's cores under PALS ``--depth=D --cpu-bind depth`` or ``--cpu-bind=list:``."""
    if option.startswith("--depth="):
        depth = int(option.split()[0].removeprefix("--depth="))
        return [set(range(rank * depth, (rank + 1) * depth)) for rank in range(ranks)]
    found = []
    for listed in option.removeprefix("--cpu-bind=list:").split(":"):
        cores: set[int] = set()
        for part in listed.split(","):
            low, _, high = part.partition("-")
            cores |= set(range(int(low), int(high or low) + 1))
        found.append(cores)
    return found


@pytest.mark.parametrize(
    ("workers_per_node", "gpus_per_worker", "option"),
    [
        (3, 1, "--depth=8 --cpu-bind depth"),  # the guide's
        (1, 1, "--depth=8 --cpu-bind depth"),
        (1, 2, "--depth=16 --cpu-bind depth"),  # ranks on GPUs 3,2 (cores 0-15) and 1,0 (16-31)
        (7, 0, "--depth=4 --cpu-bind depth"),  # two ranks per domain, no hyperthreads
        (1, 0, "--depth=16 --cpu-bind depth"),
        (5, 0, "--cpu-bind=list:0-3:4-7:8-15:16-19:20-23:24-31"),
    ],
)
def test_the_job_script_binds_each_rank_next_to_its_gpus(
    in_tmp: Path, fake_tools: FakeTools, workers_per_node: int, gpus_per_worker: int, option: str
) -> None:
    overrides = launched_with_binding(in_tmp, fake_tools, "polaris", workers_per_node, gpus_per_worker, option)
    site = load_site("polaris", overrides)
    cores = _cores(option, workers_per_node + 1)
    assert set().union(*cores) <= set(range(32)) and sum(map(len, cores)) == len(set().union(*cores))
    for rank, on in enumerate(cores):  # GPU g sits on domain 3 - g (cores 8(3-g)..8(3-g)+7)
        env: dict[str, str] = {}
        bind_gpus(site, rank, environ=env)
        gpus = [int(g) for g in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
        if gpus:
            assert {core // 8 for core in on} == {3 - g for g in gpus}, (rank, on, gpus)


def test_more_ranks_than_a_domain_has_cores_is_one_line_naming_the_set_item(
    in_tmp: Path, fake_tools: FakeTools, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = ["--set", "scheduler.account=A", "--set", "launcher.workers_per_node=32", "--set", "node.gpus_per_worker=0"]
    assert emews.cli.main(["launch", "random", "--site", "polaris", *sets, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "emews: error: --set: launcher.workers_per_node: 9 ranks on socket 0 of a node have 8 usable cores "
        "({cpu_bind} binds each rank to cores of its own) (allowed: 1..31)"
    )
    assert fake_tools.calls("qsub") == []


def test_ranks_ctx_launch_starts_take_their_members_gpus_and_cores(in_tmp: Path) -> None:
    """A team on slots 2 and 3 (GPUs 1 and 0, domains 2 and 3): the team line (which carries the
    workers' --depth=8 --cpu-bind depth, binding the program's local rank i to cores 8i..8i+7) now
    gives each launched rank its member's cores as well as its GPU; before, only the GPU."""
    site = load_site("polaris", ["scheduler.account=A"])
    line = site.team_launch_line((2, 3), ("nid1", "nid1"))
    at = line.index(MODULE)
    assert line[:at] == (
        "mpiexec",
        "-n",
        "{ranks}",
        "--hosts",
        "nid1",
        "--depth=8",
        "--cpu-bind",
        "depth",
        sys.executable,
        "-m",
    )
    assert json.loads(line[at + 2]) == {
        "nid1": [{"gpus": ["1"], "cores": list(range(16, 24))}, {"gpus": ["0"], "cores": list(range(24, 32))}]
    }
    # a real process as launched rank 1 here takes its member's GPU and cores (this host's 0 and 1)
    members = {socket.gethostname(): [Member(["1"], [0]), Member(["0"], [1])]}
    seen = "import json, os; print(json.dumps([sorted(os.sched_getaffinity(0)), os.environ['CUDA_VISIBLE_DEVICES']]))"
    env = {**{k: v for k, v in os.environ.items() if k != "MPI_LOCALRANKID"}, "PALS_LOCAL_RANKID": "1"}
    done = subprocess.run(
        [*wrapped(gpu_binding(site), members, sys.executable), sys.executable, "-c", seen],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == [[1], "0"]


def test_cpu_bind_inside_another_argument_is_refused(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``{cpu_bind}`` is whole arguments (``--depth=8 --cpu-bind depth``); inside one it would be
    passed to mpiexec as written."""
    folder = in_tmp / "site-configs"
    folder.mkdir()
    (folder / "mine.yaml").write_text('extends: polaris\nlauncher:\n  args: ["--bind={cpu_bind}"]\n')
    assert emews.cli.main(["launch", "random", "--site", "mine", "--set", "scheduler.account=A", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"emews: error: {folder / 'mine.yaml'}: launcher.args: {{cpu_bind}} stands for whole launcher arguments, "
        "not part of one (allowed: {cpu_bind} as an argument of its own, or --cpu-bind=list:{cpu_bind_list})"
    )
