"""Intel GPUs (aurora): a worker's ``ZE_AFFINITY_MASK`` as the Level Zero device hierarchy in its
environment numbers the tiles. ALCF's Aurora guide: the default environment sets
``ZE_FLAT_DEVICE_HIERARCHY=COMPOSITE`` (tiles masked ``<gpu>.<tile>``, as gpu_tile_compact.sh
does); the frameworks module sets ``FLAT``, "treating each tile as a device" (masks 0..11, its
own binding example: ``ZE_AFFINITY_MASK=$gpu_id`` with 12 GPUs); FLAT is the driver's default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from emews.site import bind_gpus, load_site
from testutil import stored_rows, write_workflow


@pytest.mark.parametrize(
    ("hierarchy", "masks"),
    [
        ("COMPOSITE", ["0.0", "0.1", "1.0", "1.1", "2.0", "2.1", "3.0", "3.1", "4.0", "4.1", "5.0", "5.1"]),
        ("FLAT", [str(i) for i in range(12)]),
        ("flat", [str(i) for i in range(12)]),
        ("COMBINED", [str(i) for i in range(12)]),
        (None, [str(i) for i in range(12)]),  # unset: the driver's default, FLAT
    ],
)
def test_aurora_masks_each_tile_as_the_hierarchy_in_effect_numbers_it(
    in_tmp: Path, hierarchy: str | None, masks: list[str]
) -> None:
    site = load_site("aurora", ["scheduler.account=A"])
    seen = []
    for rank in range(12):
        env = {} if hierarchy is None else {"ZE_FLAT_DEVICE_HIERARCHY": hierarchy}
        assert bind_gpus(site, rank, environ=env) == [rank]  # ctx.gpu_ids: the tile's place on the node
        seen.append(env["ZE_AFFINITY_MASK"])
    assert seen == masks
    two = load_site("aurora", ["scheduler.account=A", "node.gpus_per_worker=2", "launcher.workers_per_node=5"])
    env = {} if hierarchy is None else {"ZE_FLAT_DEVICE_HIERARCHY": hierarchy}
    bind_gpus(two, 4, environ=env)
    assert env["ZE_AFFINITY_MASK"] == ("4.0,4.1" if hierarchy == "COMPOSITE" else "8,9")


OBJECTIVE = """
import os

def run(params, ctx):
    return {"value": float(ctx.gpu_ids[0]), "mask": os.environ.get("ZE_AFFINITY_MASK")}
"""


@pytest.mark.parametrize(("hierarchy", "masks"), [("FLAT", ["0", "1"]), ("COMPOSITE", ["0.0", "0.1"])])
def test_a_run_under_the_sites_hierarchy_gives_each_worker_its_tile(
    emews_cmd, tmp_path: Path, hierarchy: str, masks: list[str]
) -> None:
    """Found here: with ``ZE_FLAT_DEVICE_HIERARCHY=FLAT`` (the frameworks module's) the workers got
    ``ZE_AFFINITY_MASK=0.0`` and ``0.1``, sub-devices that no flat device has."""
    site = {
        "extends": "local",
        "node": {
            "gpus": 4,
            "gpus_per_worker": 1,
            "gpu_env": "ZE_AFFINITY_MASK",
            "gpu_ids": ["0.0", "0.1", "1.0", "1.1"],
        },
        "environment": {"vars": {"ZE_FLAT_DEVICE_HIERARCHY": hierarchy}},
    }
    (tmp_path / "tiles.yaml").write_text(yaml.safe_dump(site))
    (tmp_path / "obj.py").write_text(OBJECTIVE)
    wf = write_workflow(
        tmp_path,
        optimizer={"name": "sweep"},
        objective={"module": str(tmp_path / "obj.py"), "function": "run", "metric": "value"},
        space={"x": {"type": "categorical", "values": [1, 2, 3, 4]}},
        budget={"evaluations": 4},
    )
    proc = emews_cmd("launch", str(wf), "--workers", "2", "--site", "./tiles.yaml", "--exp-dir", "exp", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = stored_rows(tmp_path / "exp")
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}, rows
    by_gpu = {int(r["objective"]): json.loads(r["metrics"])["mask"] for r in rows}
    assert [by_gpu.get(i) for i in range(len(by_gpu))] == masks[: len(by_gpu)], by_gpu
    assert set(by_gpu.values()) <= set(masks)
