"""aurora's ``--cpu-bind=list:`` for the ranks per node the site runs (ALCF's Aurora guide and its
get_cpu_bind_aurora: each rank on cores of the socket of its tiles, cores 0 and 52 the system's).
The site wrote the guide's 12-rank list whatever ``launcher.workers_per_node`` was: 6 ranks of 2
tiles each ran ranks 3-5 (GPUs 3-5, socket 1) on cores 25-48 of socket 0, and 2 ranks of 6 tiles
used 16 of the node's 102 cores, the second one on socket 0 beside GPUs 3-5 of socket 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from site_helpers import FakeTools, launched_with_binding

import emews.cli
from emews.site import bind_gpus, load_site


@pytest.mark.parametrize(
    ("workers_per_node", "gpus_per_worker", "cpu_bind"),
    [
        (11, 1, "1-8:9-16:17-24:25-32:33-40:41-48:53-60:61-68:69-76:77-84:85-92:93-100"),  # the guide's
        (5, 2, "1-17:18-34:35-51:53-69:70-86:87-103"),  # get_cpu_bind_aurora 6
        (1, 6, "1-51:53-103"),  # get_cpu_bind_aurora 2
        (5, 1, "1-8:9-16:17-24:25-32:33-40:41-48"),  # tiles 0.0-2.1: all of socket 0's GPUs
        (3, 3, "1-25:26-50:53-77:78-102"),  # get_cpu_bind_aurora 4
    ],
)
def test_the_job_script_binds_the_ranks_per_node_it_runs(
    in_tmp: Path, fake_tools: FakeTools, workers_per_node: int, gpus_per_worker: int, cpu_bind: str
) -> None:
    overrides = launched_with_binding(in_tmp, fake_tools, "aurora", workers_per_node, gpus_per_worker,
                                      f"--cpu-bind=list:{cpu_bind}")
    site = load_site("aurora", overrides)
    for rank, cores in enumerate(cpu_bind.split(":")):  # every rank's cores on the sockets of its tiles
        gpus = {int(g) for g in bind_gpus(site, rank, environ={})}  # tile t of 12: socket t // 6
        ranges = [part.partition("-") for part in cores.split(",")]
        sockets = {int(low) // 52 for low, _, _ in ranges} | {int(high or low) // 52 for low, _, high in ranges}
        assert sockets == {t // 6 for t in gpus}, (rank, cores, gpus)


def test_more_ranks_than_a_socket_has_cores_is_one_line_naming_the_set_item(
    in_tmp: Path, fake_tools: FakeTools, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = ["--set", "scheduler.account=A", "--set", "launcher.workers_per_node=110", "--set", "node.gpus_per_worker=0"]
    assert emews.cli.main(["launch", "random", "--site", "aurora", *sets, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "emews: error: --set: launcher.workers_per_node: 56 ranks on socket 0 of a node have 51 usable cores "
        "({cpu_bind_list} binds each rank to cores of its own) (allowed: 1..101)"
    )
    assert fake_tools.calls("qsub") == []


def test_cpu_bind_list_on_a_site_without_nodes_is_refused(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = in_tmp / "site-configs"
    folder.mkdir()
    (folder / "mine.yaml").write_text('extends: local\nlauncher:\n  args: ["--bind={cpu_bind_list}"]\n')
    assert emews.cli.main(["launch", "random", "--site", "mine", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"emews: error: {folder / 'mine.yaml'}: launcher.args: {{cpu_bind_list}} binds"), err
    assert "\n" not in err


SEEN = "import json, os; print(json.dumps([sorted(os.sched_getaffinity(0)), os.environ.get('ZE_AFFINITY_MASK')]))"


@pytest.mark.parametrize(("hierarchy", "mask"), [("COMPOSITE", "0.1"), ("FLAT", "1")])
def test_a_rank_ctx_launch_starts_runs_on_its_members_cores_with_its_tile(
    in_tmp: Path, hierarchy: str, mask: str
) -> None:
    """aurora's team line carries the workers' --cpu-bind list, which binds the program's local
    rank i to slot i's cores: a team on slot 11 (tile 5.1, socket 1) launched its rank 0 on cores
    1-8 of socket 0. Each launched rank now takes the cores of the member whose tiles it gets
    (here a real process as launched rank 1 on this host, the team's members on cores 0 and 1)."""
    import os
    import socket
    import subprocess

    from emews.core.launched_gpus import Member, wrapped
    from emews.site.gpus import gpu_binding

    binding = gpu_binding(load_site("aurora", ["scheduler.account=A"]))
    members = {socket.gethostname(): [Member(["0.0"], [0]), Member(["0.1"], [1])]}
    env = {
        **{k: v for k, v in os.environ.items() if k != "PALS_LOCAL_RANKID"},
        "MPI_LOCALRANKID": "1",
        "ZE_FLAT_DEVICE_HIERARCHY": hierarchy,
    }
    done = subprocess.run(
        [*wrapped(binding, members, sys.executable), sys.executable, "-c", SEEN],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == [[1], mask]


def test_gpus_that_do_not_fit_the_rank_slots_are_one_line_not_a_traceback(
    in_tmp: Path, fake_tools: FakeTools, capsys: pytest.CaptureFixture[str]
) -> None:
    """--set node.gpus_per_worker=2 on aurora (12 slots x 2 tiles of 12) laid out the cores of GPUs
    the node does not have: 'IndexError: list index out of range' from emews.site.cpu_bind."""
    sets = ["--set", "scheduler.account=A", "--set", "node.gpus_per_worker=2"]
    assert emews.cli.main(["launch", "random", "--site", "aurora", *sets, "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == (
        "emews: error: --set: node.gpus_per_worker: 12 rank slots per node (11 workers + 1 for the optimizer) "
        "x 2 GPUs need 24 GPUs; a node has 12 (allowed: 1..1)"
    )
    assert fake_tools.calls("qsub") == []
